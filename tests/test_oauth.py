"""om-mcp's own OAuth 2.1 authorization server (`serve --oauth --public-url URL`), end to end.

The MCP Python SDK's own OAuth client discovers, registers, authorizes through the consent page
(the code `om-mcp connect` printed, the resource the owner chose), exchanges the code, calls a
tool, refreshes and revokes; the grant is the client's tenant scope. Then every bad input of the
flow gets the error RFC 6749 / 7636 / 8707 names, and nothing is granted (one table).
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from support.mcp import fail, ok
from support.oauth import (
    CALLBACK,
    Browser,
    Served,
    Transcript,
    authorize_url,
    grant,
    oauth_server,
    pkce,
    query,
    register,
    token,
)
from support.processes import run_om
from support.timeouts import scaled

from om_mcp.config import ConfigError, hash_token, load_config

pytestmark = pytest.mark.anyio


class Storage:
    """The SDK client's token storage, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


def sdk_client(served: Served, code: str, resources: str, transcript: Transcript) -> OAuthClientProvider:
    """The SDK's OAuth client, whose "browser" approves on the consent page with `code`."""
    browser = Browser(transcript)
    answers: list[AuthorizationCodeResult] = []

    async def redirect(url: str) -> None:
        answer = await browser.consent(url, code, resources)
        assert answer.status_code == 302, answer.text
        back = query(answer.headers["location"])
        answers.append(AuthorizationCodeResult(code=back["code"], state=back.get("state"), iss=back.get("iss")))

    async def callback() -> AuthorizationCodeResult:
        return answers.pop()

    metadata = OAuthClientMetadata(redirect_uris=[CALLBACK], client_name="the SDK's client")  # type: ignore[list-item]
    return OAuthClientProvider(served.url, metadata, Storage(), redirect, callback)


@pytest.mark.slow
async def test_the_sdk_client_connects_through_the_consent_page(make_config, tmp_path):
    async with oauth_server(make_config) as served:
        # The owner asks for a code the way a person does: `om-mcp connect --json`, on the same database.
        printed = run_om(
            "connect", "--json", "--public-url", served.base, "--db", str(served.config.db_path), home=tmp_path
        )
        assert printed.returncode == 0, printed.stderr
        shown = json.loads(printed.stdout)
        assert shown["url"] == served.url

        transcript = Transcript()
        auth = sdk_client(served, shown["code"], "alice", transcript)
        hooks = {"response": [transcript.response]}
        async with httpx2.AsyncClient(auth=auth, timeout=scaled(30), event_hooks=hooks) as http:
            async with Client(streamable_http_client(served.url, http_client=http)) as client:
                note = {"id": "m1", "role": "user", "content": "the kettle is descaled on Sundays"}
                assert (await ok(client, "append_messages", thread_id="t-alice", messages=[note]))["stored"] == 1
                # The grant is the client's tenant scope: its one resource, and no other.
                threads = (await client.read_resource("om://resources/alice/threads")).contents[0]
                assert "t-alice" in threads.text  # type: ignore[union-attr]
                refused = await fail(client, "append_messages", thread_id="t2", resource_id="bob", messages=[note])
                assert "resource 'bob' is not allowed for this token (it may use: alice)" in refused
                first = auth.context.current_tokens
                assert first is not None and first.refresh_token

                # The access token runs out: the client refreshes, and the refresh token rotates.
                auth.context.token_expiry_time = time.time() - 1
                context = await ok(client, "get_context", thread_id="t-alice")
                assert [m["id"] for m in context["messages"]] == ["m1"]
                second = auth.context.current_tokens
                assert second is not None and second.access_token != first.access_token
                assert second.refresh_token != first.refresh_token

        steps = [(m, p.split("?")[0], s) for m, p, s in transcript.steps]
        print("\nthe SDK client's HTTP steps:\n" + transcript.text())
        wanted = [
            ("POST", "/mcp", 401),
            ("GET", "/.well-known/oauth-protected-resource/mcp", 200),
            ("GET", "/.well-known/oauth-authorization-server", 200),
            ("POST", "/register", 201),
            ("GET", "/authorize", 302),  # the SDK's checks, then the consent page
            ("GET", "/authorize", 200),  # the form
            ("POST", "/authorize", 302),  # approved: back to the client with a code
            ("POST", "/token", 200),  # the code and its PKCE verifier
            ("POST", "/mcp", 200),
            ("POST", "/token", 200),  # refresh
        ]
        at = 0
        for step in steps:
            if at < len(wanted) and step == wanted[at]:
                at += 1
        assert at == len(wanted), f"missing {wanted[at]} in:\n{transcript.text()}"

        # Revocation (RFC 7009) ends the grant: its access token is refused, its refresh token too.
        client_id = auth.context.client_info.client_id  # type: ignore[union-attr]
        async with httpx2.AsyncClient(timeout=scaled(30)) as http:
            revoked = await http.post(
                f"{served.base}/revoke", data={"token": second.access_token, "client_id": client_id}
            )
            assert revoked.status_code == 200
            after = await http.post(
                served.url,
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                headers={"Authorization": f"Bearer {second.access_token}", "Mcp-Protocol-Version": "2026-07-28"},
            )
            assert after.status_code == 401
        again = await token(
            served.base, grant_type="refresh_token", refresh_token=second.refresh_token, client_id=client_id
        )
        assert again.status_code == 400 and again.json()["error"] == "invalid_grant"

        listed = run_om("token", "list", "--json", "--db", str(served.config.db_path), home=tmp_path)
        assert listed.returncode == 0, listed.stderr
        [row] = [r for r in json.loads(listed.stdout) if r["kind"] == "oauth"]
        assert row["who"] == "the SDK's client" and row["resources"] == "alice" and row["state"] == "revoked"


