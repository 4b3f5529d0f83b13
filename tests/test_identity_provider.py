"""A team's own identity provider (`serve --oauth-issuer URL`), against a real one on loopback.

The provider is panva's certified `oidc-provider` from the npm registry (`.ci/run` installs it;
without node or the package these tests skip, saying so), run by `fixtures/oidc_provider.mjs`:
its keys are made by node, its JWT access tokens signed by it. om-mcp accepts its tokens for
this server, maps the identity claim to resources (the tenant scope), follows a key rotation,
and refuses every bad token in the table, including when the keys cannot be fetched.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import shutil
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import jwt
import pytest
import uvicorn
from cryptography.hazmat.primitives import serialization
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from support.mcp import fail, ok
from support.processes import clean_env
from support.timeouts import scaled

from om_mcp.config import OAuthConfig
from om_mcp.server import build_server
from om_mcp.server.http import build_http_app
from om_mcp.server.http.auth import RESOURCES_CLAIM
from om_mcp.server.http.oauth.issuer import REFETCH_UNKNOWN_KID_SECONDS, IssuerTokens
from om_mcp.server.http.run import uvicorn_config
from om_mcp.testing.ports import free_port

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

SCRIPT = Path(__file__).parent / "fixtures" / "oidc_provider.mjs"
IDENTITIES = {"alice@example.com": ["alice"], "bob@example.com": ["bob", "team"]}


def _module() -> Path | None:
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        return None
    root = subprocess.run([npm, "root", "-g"], capture_output=True, text=True, timeout=60).stdout.strip()
    module = Path(root) / "oidc-provider" / "lib" / "index.js"
    return module if module.is_file() else None


@pytest.fixture(scope="module")
def oidc_module() -> Path:
    module = _module()
    if module is None:
        pytest.skip("oidc-provider is not installed (node and `npm install -g oidc-provider@9`; .ci/run installs it)")
    return module


class Provider:
    """One oidc-provider process on a loopback port; its keys persist in `keys` across restarts."""

    def __init__(self, module: Path, home: Path) -> None:
        self.module, self.home = module, home
        self.port = free_port()
        self.issuer = f"http://127.0.0.1:{self.port}"
        self.keys = home / f"keys-{self.port}.json"
        self.process: subprocess.Popen[str] | None = None

    def start(self, rotate: bool = False) -> Provider:
        command = ["node", str(SCRIPT), str(self.module), str(self.port), str(self.keys), "rotate" if rotate else ""]
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=clean_env(self.home)
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()  # "ready <issuer>" once it listens
        assert line.startswith("ready"), line
        return self

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=scaled(30))
            self.process = None

    async def token(self, client: str, resource: str) -> str:
        async with httpx2.AsyncClient(timeout=scaled(30)) as http:
            answer = await http.post(
                f"{self.issuer}/token",
                data={"grant_type": "client_credentials", "scope": "mcp", "resource": resource},
                auth=(client, f"{client}-secret"),
            )
        assert answer.status_code == 200, answer.text
        return answer.json()["access_token"]

    async def public_key_pem(self, kid: str) -> bytes:
        async with httpx2.AsyncClient(timeout=scaled(30)) as http:
            jwks = (await http.get(f"{self.issuer}/jwks")).json()
        [entry] = [k for k in jwks["keys"] if k["kid"] == kid]
        key = jwt.PyJWK(entry).key
        return key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


@pytest.fixture
def provider(oidc_module: Path, tmp_path: Path) -> Iterator[Provider]:
    started = Provider(oidc_module, tmp_path).start()
    try:
        yield started
    finally:
        started.stop()


def settings(issuer: str, claim: str = "email", **extra: Any) -> OAuthConfig:
    return OAuthConfig(issuer=issuer, claim=claim, identities=extra.pop("identities", IDENTITIES), **extra)


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def parts(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    header, payload, _ = token.split(".")
    pad = lambda s: s + "=" * (-len(s) % 4)  # noqa: E731
    return json.loads(base64.urlsafe_b64decode(pad(header))), json.loads(base64.urlsafe_b64decode(pad(payload)))


def forged(header: dict[str, Any], payload: dict[str, Any], sign: Any = None) -> str:
    signing_input = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(payload).encode())}"
    signature = b64(sign(signing_input.encode())) if sign else ""
    return f"{signing_input}.{signature}"


@asynccontextmanager
async def resource_server(make_config, issuer: str) -> AsyncIterator[str]:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    config = make_config(
        server={
            "transport": "http",
            "port": port,
            "public_url": base,
            "oauth": {"issuer": issuer, "claim": "email", "identities": IDENTITIES},
        }
    )
    app = build_http_app(build_server(config), config)
    web = uvicorn.Server(uvicorn_config(app, config, host="127.0.0.1", lifespan="on"))
    async with anyio.create_task_group() as group:
        group.start_soon(web.serve)
        with anyio.fail_after(scaled(20)):
            while not web.started:
                await anyio.sleep(0.01)
        try:
            yield f"{base}/mcp"
        finally:
            web.should_exit = True


async def test_the_providers_tokens_reach_their_identitys_resources_over_http(make_config, provider):
    async with resource_server(make_config, provider.issuer) as url:
        async with httpx2.AsyncClient(timeout=scaled(30)) as http:
            metadata = (await http.get(url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp"))).json()
        assert metadata["authorization_servers"] == [provider.issuer] and metadata["resource"] == url
        note = {"id": "m1", "role": "user", "content": "standup moved to 9:30"}
        for who, mine, other in [("alice-app", "alice", "bob"), ("bob-app", "team", "alice")]:
            token = await provider.token(who, url)
            async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=scaled(30)) as http:
                async with Client(streamable_http_client(url, http_client=http)) as client:
                    assert await ok(client, "append_messages", thread_id=f"t-{who}", resource_id=mine, messages=[note])
                    refused = await fail(
                        client, "append_messages", thread_id=f"x-{who}", resource_id=other, messages=[note]
                    )
                    assert f"resource '{other}' is not allowed" in refused
        # carol is vouched for by the provider but mapped to nothing: she may use nothing.
        token = await provider.token("carol-app", url)
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=scaled(30)) as http:
            async with Client(streamable_http_client(url, http_client=http)) as client:
                refused = await fail(
                    client, "append_messages", thread_id="t-carol", resource_id="alice", messages=[note]
                )
                assert "(it may use: nothing)" in refused
        # A token for another resource is refused at the door.
        foreign = await provider.token("alice-app", "https://other.example/mcp")
        async with httpx2.AsyncClient(timeout=scaled(30)) as http:
            answer = await http.post(url, json={}, headers={"Authorization": f"Bearer {foreign}"})
        assert answer.status_code == 401


@pytest.mark.parametrize(
    ("claim", "identities", "who", "resources"),
    [
        ("sub", {"alice-app": ["alice"]}, "alice-app", ["alice"]),
        ("email", IDENTITIES, "bob-app", ["bob", "team"]),
        ("groups", {"team": ["team"], "ops": ["ops"]}, "bob-app", ["team", "ops"]),
        ("groups", {"*": ["lobby"], "team": ["team"]}, "alice-app", ["team", "lobby"]),
        ("email", IDENTITIES, "carol-app", []),
    ],
)
async def test_a_claim_names_the_identity_and_its_resources(provider, claim, identities, who, resources):
    audience = "http://127.0.0.1:9/mcp"
    verifier = IssuerTokens(settings(provider.issuer, claim, identities=identities), audience)
    found = await verifier.verify_token(await provider.token(who, audience))
    assert found is not None and found.claims is not None
    assert found.claims[RESOURCES_CLAIM] == resources


async def test_each_bad_token_is_refused(provider, oidc_module, tmp_path, caplog):
    """The table: a real token accepted, and each bad one refused (None: the middleware's 401)."""
    audience = "http://127.0.0.1:9/mcp"
    now = [time.time()]
    verifier = IssuerTokens(settings(provider.issuer), audience, clock=lambda: now[0], leeway=0)
    good = await provider.token("alice-app", audience)
    header, payload = parts(good)
    pem = await provider.public_key_pem(header["kid"])
    other = Provider(oidc_module, tmp_path).start()
    try:
        elsewhere = await other.token("alice-app", audience)
    finally:
        other.stop()
    brief = await provider.token("brief-app", audience)
    with anyio.fail_after(scaled(30)):  # the brief token's second runs out
        while time.time() <= parts(brief)[1]["exp"]:
            await anyio.sleep(0.2)
    table = {
        "the provider's token for this server": (good, True),
        "expired": (brief, False),
        "for another audience": (await provider.token("alice-app", "https://other.example/mcp"), False),
        "from another issuer (its own keys)": (elsewhere, False),
        "alg none": (forged({**header, "alg": "none"}, payload), False),
        "HMAC signed with the provider's RSA public key": (
            forged({**header, "alg": "HS256"}, payload, lambda m: hmac.new(pem, m, hashlib.sha256).digest()),
            False,
        ),
        "claims changed after signing": (
            ".".join(
                [
                    good.split(".")[0],
                    b64(json.dumps({**payload, "email": "bob@example.com"}).encode()),
                    good.split(".")[2],
                ]
            ),
            False,
        ),
        "a key id the provider never had": (forged({**header, "kid": "made-up"}, payload, lambda m: b"x" * 256), False),
        "not a JWT": ("om_not-a-jwt", False),
    }
    rows = []
    for name, (token, accepted) in table.items():
        found = await verifier.verify_token(token)
        rows.append((name, "accepted" if found else "refused"))
        assert (found is not None) == accepted, name
    print("\n" + "\n".join(f"{n:50} {r}" for n, r in rows))

    # Keys rotate: the provider restarts with a new signing key; a token naming it makes the
    # verifier fetch the keys again (at most every REFETCH_UNKNOWN_KID_SECONDS).
    provider.stop()
    provider.start(rotate=True)
    rotated = await provider.token("alice-app", audience)
    assert parts(rotated)[0]["kid"] != header["kid"]
    now[0] += REFETCH_UNKNOWN_KID_SECONDS + 1
    assert await verifier.verify_token(rotated) is not None
    assert await verifier.verify_token(good) is not None  # the old key is still published

    # The keys cannot be fetched: every token is refused (fail closed), and the log says so once.
    provider.stop()
    caplog.set_level(logging.INFO, logger="om_mcp.server.http.oauth.issuer")
    cold = IssuerTokens(settings(provider.issuer), audience)
    for _ in range(3):
        assert await cold.verify_token(rotated) is None
    now[0] += 7200  # past the cache: the warm verifier must fetch again, and cannot
    assert await verifier.verify_token(rotated) is None
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len([r for r in errors if "cannot fetch the signing keys" in r.getMessage()]) == 2  # one per verifier
    assert provider.issuer in errors[0].getMessage() and "server.oauth.issuer" in errors[0].getMessage()
