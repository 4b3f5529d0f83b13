"""OAuth 2.1 for remote clients (claude.ai, ChatGPT, Claude Code, Codex, VS Code, Cursor, ...).

Two ways, one of them per server (`[server.oauth]`):

* `enabled` (`--oauth`): om-mcp is its own authorization server, on the SDK's framework
  (`mcp.server.auth`: metadata, registration, authorization, token and revocation handlers) with
  `provider.py` answering them and `consent.py` the owner's approval;
* `issuer` (`--oauth-issuer`): om-mcp is a resource server that accepts JWT access tokens of a
  team's OpenID provider (`issuer.py`).

Either way a verified token carries the resources it may use in `RESOURCES_CLAIM`, which is all
the rest of the server reads (`server/http/auth.py`): OAuth is one more way to hold a scope.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import parse_qs

from mcp.server.auth.handlers.metadata import MetadataHandler
from mcp.server.auth.routes import build_metadata, cors_middleware, create_auth_routes
from mcp.server.auth.settings import ClientRegistrationOptions, RevocationOptions
from pydantic import AnyHttpUrl, ConfigDict, TypeAdapter
from starlette.applications import Starlette
from starlette.routing import Route, request_response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from om_mcp.config import Config
from om_mcp.server.http.oauth.consent import ConsentPage
from om_mcp.server.http.oauth.provider import Provider

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from om_mcp.engine import Grants

METADATA_PATH = "/.well-known/oauth-authorization-server"
AUTHORIZE_PATH = "/authorize"
REVOKE_PATH = "/revoke"
_URL = TypeAdapter(AnyHttpUrl, config=ConfigDict(url_preserve_empty_path=True))  # "https://host", no slash added


def public_resource(config: Config) -> str:
    """The MCP endpoint's public URL: public_url + path, else the configured resource_url."""
    server = config.server
    if server.public_url:
        return server.public_url + server.path
    return server.auth.resource_url or ""


class AuthorizationServer:
    """The SDK's authorization-server routes over om-mcp's provider, as one ASGI app."""

    def __init__(self, server: MCPServer, config: Config) -> None:
        issuer = config.server.public_url
        assert issuer is not None  # the config refuses --oauth without --public-url

        async def grants() -> Grants:
            live = getattr(server, "live", None)
            if live is None:
                raise RuntimeError("the server is starting")
            return (await live.ready()).grants

        self.issuer = issuer
        self.consent = ConsentPage(grants, issuer, config.server.oauth)
        self.provider = Provider(grants, issuer, public_resource(config), self.consent.begin)
        url = _URL.validate_python(issuer)
        registration, revocation = ClientRegistrationOptions(enabled=True), RevocationOptions(enabled=True)
        routes = create_auth_routes(
            self.provider, url, client_registration_options=registration, revocation_options=revocation
        )
        metadata = build_metadata(url, None, registration, revocation)
        # Every client is public (provider.py): no client secret at the token or revocation endpoint; the
        # authorization response names its issuer (RFC 9207), which the SDK's client checks.
        metadata.token_endpoint_auth_methods_supported = ["none"]
        metadata.revocation_endpoint_auth_methods_supported = ["none"]
        metadata.authorization_response_iss_parameter_supported = True
        ours: list[Route] = []
        for route in routes:
            if route.path == METADATA_PATH:
                route = Route(METADATA_PATH, cors_middleware(MetadataHandler(metadata).handle, ["GET", "OPTIONS"]))
            elif route.path == AUTHORIZE_PATH:
                route = Route(AUTHORIZE_PATH, _WithConsent(route.app, self.consent), methods=["GET", "POST"])
            elif route.path == REVOKE_PATH:
                route = Route(REVOKE_PATH, _PublicRevocation(route.app), methods=["POST", "OPTIONS"])
            ours.append(route)
        self.paths = frozenset(route.path for route in ours)
        self.app = Starlette(routes=ours)


class _WithConsent:
    """The authorization endpoint: the consent page for `?consent=ID`, else the SDK's handler."""

    def __init__(self, sdk: ASGIApp, page: ConsentPage) -> None:
        self.sdk, self.form = sdk, request_response(page.__call__)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if "consent" in parse_qs(scope.get("query_string", b"").decode("latin-1")):
            await self.form(scope, receive, send)
        else:
            await self.sdk(scope, receive, send)


class _PublicRevocation:
    """The SDK's revocation endpoint, for public clients: mcp 2.3 requires a `client_secret` field
    in the form (its model gives the field no default), which RFC 7009 §2.1 does not ask of a
    client without one (python-sdk issue #3508); an absent one is sent on as empty."""

    def __init__(self, sdk: ASGIApp) -> None:
        self.sdk = sdk

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] != "POST":
            await self.sdk(scope, receive, send)
            return
        body = b""
        while True:  # the Gate's BodyLimit already bounded it
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        if "client_secret" not in parse_qs(body.decode("latin-1")):
            body += b"&client_secret=" if body else b"client_secret="
        headers = [(k, v) for k, v in scope["headers"] if k != b"content-length"]
        headers.append((b"content-length", str(len(body)).encode()))
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.sdk({**scope, "headers": headers}, replay, send)