async def test_metadata_documents_name_this_server(make_config):
    async with oauth_server(make_config) as served:
        async with httpx2.AsyncClient(timeout=scaled(30)) as http:
            resource = (await http.get(f"{served.base}/.well-known/oauth-protected-resource/mcp")).json()
            server = (await http.get(f"{served.base}/.well-known/oauth-authorization-server")).json()
            challenge = (await http.post(served.url, json={})).headers["www-authenticate"]
    assert resource["resource"] == served.url and resource["authorization_servers"] == [served.base]
    assert server["issuer"] == served.base
    assert server["code_challenge_methods_supported"] == ["S256"]
    assert server["token_endpoint_auth_methods_supported"] == ["none"]
    assert server["authorization_response_iss_parameter_supported"] is True
    for endpoint in ("authorization", "token", "registration", "revocation"):
        assert server[f"{endpoint}_endpoint"].startswith(served.base + "/")
    assert f'resource_metadata="{served.base}/.well-known/oauth-protected-resource/mcp"' in challenge


async def test_a_grant_is_listed_and_revoked_by_the_token_commands(make_config, tmp_path):
    async with oauth_server(make_config) as served:
        got = await grant(served, "alice, team")
        db = str(served.config.db_path)
        listed = run_om("token", "list", "--json", "--db", db, home=tmp_path)
        [row] = [r for r in json.loads(listed.stdout) if r["kind"] == "oauth"]
        assert row["resources"] == "alice, team" and row["state"] == "active"
        assert run_om("token", "revoke", row["id"], "--db", db, home=tmp_path).returncode == 0
        assert run_om("token", "revoke", row["id"], "--db", db, home=tmp_path).returncode == 4
        assert await tools_status(served, got["access_token"]) == 401


async def tools_status(served: Served, access_token: str) -> int:
    async with httpx2.AsyncClient(timeout=scaled(30)) as http:
        response = await http.post(
            served.url,
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={
                "Authorization": f"Bearer {access_token}",
                "Mcp-Protocol-Version": "2026-07-28",
                "Accept": "application/json, text/event-stream",
            },
        )
        return response.status_code


def expire(served: Served, kind: str) -> None:
    """Time passes for every secret of `kind` (the database's clock is the one the server reads)."""
    with sqlite3.connect(served.config.db_path) as db:
        db.execute("UPDATE om_oauth_secrets SET expires_at = 1 WHERE kind = ?", (kind,))


