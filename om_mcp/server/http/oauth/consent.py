"""The consent page: where the owner approves a client, at the authorization endpoint.

The SDK's authorization handler checks the request (client, redirect URI, PKCE S256) and asks
the provider where to send the browser; the provider answers with this page
(`/authorize?consent=ID`), holding the checked request under an unguessable id. The page is a
plain HTML form with two fields: `code`, a one-time code that `om-mcp connect` printed (so only
someone at the server's shell can approve), and `resource`, the resources the client may use
(the grant becomes its tenant scope). Approving redirects back to the client with an
authorization code; denying, or too many wrong codes, with `access_denied` (RFC 6749 §4.1.2.1).

Wrong codes are limited twice: each pending request allows `consent_guesses` tries, and every
wrong code also counts against every outstanding code in the database (`Grants.consent`), so
guessing across many requests voids the codes instead of finding one.
"""

from __future__ import annotations

import html
import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from mcp.server.auth.provider import AuthorizationParams, construct_redirect_uri
from mcp.shared.auth import OAuthClientInformationFull
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from om_mcp.config import OAuthConfig
from om_mcp.engine import ConsentRefused, Grants, InputError

log = logging.getLogger(__name__)

MAX_PENDING = 256  # requests waiting for the owner at once; the oldest go first
HEADERS = {
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
    "Referrer-Policy": "no-referrer",
}


@dataclass
class Pending:
    client: OAuthClientInformationFull
    params: AuthorizationParams
    created: float
    wrong: int = 0


class ConsentPage:
    """Pending authorization requests and the form that settles them (see the module docstring)."""

    def __init__(self, grants: Callable[[], Awaitable[Grants]], issuer: str, settings: OAuthConfig) -> None:
        self._grants = grants
        self.issuer = issuer
        self.settings = settings
        self.pending: OrderedDict[str, Pending] = OrderedDict()

    @property
    def _lifetime(self) -> float:
        return self.settings.consent_code_minutes * 60

    def begin(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        """Hold a checked authorization request; the URL of its consent page."""
        now = time.monotonic()
        for key, held in list(self.pending.items()):
            if now - held.created > self._lifetime or len(self.pending) >= MAX_PENDING:
                del self.pending[key]
        ident = secrets.token_urlsafe(24)
        self.pending[ident] = Pending(client, params, now)
        return f"{self.issuer}/authorize?consent={ident}"

    async def __call__(self, request: Request) -> Response:
        ident = request.query_params.get("consent", "")
        held = self.pending.get(ident)
        if held is None or time.monotonic() - held.created > self._lifetime:
            self.pending.pop(ident, None)
            return _page("This sign-in request is unknown or expired. Start connecting again from the app.", status=400)
        if request.method == "GET":
            return _form(ident, held)
        form = await request.form()
        if form.get("action") == "deny":
            del self.pending[ident]
            return self._back(held, error="access_denied", error_description="the owner denied access")
        code = str(form.get("code") or "")
        resources = [str(v) for v in form.getlist("resource")]
        request_detail = {
            "code_challenge": held.params.code_challenge,
            "redirect_uri": str(held.params.redirect_uri),
            "redirect_uri_provided_explicitly": held.params.redirect_uri_provided_explicitly,
            "scopes": held.params.scopes or [],
        }
        try:
            auth_code = await (await self._grants()).consent(code, held.client.client_id, resources, request_detail)
        except InputError as error:
            return _form(ident, held, problem=str(error), status=400)
        except ConsentRefused as error:
            held.wrong += 1
            left = self.settings.consent_guesses - held.wrong
            log.warning(
                "a wrong consent code for client %s (%d of %d tries)",
                held.client.client_id,
                held.wrong,
                self.settings.consent_guesses,
            )
            if left <= 0 or error.left == 0:
                del self.pending[ident]
                return self._back(held, error="access_denied", error_description="too many wrong consent codes")
            return _form(ident, held, problem=f"{error} {left} tries left.", status=403)
        del self.pending[ident]
        log.info("OAuth client %s approved for %s", held.client.client_id, ", ".join(resources))
        return self._back(held, code=auth_code)

    def _back(self, held: Pending, **answer: str) -> Response:
        """Redirect to the client with `answer`, its state, and this issuer (RFC 9207)."""
        url = construct_redirect_uri(str(held.params.redirect_uri), **answer, state=held.params.state, iss=self.issuer)
        return RedirectResponse(url, status_code=302, headers=HEADERS)


def _page(body: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(
        f"<!doctype html><html lang=en><meta charset=utf-8><title>om-mcp</title>"
        f"<meta name=viewport content='width=device-width'>{STYLE}<main><h1>om-mcp</h1>{body}</main></html>",
        status_code=status,
        headers=HEADERS,
    )


def _form(ident: str, held: Pending, problem: str = "", status: int = 200) -> HTMLResponse:
    client = held.client
    name = html.escape(client.client_name or "An unnamed client")
    target = urlsplit(str(held.params.redirect_uri))
    where = html.escape(f"{target.scheme}://{target.netloc}{target.path}")
    alert = f"<p class=problem role=alert>{html.escape(problem)}</p>" if problem else ""
    body = f"""
<p><b>{name}</b> asks to use this memory server. When you approve, it will be sent back to
<code>{where}</code>.</p>
{alert}
<form method=post action="/authorize?consent={html.escape(ident)}">
<label>Code from <code>om-mcp connect</code>
<input name=code autocomplete=one-time-code autocapitalize=characters spellcheck=false required autofocus></label>
<label>Resources it may use (comma-separated; <code>*</code> for all)
<input name=resource required spellcheck=false></label>
<button name=action value=approve>Approve</button> <button name=action value=deny formnovalidate>Deny</button>
</form>"""
    return _page(body, status)


STYLE = """<style>
body{font:16px/1.5 system-ui,sans-serif;margin:0;background:#f6f6f4;color:#222}
main{max-width:32rem;margin:3rem auto;padding:1.5rem 2rem;background:#fff;border-radius:8px;box-shadow:0 1px 3px #0002}
label{display:block;margin:1rem 0}input{display:block;width:100%;box-sizing:border-box;padding:.5rem;font:inherit}
button{font:inherit;padding:.4rem 1rem;margin-right:.5rem}.problem{color:#a00}
</style>"""
