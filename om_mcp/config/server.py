"""The `[server]` section: transport, address, and what HTTP needs to face a network
(bearer tokens bound to resources, OAuth, the public URL, allowed hosts, proxies, sessions, rate limits)."""

from __future__ import annotations

import hashlib
import ipaddress
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


TOKEN_HASH_PREFIX = "sha256:"


def hash_token(token: str) -> str:
    """How a bearer token is stored: the sha256 of a high-entropy secret needs no salt or stretching."""
    return TOKEN_HASH_PREFIX + hashlib.sha256(token.encode()).hexdigest()


class TokenEntry(_Section):
    """One bearer token, stored as its hash, bound to the resources it may use ("*" = all)."""

    hash: str = Field(description="hash_token() of the secret")
    resources: list[Annotated[str, Field(min_length=1, max_length=200)]] = Field(min_length=1)
    name: str = Field("", max_length=100, description="who holds it; shown in logs, never secret")

    @field_validator("hash")
    @classmethod
    def _hash(cls, value: str) -> str:
        value = value.strip().lower()
        digest = value.removeprefix(TOKEN_HASH_PREFIX)
        if not value.startswith(TOKEN_HASH_PREFIX) or len(digest) != 64 or digest.strip("0123456789abcdef"):
            raise ValueError("must be 'sha256:' and 64 hex digits (the line om-mcp token create prints), not the token")
        return value


class AuthConfig(_Section):
    mode: Literal["none", "bearer"] | None = Field(
        None, description="none or bearer; unset means bearer when tokens are configured"
    )
    tokens: list[TokenEntry] = Field(default_factory=list)
    http_token: str | int | None = Field(None, exclude=True, repr=False, description="from OM_HTTP_TOKEN")
    resource_url: str | None = Field(
        None, pattern=r"^https?://", description="public URL of the MCP endpoint (protected-resource metadata)"
    )
    authorization_servers: list[Annotated[str, Field(pattern=r"^https?://")]] = Field(default_factory=list)

    @model_validator(mode="after")
    def _check(self) -> AuthConfig:
        if self.http_token is not None:
            plain = str(self.http_token)  # an all-digit token arrives parsed as a JSON number
            if len(plain) < 16:
                raise ValueError("http_token (OM_HTTP_TOKEN) must be at least 16 characters; use om-mcp token create")
            self.tokens.append(TokenEntry(hash=hash_token(plain), resources=["*"], name="OM_HTTP_TOKEN"))
            self.http_token = None
        hashes = [t.hash for t in self.tokens]
        if len(set(hashes)) != len(hashes):
            raise ValueError("tokens: the same token hash is listed twice")
        return self


