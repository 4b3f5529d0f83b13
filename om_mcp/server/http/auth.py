"""Who is calling, and which resources they may touch.

Bearer tokens are checked by `TokenTable` (the SDK's `TokenVerifier`); the SDK's
middleware puts the verified token in a context variable that follows each request into
its handler, in both protocol eras. The tool layer asks `allowed_resources()` or calls
`check_resource()` / `check_thread()` before it reads or writes anything of a resource.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken, TokenVerifier
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from om_mcp.config import TokenEntry, hash_token

ALL_RESOURCES = "*"
RESOURCES_CLAIM = "om_mcp/resources"  # where a verified token carries its grant

_bearer_servers = 0  # HTTP apps in bearer mode running in this process


class ResourceNotAllowed(MCPError):
    """The caller's token does not grant the resource. A JSON-RPC error by itself;
    tool wrappers turn it into a tool error carrying the same text."""

    def __init__(self, message: str) -> None:
        super().__init__(INVALID_PARAMS, message)

    def __str__(self) -> str:
        return self.message


class TokenTable(TokenVerifier):
    """Tokens from the config, looked up by hash: the secrets themselves are never stored."""

    def __init__(self, entries: Sequence[TokenEntry]) -> None:
        self._entries = {entry.hash: entry for entry in entries}

    async def verify_token(self, token: str) -> AccessToken | None:
        entry = self._entries.get(hash_token(token))
        if entry is None:
            return None
        return AccessToken(
            token=entry.hash,  # the SDK keeps this in memory per request; the hash does as well as the secret
            client_id=entry.name or entry.hash[7:19],
            subject=entry.hash,  # sessions are bound to (client_id, issuer, subject): one token, one owner
            scopes=[],
            claims={RESOURCES_CLAIM: list(entry.resources)},
        )


class Verifiers(TokenVerifier):
    """Every way a bearer token may be good here, asked in turn: configured tokens, om-mcp's own
    authorization server's tokens, an external provider's JWTs. Each answers with the resources
    the token may use in `RESOURCES_CLAIM`, which is all the rest of the server reads."""

    def __init__(self, *verifiers: TokenVerifier) -> None:
        self.verifiers = verifiers

    async def verify_token(self, token: str) -> AccessToken | None:
        for verifier in self.verifiers:
            found = await verifier.verify_token(token)
            if found is not None:
                return found
        return None


@contextmanager
def bearer_required() -> Iterator[None]:
    """While an HTTP app in bearer mode runs, a request without a token is allowed nothing
    (fail closed) instead of being treated as stdio."""
    global _bearer_servers
    _bearer_servers += 1
    try:
        yield
    finally:
        _bearer_servers -= 1


def allowed_resources() -> frozenset[str] | None:
    """The resources the current caller may use; None means unrestricted (stdio, HTTP
    without auth, or a token bound to "*")."""
    token = get_access_token()
    if token is None:
        return frozenset() if _bearer_servers else None
    granted = (token.claims or {}).get(RESOURCES_CLAIM)
    if not isinstance(granted, list):
        return frozenset()  # a token from another verifier carries no grant of ours
    return None if ALL_RESOURCES in granted else frozenset(granted)


def is_admin() -> bool:
    """May the caller see what belongs to the server rather than to a resource (the model's
    failure text, the spend of everyone, where the database lives)? Stdio, HTTP without auth,
    and a token bound to "*": yes."""
    return allowed_resources() is None


def default_resource() -> str | None:
    """The one resource the caller's token is bound to, if it is bound to exactly one."""
    allowed = allowed_resources()
    return next(iter(allowed)) if allowed is not None and len(allowed) == 1 else None


def check_resource(resource_id: str) -> None:
    """Raise ResourceNotAllowed unless the caller may use `resource_id`."""
    allowed = allowed_resources()
    if allowed is None or resource_id in allowed:
        return
    grant = ", ".join(sorted(allowed)) or "nothing"
    raise ResourceNotAllowed(f"resource {resource_id!r} is not allowed for this token (it may use: {grant})")


def check_thread(thread_id: str, thread_resource_id: str) -> None:
    """Raise ResourceNotAllowed unless the caller may use the resource owning `thread_id`.
    The text does not name that resource: it belongs to someone else."""
    allowed = allowed_resources()
    if allowed is None or thread_resource_id in allowed:
        return
    raise ResourceNotAllowed(f"thread {thread_id!r} belongs to a resource this token may not use")
