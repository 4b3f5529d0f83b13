"""OAuth for tests: om-mcp's HTTP app with its authorization server on a loopback port, a
"browser" that goes through the consent page, PKCE, and a transcript of the HTTP steps."""

from __future__ import annotations

import base64
import hashlib
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import anyio
import httpx2
import uvicorn

from om_mcp.config import Config
from om_mcp.server import build_server
from om_mcp.server.http import build_http_app
from om_mcp.server.http.run import uvicorn_config
from om_mcp.testing.ports import free_port
from support.timeouts import scaled

CALLBACK = "http://127.0.0.1:9/callback"  # never reached: the test reads the redirect's Location


@dataclass
class Served:
    url: str  # the MCP endpoint
    base: str  # the issuer
    config: Config
    server: Any

    async def consent_code(self, resources: list[str] | None = None) -> str:
        """What `om-mcp connect` prints, made through the running server's own engine: a second
        SQLite connection opened and closed in this process would drop the server's file locks
        (POSIX record locks belong to the process; store/sqlite/checks.py reads the header with a
        plain file handle)."""
        return await self.server.live.memory.grants.consent_code(resources)


@asynccontextmanager
async def oauth_server(make_config, auth: dict[str, Any] | None = None, **oauth: Any) -> AsyncIterator[Served]:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    # Off: a test makes more requests without a token in a minute than a person's logins do.
    http = {"failed_auth_per_minute": 0, "failed_auth_total_per_minute": 0}
    config = make_config(
        server={
            "transport": "http",
            "port": port,
            "public_url": base,
            "oauth": {"enabled": True, **oauth},
            "http": http,
            **({"auth": auth} if auth else {}),
        }
    )
    server = build_server(config)
    app = build_http_app(server, config)
    web = uvicorn.Server(uvicorn_config(app, config, host="127.0.0.1", lifespan="on"))
    async with anyio.create_task_group() as group:
        group.start_soon(web.serve)
        with anyio.fail_after(scaled(20)):
            while not web.started:
                await anyio.sleep(0.01)
        try:
            yield Served(f"{base}/mcp", base, config, server)
        finally:
            web.should_exit = True


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    return verifier, challenge


def query(location: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}


@dataclass
class Transcript:
    """Every HTTP exchange a client made: (method, path, status, note)."""

    steps: list[tuple[str, str, int]] = field(default_factory=list)

    async def response(self, response: httpx2.Response) -> None:
        request = response.request
        path = request.url.path + (f"?{request.url.query.decode()[:60]}" if request.url.query else "")
        self.steps.append((request.method, path, response.status_code))

    def text(self) -> str:
        return "\n".join(f"{m:6} {p:70} {s}" for m, p, s in self.steps)


class Browser:
    """What a person's browser does between the client's authorization URL and its callback."""

    def __init__(self, transcript: Transcript | None = None) -> None:
        self.transcript = transcript or Transcript()

    async def consent(self, authorize_url: str, code: str, resources: str, action: str = "approve") -> httpx2.Response:
        """Open the authorization URL, follow to the consent page, submit it; the final response
        (a redirect to the client, or the page again)."""
        hooks = {"response": [self.transcript.response]}
        async with httpx2.AsyncClient(timeout=scaled(30), event_hooks=hooks) as http:
            first = await http.get(authorize_url)
            if first.status_code != 302 or "consent=" not in first.headers["location"]:
                return first
            page = await http.get(first.headers["location"])
            assert page.status_code == 200 and 'name="code"' in page.text.replace("name=code", 'name="code"')
            return await http.post(
                first.headers["location"], data={"code": code, "resource": resources, "action": action}
            )


async def register(base: str, redirect: str = CALLBACK, **extra: Any) -> httpx2.Response:
    async with httpx2.AsyncClient(timeout=scaled(30)) as http:
        return await http.post(
            f"{base}/register", json={"redirect_uris": [redirect], "client_name": "test client", **extra}
        )


def authorize_url(base: str, client_id: str, challenge: str | None, **extra: str) -> str:
    params = {"response_type": "code", "client_id": client_id, "redirect_uri": CALLBACK, "state": "s1", **extra}
    if challenge is not None:
        params.setdefault("code_challenge", challenge)
        params.setdefault("code_challenge_method", "S256")
    return f"{base}/authorize?{urlencode(params)}"


async def token(base: str, **form: str) -> httpx2.Response:
    async with httpx2.AsyncClient(timeout=scaled(30)) as http:
        return await http.post(f"{base}/token", data=form)


async def grant(served: Served, resources: str = "alice") -> dict[str, Any]:
    """Register, consent and exchange by hand: the client's id, the tokens, the PKCE verifier."""
    client_id = (await register(served.base)).json()["client_id"]
    verifier, challenge = pkce()
    answer = await Browser().consent(
        authorize_url(served.base, client_id, challenge), await served.consent_code(), resources
    )
    code = query(answer.headers["location"])["code"]
    tokens = await token(
        served.base,
        grant_type="authorization_code",
        code=code,
        redirect_uri=CALLBACK,
        client_id=client_id,
        code_verifier=verifier,
    )
    assert tokens.status_code == 200, tokens.text
    return {"client_id": client_id, "code": code, "verifier": verifier, **tokens.json()}