class HttpConfig(_Section):
    @field_validator("trusted_proxies")
    @classmethod
    def _networks(cls, values: list[str]) -> list[str]:
        for value in values:
            try:
                ipaddress.ip_network(value, strict=False)
            except ValueError:
                raise ValueError(f"{value!r} is not an address or network (10.0.0.5, 10.0.0.0/8, ::1)") from None
        return values

    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="Host header values accepted besides loopback ('mem.example.com', '10.0.0.5:*')",
    )
    allowed_origins: list[str] = Field(
        default_factory=list, description="Origin header values accepted besides loopback ('https://app.example.com')"
    )
    session_idle_seconds: float = Field(1800.0, gt=0, le=86_400 * 7, description="idle legacy sessions end after this")
    max_sessions: int = Field(
        100, ge=1, le=100_000, description="open legacy sessions at most; beyond, the least recently used idle one ends"
    )
    max_sessions_per_token: int = Field(
        20, ge=1, le=100_000, description="open legacy sessions of one bearer token; beyond, its own LRU idle one ends"
    )
    max_sessions_per_address: int = Field(
        20,
        ge=0,
        le=100_000,
        description="open legacy sessions opened without a token from one client address (not on loopback"
        " without auth); beyond, its own LRU idle one ends; 0 = off",
    )
    header_timeout_seconds: float = Field(
        10.0, gt=0, le=3600, description="a connection that has not sent a whole request head by then is closed"
    )
    idle_timeout_seconds: float = Field(
        30.0, gt=0, le=3600, description="a connection idle this long between requests, or within a body, is closed"
    )
    min_body_bytes_per_second: int = Field(
        1000,
        ge=0,
        le=1_000_000_000,
        description="when connections run short, one whose request body has come slower than this since its head"
        " (after its first second) is closed like an idle one; 0 = never",
    )
    max_connections: int = Field(
        500,
        ge=1,
        le=1_000_000,
        description="open connections at most; beyond, the least recently used idle one is closed (503: none idle)",
    )
    max_connections_per_address: int = Field(
        32,
        ge=0,
        le=1_000_000,
        description="open connections without a valid token from one client address (not on loopback without"
        " auth); beyond, its own LRU idle one is closed; 0 = off",
    )
    max_connections_per_token: int = Field(
        64, ge=1, le=1_000_000, description="open connections carrying one bearer token; beyond, its own LRU idle one"
    )
    unauthenticated_share: float = Field(
        0.1,
        gt=0,
        le=1,
        description="with bearer auth, the share of max_connections that connections without a valid token may hold",
    )
    failed_auth_per_minute: int = Field(
        30, ge=0, description="requests without a valid token per client address a minute; beyond, 429; 0 = off"
    )
    failed_auth_total_per_minute: int = Field(
        120, ge=0, description="requests without a valid token a minute from all addresses together; 0 = off"
    )
    rate_limit_per_minute: int = Field(
        600, ge=0, description="requests per token (per client address on a public bind without auth); 0 = off"
    )
    max_body_bytes: int = Field(
        4 * 1024 * 1024, ge=1024, description="largest request body on every route; larger gets 413"
    )
    trusted_proxies: list[str] = Field(
        default_factory=list,
        description="addresses or networks of reverse proxies whose X-Forwarded-For/-Proto/-Host are believed"
        " ('127.0.0.1', '10.0.0.0/8'); from anyone else those headers are ignored",
    )
    stateless: bool = Field(
        False,
        description="legacy (2025-11-25) clients without sessions, so any replica can answer any request;"
        " costs them sampling through the client and pushed notifications (2026-07-28 is always sessionless)",
    )


def is_loopback_host(host: str) -> bool:
    """localhost, or a loopback address (a name other than localhost may resolve anywhere)."""
    host = host.strip("[]").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_https_url(value: str, what: str) -> str:
    """An https URL, or http on loopback (OAuth 2.1 and RFC 8414: tokens never cross a network in clear)."""
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{what} must be an https:// URL, got {value!r}")
    if parts.scheme == "http" and not is_loopback_host(parts.hostname):
        raise ValueError(f"{what} must use https:// (http only on loopback: 127.0.0.1, ::1, localhost), got {value!r}")
    if parts.query or parts.fragment:
        raise ValueError(f"{what} must have no query or fragment, got {value!r}")
    return value.rstrip("/")


