"""The `[server]` section: transport, address, and what HTTP needs to face a network
(bearer tokens bound to resources, allowed hosts, sessions, rate limits)."""

from __future__ import annotations

import hashlib
from typing import Annotated, Literal

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
        if self.mode is None:
            self.mode = "bearer" if self.tokens else "none"
        if self.mode == "bearer" and not self.tokens:
            raise ValueError("mode 'bearer' needs at least one token: run om-mcp token create --resource NAME")
        if self.mode == "none" and self.tokens:
            # Tokens that silently do nothing would leave the server open while looking closed.
            raise ValueError(
                "mode is 'none' but tokens are configured (or OM_HTTP_TOKEN is set): set mode = 'bearer'"
                " or remove the tokens"
            )
        return self


class HttpConfig(_Section):
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
    stateless: bool = Field(
        False,
        description="legacy (2025-11-25) clients without sessions, so any replica can answer any request;"
        " costs them sampling through the client and pushed notifications (2026-07-28 is always sessionless)",
    )


class ServerConfig(_Section):
    transport: Literal["stdio", "http"] = "stdio"
    host: str = "127.0.0.1"
    port: int = Field(8765, ge=1, le=65535)
    path: str = "/mcp"
    auth: AuthConfig = Field(default_factory=AuthConfig)
    http: HttpConfig = Field(default_factory=HttpConfig)