# -- bad input: the error the spec names, and nothing granted -----------------------------------------

Case = Callable[[Served], Awaitable[tuple[int, str, Any]]]
# Cases that make a grant on purpose (by the right flow) and then try something bad with it: the grant
# may stay live, as long as the bad request added nothing.
KEEPS_ITS_GRANT = {"another client's refresh token", "expired access token"}


async def unregistered_redirect(served: Served) -> tuple[int, str, Any]:
    client_id = (await register(served.base)).json()["client_id"]
    _, challenge = pkce()
    url = authorize_url(served.base, client_id, challenge, redirect_uri="http://127.0.0.1:9/elsewhere")
    answer = await Browser().consent(url, await served.consent_code(), "alice")
    return answer.status_code, answer.json()["error"], None  # not redirected: the URI is not the client's


async def unknown_client(served: Served) -> tuple[int, str, Any]:
    _, challenge = pkce()
    answer = await Browser().consent(authorize_url(served.base, "nobody", challenge), "x", "alice")
    return answer.status_code, answer.json()["error"], None


async def no_pkce_challenge(served: Served) -> tuple[int, str, Any]:
    client_id = (await register(served.base)).json()["client_id"]
    answer = await Browser().consent(authorize_url(served.base, client_id, None), "x", "alice")
    return answer.status_code, query(answer.headers["location"])["error"], None


async def plain_pkce(served: Served) -> tuple[int, str, Any]:
    client_id = (await register(served.base)).json()["client_id"]
    url = authorize_url(served.base, client_id, "a" * 43, code_challenge_method="plain")
    answer = await Browser().consent(url, "x", "alice")
    return answer.status_code, query(answer.headers["location"])["error"], None


async def foreign_resource(served: Served) -> tuple[int, str, Any]:
    client_id = (await register(served.base)).json()["client_id"]
    _, challenge = pkce()
    url = authorize_url(served.base, client_id, challenge, resource="https://other.example/mcp")
    answer = await Browser().consent(url, await served.consent_code(), "alice")
    return answer.status_code, query(answer.headers["location"])["error"], None


async def http_redirect_registered(served: Served) -> tuple[int, str, Any]:
    answer = await register(served.base, redirect="http://attacker.example/cb")
    return answer.status_code, answer.json()["error"], None


async def wrong_consent_code(served: Served) -> tuple[int, str, Any]:
    """Each wrong code answers 403 with the form again; the limit ends the request with access_denied,
    and voids the right code too."""
    right = await served.consent_code()
    client_id = (await register(served.base)).json()["client_id"]
    _, challenge = pkce()
    statuses = []
    for _ in range(served.config.server.oauth.consent_guesses):
        answer = await Browser().consent(authorize_url(served.base, client_id, challenge), "WRONG-CODE-0000", "alice")
        statuses.append(answer.status_code)
    assert statuses[:-1] == [403] * (len(statuses) - 1)
    late = await Browser().consent(authorize_url(served.base, client_id, challenge), right, "alice")
    assert query(late.headers["location"])["error"] == "access_denied"  # the right code, too late: void
    return answer.status_code, query(answer.headers["location"])["error"], None


async def missing_verifier(served: Served) -> tuple[int, str, Any]:
    return await _exchange(served, verifier=None)


async def wrong_verifier(served: Served) -> tuple[int, str, Any]:
    return await _exchange(served, verifier=pkce()[0])


async def expired_code(served: Served) -> tuple[int, str, Any]:
    return await _exchange(served, expire_first=True)


async def _exchange(served: Served, verifier: str | None = "right", expire_first: bool = False) -> tuple[int, str, Any]:
    client_id = (await register(served.base)).json()["client_id"]
    right, challenge = pkce()
    answer = await Browser().consent(
        authorize_url(served.base, client_id, challenge), await served.consent_code(), "alice"
    )
    code = query(answer.headers["location"])["code"]
    if expire_first:
        expire(served, "code")
    form = {"grant_type": "authorization_code", "code": code, "redirect_uri": CALLBACK, "client_id": client_id}
    if verifier is not None:
        form["code_verifier"] = right if verifier == "right" else verifier
    refused = await token(served.base, **form)
    return refused.status_code, refused.json()["error"], None


