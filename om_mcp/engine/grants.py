"""`Grants`: what the owner let remote clients do, and the secrets of the OAuth flow.

The server's authorization server (`server/http/oauth/`) speaks OAuth; this is what it stores
and decides, in the words of the memory: a client is registered, the owner approves it with a
one-time consent code (`om-mcp connect`) for some resources, that grant is exchanged for
short-lived access tokens and rotating refresh tokens, and revoking the grant ends them all.
Every secret is random, handed out once, and stored as its sha256 (`store/oauth.py`).
"""

from __future__ import annotations

import re
import secrets
import uuid
from dataclasses import dataclass
from typing import Any

from om_mcp.config import Config, hash_token
from om_mcp.engine.errors import InputError
from om_mcp.store import OAuthGrant, OAuthSecret, Store, Transaction
from om_mcp.store.oauth import ACCESS, CODE, CONSENT, REFRESH

# A consent code is typed by a person: 12 characters of an alphabet without look-alikes (60 bits),
# shown as XXXX-XXXX-XXXX; only a few wrong guesses are allowed before every outstanding code is void.
CONSENT_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
CONSENT_LENGTH = 12
ALL = "*"

__all__ = ["ALL", "ConsentRefused", "Grants", "Issued", "OAuthGrant", "OAuthSecret"]


class ConsentRefused(Exception):
    """The consent page's code was wrong, void or not for these resources; `left`: good codes outstanding."""

    def __init__(self, message: str, left: int | None = None) -> None:
        super().__init__(message)
        self.left = left


@dataclass(frozen=True)
class Issued:
    """Tokens handed to a client once (only their digests are kept)."""

    access_token: str
    refresh_token: str
    expires_in: int
    grant: OAuthSecret  # the one-time secret they were exchanged for, with its grant


def digest(secret: str) -> str:
    return hash_token(secret)


def normal_consent_code(code: str) -> str:
    return re.sub(r"[\s-]", "", code).upper()


