"""Who is calling, and which resources they may touch.

Bearer tokens are checked by `TokenTable` (the SDK's `TokenVerifier`); the SDK's
middleware puts the verified token in a context variable that follows each request into
its handler, in both protocol eras. `access_of` turns it into the caller's `Access` (the
resources it may touch), once: the running app hands every handler the engine narrowed to it
(`server/live.py`), so no tool, resource or page route checks resources itself.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken, TokenVerifier

from om_mcp.config import TokenEntry, hash_token
from om_mcp.engine import EVERY_RESOURCE, NO_RESOURCE, Access

ALL_RESOURCES = "*"
RESOURCES_CLAIM = "om_mcp/resources"  # where a verified token carries its grant

_bearer_servers = 0  # HTTP apps in bearer mode running in this process


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


def access_of(token: AccessToken | None, *, bearer: bool) -> Access:
    """What a caller may touch, from who it is: the one place a request's identity becomes an `Access`.

    `token`: what the verifier accepted (None: no token); `bearer`: whether tokens are required. No
    token where none is required is the local owner (stdio, HTTP without auth on loopback): every
    resource. No token where one is required, or a token without our grant: nothing. A grant that
    names "*" is every resource (an admin token); else exactly the resources it names."""
    if token is None:
        return NO_RESOURCE if bearer else EVERY_RESOURCE
    granted = (token.claims or {}).get(RESOURCES_CLAIM)
    if not isinstance(granted, list) or not all(isinstance(g, str) for g in granted):
        return NO_RESOURCE  # a token from another verifier carries no grant of ours
    return _grant(tuple(granted))


@lru_cache(maxsize=1024)
def _grant(granted: tuple[str, ...]) -> Access:
    """A grant's access, made once per grant (App.memory asks for it several times a request)."""
    return EVERY_RESOURCE if ALL_RESOURCES in granted else Access.to(granted)


def caller_access() -> Access:
    """The access of the request being handled (the SDK's middleware puts its verified token in a
    context variable that follows the request into its handler, in both protocol eras)."""
    return access_of(get_access_token(), bearer=_bearer_servers > 0)