async def reused_code(served: Served) -> tuple[int, str, Any]:
    """A code exchanged twice: refused, and the tokens the first exchange issued are revoked."""
    got = await grant(served)
    again = await token(
        served.base,
        grant_type="authorization_code",
        code=got["code"],
        redirect_uri=CALLBACK,
        client_id=got["client_id"],
        code_verifier=got["verifier"],
    )
    return again.status_code, again.json()["error"], got["access_token"]


async def replayed_refresh_token(served: Served) -> tuple[int, str, Any]:
    """A rotated refresh token used again: refused, and its whole family (the grant) revoked."""
    got = await grant(served)
    rotated = await token(
        served.base, grant_type="refresh_token", refresh_token=got["refresh_token"], client_id=got["client_id"]
    )
    assert rotated.status_code == 200
    replay = await token(
        served.base, grant_type="refresh_token", refresh_token=got["refresh_token"], client_id=got["client_id"]
    )
    return replay.status_code, replay.json()["error"], rotated.json()["access_token"]


async def expired_access_token(served: Served) -> tuple[int, str, Any]:
    got = await grant(served)
    expire(served, "access")
    return await tools_status(served, got["access_token"]), "invalid_token", None


async def revoked_access_token(served: Served) -> tuple[int, str, Any]:
    got = await grant(served)
    async with httpx2.AsyncClient(timeout=scaled(30)) as http:
        await http.post(f"{served.base}/revoke", data={"token": got["refresh_token"], "client_id": got["client_id"]})
    return await tools_status(served, got["access_token"]), "invalid_token", None


async def another_clients_refresh_token(served: Served) -> tuple[int, str, Any]:
    got = await grant(served)
    other = (await register(served.base)).json()["client_id"]
    stolen = await token(served.base, grant_type="refresh_token", refresh_token=got["refresh_token"], client_id=other)
    return stolen.status_code, stolen.json()["error"], None


CASES: dict[str, tuple[Case, int, str]] = {
    "unregistered redirect URI": (unregistered_redirect, 400, "invalid_request"),
    "unknown client": (unknown_client, 400, "invalid_request"),
    "http redirect URI to another host": (http_redirect_registered, 400, "invalid_redirect_uri"),
    "no PKCE challenge": (no_pkce_challenge, 302, "invalid_request"),
    "PKCE method plain": (plain_pkce, 302, "invalid_request"),
    "resource of another server (RFC 8707)": (foreign_resource, 302, "invalid_target"),
    "wrong consent code, guesses spent": (wrong_consent_code, 302, "access_denied"),
    "missing PKCE verifier": (missing_verifier, 400, "invalid_request"),
    "wrong PKCE verifier": (wrong_verifier, 400, "invalid_grant"),
    "expired code": (expired_code, 400, "invalid_grant"),
    "reused code": (reused_code, 400, "invalid_grant"),
    "replayed refresh token": (replayed_refresh_token, 400, "invalid_grant"),
    "another client's refresh token": (another_clients_refresh_token, 400, "invalid_grant"),
    "expired access token": (expired_access_token, 401, "invalid_token"),
    "revoked access token": (revoked_access_token, 401, "invalid_token"),
}


@pytest.mark.slow
async def test_bad_input_gets_the_named_error_and_nothing_is_granted(make_config):
    """One server, every case in turn; after each, no new grant is live but the ones a case made
    on purpose (which the failure revoked where the spec says so)."""
    table = []
    async with oauth_server(make_config) as served:
        for name, (case, status, error) in CASES.items():
            before = await live_grants(served)
            got_status, got_error, revoked = await case(served)
            table.append((name, got_status, got_error))
            assert (got_status, got_error) == (status, error), name
            if revoked is not None:  # what a replay issued no longer works
                assert await tools_status(served, revoked) == 401, name
            grown = len(await live_grants(served) - before)
            assert grown <= (name in KEEPS_ITS_GRANT), f"{name}: something was granted"
    print("\n" + "\n".join(f"{n:40} {s} {e}" for n, s, e in table))