class OAuthConfig(_Section):
    """OAuth 2.1 for remote clients: om-mcp's own authorization server (`enabled`), or an
    external OpenID provider whose JWT access tokens om-mcp verifies (`issuer`)."""

    enabled: bool = Field(
        False, description="the built-in authorization server (--oauth): clients register, the owner consents"
    )
    issuer: str | None = Field(
        None, description="an external OpenID provider's issuer URL (--oauth-issuer), whose JWT access tokens count"
    )
    audience: str | None = Field(
        None, description="the `aud` an external provider's tokens must carry; default: the MCP endpoint's public URL"
    )
    claim: str = Field(
        "sub", min_length=1, description="the claim that names an identity: sub, email, groups (a list), ..."
    )
    identities: dict[str, list[Annotated[str, Field(min_length=1, max_length=200)]]] = Field(
        default_factory=dict,
        description="claim value -> the resources that identity may use ('*' = all); the key '*' applies to every"
        " identity the provider vouches for",
    )
    access_token_seconds: int = Field(3600, ge=60, le=86_400, description="lifetime of an access token")
    refresh_token_days: float = Field(30.0, gt=0, le=365, description="a refresh token unused this long expires")
    code_seconds: int = Field(300, ge=30, le=3600, description="lifetime of an authorization code")
    consent_code_minutes: float = Field(
        15.0, gt=0, le=1440, description="how long a code from `om-mcp connect` may be typed into a consent page"
    )
    consent_guesses: int = Field(
        5, ge=1, le=100, description="wrong consent codes after which every outstanding code is void"
    )
    jwks_cache_seconds: int = Field(
        3600, ge=0, le=86_400, description="how long an external provider's signing keys are reused before refetching"
    )

    @field_validator("issuer")
    @classmethod
    def _issuer(cls, value: str | None) -> str | None:
        return None if value is None else check_https_url(value, "issuer")

    @property
    def on(self) -> bool:
        return self.enabled or self.issuer is not None


class ServerConfig(_Section):
    transport: Literal["stdio", "http"] = "stdio"
    host: str = "127.0.0.1"
    port: int = Field(8765, ge=1, le=65535)
    path: str = "/mcp"
    public_url: str | None = Field(
        None,
        description="where clients reach this server (https://memory.example.com): the OAuth issuer, and with"
        " `path` the resource; Host and Origin are checked against it",
    )
    auth: AuthConfig = Field(default_factory=AuthConfig)
    oauth: OAuthConfig = Field(default_factory=OAuthConfig)
    http: HttpConfig = Field(default_factory=HttpConfig)

    @field_validator("public_url")
    @classmethod
    def _public_url(cls, value: str | None) -> str | None:
        return None if value is None else check_https_url(value, "public_url")

    @model_validator(mode="after")
    def _check(self) -> ServerConfig:
        auth, oauth = self.auth, self.oauth
        if self.public_url is not None:
            path = urlsplit(self.public_url).path
            if path not in ("", self.path):
                raise ValueError(
                    f"public_url: give the server's origin (https://host[:port]) or its MCP endpoint"
                    f" (https://host{self.path}), not the path {path!r}"
                )
            self.public_url = self.public_url.removesuffix(self.path) if path else self.public_url
            resource = self.public_url + self.path
            if auth.resource_url is not None and auth.resource_url.rstrip("/") != resource:
                raise ValueError(f"auth.resource_url ({auth.resource_url}) is not public_url + path ({resource})")
        if oauth.enabled and oauth.issuer is not None:
            raise ValueError(
                "oauth.enabled (--oauth) and oauth.issuer (--oauth-issuer): choose one authorization server"
            )
        if oauth.on and self.public_url is None:
            raise ValueError(
                "OAuth (--oauth or --oauth-issuer) needs public_url (--public-url https://host): the URL clients use,"
                " which names the issuer and the resource in the tokens"
            )
        if oauth.issuer is not None and not oauth.identities:
            raise ValueError(
                "oauth.issuer: map identities to resources in [server.oauth.identities] (claim value = [resources]),"
                " or nobody the provider vouches for may use anything"
            )
        if auth.mode is None:
            auth.mode = "bearer" if auth.tokens or oauth.on else "none"
        if auth.mode == "bearer" and not auth.tokens and not oauth.on:
            raise ValueError(
                "server.auth.mode 'bearer' needs at least one token (om-mcp token create --resource NAME)"
                " or OAuth (--oauth)"
            )
        if auth.mode == "none" and (auth.tokens or oauth.on):
            # Tokens that silently do nothing would leave the server open while looking closed.
            raise ValueError(
                "server.auth.mode is 'none' but tokens (or OM_HTTP_TOKEN) or OAuth are configured: set mode = 'bearer'"
                " or remove them"
            )
        return self