class Grants:
    """OAuth's clients, grants and secrets over one store (see the module docstring)."""

    def __init__(self, store: Store, config: Config) -> None:
        self.store = store
        self.config = config

    @property
    def _settings(self) -> Any:
        return self.config.server.oauth

    # -- clients ---------------------------------------------------------------------------------

    async def register(self, client_id: str, registration: str) -> None:
        await self.store.oauth_put_client(client_id, registration)

    async def client(self, client_id: str) -> str | None:
        return await self.store.oauth_client(client_id)

    # -- the owner's consent ---------------------------------------------------------------------

    async def consent_code(self, resources: list[str] | None = None) -> str:
        """A new one-time code for the consent page, good for `consent_code_minutes`; `resources`: the
        only ones it may grant (None: any, '*' included)."""
        if resources is not None:
            resources = _resources(resources)
        code = "".join(secrets.choice(CONSENT_ALPHABET) for _ in range(CONSENT_LENGTH))
        seconds = self._settings.consent_code_minutes * 60
        await self.store.oauth_put_secret(digest(code), CONSENT, None, {"resources": resources}, seconds)
        return "-".join(code[i : i + 4] for i in range(0, CONSENT_LENGTH, 4))

    async def consent(self, code: str, client_id: str, resources: list[str], request: dict[str, Any]) -> str:
        """The owner typed `code` and chose `resources` for `client_id`: the grant is made and an
        authorization code for it returned (`request`: what the token request must match: the PKCE
        challenge, the redirect URI). Raises ConsentRefused (a wrong code counts against every
        outstanding one) or InputError (the resources)."""
        chosen = _resources(resources)
        key = digest(normal_consent_code(code))
        found = await self.store.oauth_secret(key, CONSENT)
        limit = self._settings.consent_guesses
        if found is None or not found.live or found.failures >= limit:
            left = await self.store.oauth_consent_failed(limit)
            raise ConsentRefused("that code is wrong, used or expired (om-mcp connect prints a new one)", left)
        allowed = found.detail.get("resources")
        if allowed is not None and not (ALL in allowed or set(chosen) <= set(allowed)):
            raise InputError(f"this code may grant only: {', '.join(allowed)}", field="resource")
        auth_code = "om_code_" + secrets.token_urlsafe(32)
        grant_id = "g_" + uuid.uuid4().hex[:16]
        seconds = self._settings.code_seconds

        async def approve(tx: Transaction) -> bool:
            if await tx.oauth_redeem(key, CONSENT) is None:
                return False  # typed twice at once: one of them wins
            await tx.oauth_new_grant(grant_id, client_id, chosen)
            await tx.oauth_put_secret(digest(auth_code), CODE, grant_id, request, seconds)
            return True

        if not await self.store.transaction(approve):
            raise ConsentRefused("that code was just used (om-mcp connect prints a new one)")
        return auth_code

    # -- codes and tokens --------------------------------------------------------------------------

    async def code(self, code: str) -> OAuthSecret | None:
        """A live authorization code. One already exchanged, presented again, revokes what it issued
        (RFC 6749 §4.1.2: someone else holds it)."""
        return await self._one_time(code, CODE)

    async def refresh_token(self, token: str) -> OAuthSecret | None:
        """A live refresh token; a used one presented again revokes its whole family (its grant)."""
        return await self._one_time(token, REFRESH)

    async def _one_time(self, secret: str, kind: str) -> OAuthSecret | None:
        key = digest(secret)
        found = await self.store.oauth_secret(key, kind)
        if found is None:
            return None
        if found.used and found.grant_id is not None and not found.revoked:
            await self.store.oauth_revoke_grant(found.grant_id)
            return None
        return found if found.live else None

    async def exchange(self, secret: str, kind: str) -> Issued | None:
        """Use a live code or refresh token once, for a new access token and a new refresh token
        (the refresh token rotates). None: it was not live, and nothing was issued (a replay revoked
        its grant)."""
        settings = self._settings
        access, refresh = "om_at_" + secrets.token_urlsafe(32), "om_rt_" + secrets.token_urlsafe(32)
        replacements: list[tuple[str, str, dict[str, Any], float]] = [
            (digest(access), ACCESS, {}, float(settings.access_token_seconds)),
            (digest(refresh), REFRESH, {}, settings.refresh_token_days * 86_400),
        ]
        used = await self.store.oauth_redeem(digest(secret), kind, replacements)
        if used is None:
            return None
        return Issued(access, refresh, settings.access_token_seconds, used)

    async def access_token(self, token: str) -> OAuthSecret | None:
        """A live access token, with its grant's client and resources."""
        found = await self.store.oauth_secret(digest(token), ACCESS)
        return found if found is not None and found.live else None

    async def revoke_token(self, token: str) -> bool:
        """Revoke the grant an access or refresh token belongs to (every token of it)."""
        for kind in (ACCESS, REFRESH):
            found = await self.store.oauth_secret(digest(token), kind)
            if found is not None and found.grant_id is not None:
                return await self.store.oauth_revoke_grant(found.grant_id)
        return False

    # -- the owner's view --------------------------------------------------------------------------

    async def list(self) -> list[OAuthGrant]:
        return await self.store.oauth_grants()

    async def revoke(self, grant_id: str) -> bool:
        return await self.store.oauth_revoke_grant(grant_id)


def _resources(values: list[str]) -> list[str]:
    """The resources a grant names: at least one, each a plain id (or '*'), no duplicates."""
    out: list[str] = []
    for value in values:
        for part in re.split(r"[,\s]+", value):
            if not part:
                continue
            if len(part) > 200 or any(c in part for c in "\"'<>\\"):
                raise InputError(f"{part[:40]!r} is not a resource id", field="resource")
            if part not in out:
                out.append(part)
    if not out:
        raise InputError("name at least one resource the client may use", field="resource")
    return out