async def live_grants(served: Served) -> set[str]:
    with sqlite3.connect(served.config.db_path) as db:
        rows = db.execute(
            "SELECT DISTINCT grant_id FROM om_oauth_secrets WHERE kind IN ('access', 'refresh')"
            " AND used_at IS NULL AND expires_at > ? AND grant_id IN"
            " (SELECT id FROM om_oauth_grants WHERE revoked_at IS NULL)",
            (time.time(),),
        ).fetchall()
    return {r[0] for r in rows}


def test_oauth_options_are_checked_at_start(tmp_path):
    config = tmp_path / "c.toml"
    both = '[server.oauth]\nenabled = true\nissuer = "https://id.example.com"\n'
    cases = {
        "[server.oauth]\nenabled = true\n": "public_url",
        '[server]\npublic_url = "http://memory.example.com"\n': "https",
        '[server]\npublic_url = "https://memory.example.com/other"\n': "public_url",
        '[server]\npublic_url = "https://m.example.com"\n' + both: "choose one",
        '[server]\npublic_url = "https://m.example.com"\n[server.oauth]\nissuer = "https://id.example.com"\n': (
            "identities"
        ),
    }
    for text, words in cases.items():
        config.write_text(text)
        with pytest.raises(ConfigError, match=words):
            load_config(str(config), env={})
    config.write_text('[server]\npublic_url = "https://memory.example.com/mcp"\n[server.oauth]\nenabled = true\n')
    loaded = load_config(str(config), env={})
    assert loaded.server.public_url == "https://memory.example.com" and loaded.server.auth.mode == "bearer"


async def test_the_consent_page_is_plain_html_that_cannot_be_framed(make_config):
    async with oauth_server(make_config) as served:
        client_id = (await register(served.base, client_name="<script>alert(1)</script>")).json()["client_id"]
        _, challenge = pkce()
        async with httpx2.AsyncClient(timeout=scaled(30)) as http:
            first = await http.get(authorize_url(served.base, client_id, challenge))
            page = await http.get(first.headers["location"])
    assert (
        page.headers["x-frame-options"] == "DENY"
        and "frame-ancestors 'none'" in page.headers["content-security-policy"]
    )
    assert "<script>" not in page.text and "&lt;script&gt;" in page.text
    assert "name=code" in page.text and "name=resource" in page.text


async def test_the_status_page_lists_grants_to_an_admin_and_revokes_them(make_config):
    """`/api/grants` for an admin token (the owner's), 403 for a tenant's (an OAuth grant for one
    resource); revoking there ends the client's tokens."""
    admin = "om_admin-token-for-the-status-page-0123"
    tokens = [{"name": "owner", "hash": hash_token(admin), "resources": ["*"]}]
    async with oauth_server(make_config, auth={"tokens": tokens}) as served:
        got = await grant(served, "alice")
        async with httpx2.AsyncClient(timeout=scaled(30)) as http:
            owner = {"Authorization": f"Bearer {admin}"}
            tenant = {"Authorization": f"Bearer {got['access_token']}"}
            refused = await http.get(f"{served.base}/api/grants", headers=tenant)
            assert refused.status_code == 403 and "admin" in refused.json()["error"]
            [listed] = (await http.get(f"{served.base}/api/grants", headers=owner)).json()
            assert (listed["client"], listed["resources"], listed["state"]) == ("test client", ["alice"], "active")
            assert (await http.delete(f"{served.base}/api/grants/{listed['id']}", headers=tenant)).status_code == 403
            revoked = await http.delete(f"{served.base}/api/grants/{listed['id']}", headers=owner)
            assert revoked.status_code == 200 and revoked.json()["state"] == "revoked"
            assert (await http.delete(f"{served.base}/api/grants/g_nobody", headers=owner)).status_code == 404
        assert await tools_status(served, got["access_token"]) == 401
