"""OAuth's storage rules: registered clients, the owner's grants, and the flow's secrets.

A secret (a consent code from `om-mcp connect`, an authorization code, an access or a refresh
token) is stored as its sha256 digest only: whoever reads the database holds nothing a client
could present. A grant is what the owner approved on the consent page (one client, the resources
it may use); every token descends from one grant, so the grant is the token family: revoking it,
or a replayed one-time secret, ends every token it issued. Times are the database's clock
(`Tx.epoch`), which every process on it shares.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from om_mcp.store.rows import OAuthGrant, OAuthSecret
from om_mcp.store.tx import Tx

CONSENT, CODE, ACCESS, REFRESH = "consent", "code", "access", "refresh"
ONE_TIME = (CONSENT, CODE, REFRESH)
# A client that registered and never got a grant is forgotten after this (registration is open to anyone).
UNUSED_CLIENT_SECONDS = 86_400.0
# What expired is kept this long for replay detection (a used refresh token presented again revokes its family).
KEEP_EXPIRED_SECONDS = 86_400.0


async def put_client(tx: Tx, client_id: str, registration: str) -> None:
    """Register a client (its RFC 7591 record as JSON, holding no secret); drop clients that never got a grant."""
    now = await tx.epoch()
    await tx.execute(
        "DELETE FROM om_oauth_clients WHERE created_at < $1"
        " AND client_id NOT IN (SELECT client_id FROM om_oauth_grants)",
        now - UNUSED_CLIENT_SECONDS,
    )
    await tx.execute(
        "INSERT INTO om_oauth_clients (client_id, registration, created_at) VALUES ($1, $2, $3)",
        client_id,
        registration,
        now,
    )


async def client(tx: Tx, client_id: str) -> str | None:
    """A registered client's record (JSON), or None."""
    return await tx.fetchval("SELECT registration FROM om_oauth_clients WHERE client_id = $1", client_id)


async def new_grant(tx: Tx, grant_id: str, client_id: str, resources: list[str]) -> None:
    await tx.execute(
        "INSERT INTO om_oauth_grants (id, client_id, resources, created_at) VALUES ($1, $2, $3, $4)",
        grant_id,
        client_id,
        json.dumps(resources),
        await tx.epoch(),
    )


async def put_secret(
    tx: Tx, digest: str, kind: str, grant_id: str | None, detail: dict[str, Any], seconds: float
) -> None:
    """Store one secret's digest, live for `seconds`; what expired long ago goes."""
    now = await tx.epoch()
    await tx.execute("DELETE FROM om_oauth_secrets WHERE expires_at < $1", now - KEEP_EXPIRED_SECONDS)
    await tx.execute(
        "INSERT INTO om_oauth_secrets (digest, kind, grant_id, detail, expires_at) VALUES ($1, $2, $3, $4, $5)",
        digest,
        kind,
        grant_id,
        json.dumps(detail),
        now + seconds,
    )


_SECRET = (
    "SELECT s.digest, s.kind, s.grant_id, s.detail, s.expires_at, s.used_at, s.failures,"
    " g.client_id, g.resources, g.revoked_at FROM om_oauth_secrets s"
    " LEFT JOIN om_oauth_grants g ON g.id = s.grant_id WHERE s.digest = $1 AND s.kind = $2"
)


def _secret(row: Any, now: float) -> OAuthSecret:
    return OAuthSecret(
        digest=row[0],
        kind=row[1],
        grant_id=row[2],
        detail=json.loads(row[3]),
        expires_at=float(row[4]),
        used=row[5] is not None,
        failures=int(row[6]),
        client_id=row[7],
        resources=json.loads(row[8]) if row[8] is not None else [],
        revoked=row[9] is not None,
        now=now,
    )


async def secret(tx: Tx, digest: str, kind: str) -> OAuthSecret | None:
    """The secret with this digest and kind, live or not (the caller tells a replay from a stranger)."""
    row = await tx.fetchrow(_SECRET, digest, kind)
    return None if row is None else _secret(row, await tx.epoch())


async def redeem(
    tx: Tx, digest: str, kind: str, replacements: Sequence[tuple[str, str, dict[str, Any], float]] = ()
) -> OAuthSecret | None:
    """Use a one-time secret and store what it is exchanged for, (digest, kind, detail, seconds) under
    the same grant, at once. None: it was not live (unknown, used, expired, its grant revoked), and
    nothing was stored; a used one presented again revokes its grant (a replay: someone else holds it)."""
    now = await tx.epoch()
    row = await tx.fetchrow(_SECRET, digest, kind)
    if row is None:
        return None
    found = _secret(row, now)
    if found.used:
        if found.grant_id is not None:
            await revoke_grant(tx, found.grant_id)
        return None
    if not found.live:
        return None
    won = await tx.execute(
        "UPDATE om_oauth_secrets SET used_at = $2 WHERE digest = $1 AND used_at IS NULL", digest, now
    )
    if won != 1:
        return None
    if found.grant_id is not None:
        await tx.execute("UPDATE om_oauth_grants SET used_at = $2 WHERE id = $1", found.grant_id, now)
    for new_digest, new_kind, detail, seconds in replacements:
        await put_secret(tx, new_digest, new_kind, found.grant_id, detail, seconds)
    return found


async def consent_failed(tx: Tx, limit: int) -> int:
    """A wrong consent code was typed: every outstanding consent code counts one more failure, and
    those at `limit` are void. How many outstanding codes are still good."""
    now = await tx.epoch()
    await tx.execute(
        "UPDATE om_oauth_secrets SET failures = failures + 1 WHERE kind = $1 AND used_at IS NULL AND expires_at > $2",
        CONSENT,
        now,
    )
    return int(
        await tx.fetchval(
            "SELECT count(*) FROM om_oauth_secrets WHERE kind = $1 AND used_at IS NULL AND expires_at > $2"
            " AND failures < $3",
            CONSENT,
            now,
            limit,
        )
    )


async def revoke_grant(tx: Tx, grant_id: str) -> bool:
    """End a grant and every token it issued. False: no such grant, or already revoked."""
    now = await tx.epoch()
    changed = await tx.execute(
        "UPDATE om_oauth_grants SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL", grant_id, now
    )
    await tx.execute(
        "UPDATE om_oauth_secrets SET used_at = $2 WHERE grant_id = $1 AND used_at IS NULL AND kind <> $3",
        grant_id,
        now,
        ACCESS,
    )
    await tx.execute("DELETE FROM om_oauth_secrets WHERE grant_id = $1 AND kind = $2", grant_id, ACCESS)
    return changed == 1


async def grants(tx: Tx) -> list[OAuthGrant]:
    """Every grant, newest first, with its client's name and whether a token of it is still live."""
    now = await tx.epoch()
    rows = await tx.fetch(
        "SELECT g.id, g.client_id, c.registration, g.resources, g.created_at, g.used_at, g.revoked_at,"
        " (SELECT count(*) FROM om_oauth_secrets s WHERE s.grant_id = g.id AND s.kind IN ($1, $2)"
        "  AND s.used_at IS NULL AND s.expires_at > $3)"
        " FROM om_oauth_grants g LEFT JOIN om_oauth_clients c ON c.client_id = g.client_id"
        " ORDER BY g.created_at DESC, g.id",
        ACCESS,
        REFRESH,
        now,
    )
    out = []
    for row in rows:
        registration = json.loads(row[2]) if row[2] else {}
        out.append(
            OAuthGrant(
                id=row[0],
                client_id=row[1],
                client_name=str(registration.get("client_name") or ""),
                redirect_uris=[str(u) for u in registration.get("redirect_uris") or []],
                resources=json.loads(row[3]),
                created_at=float(row[4]),
                used_at=None if row[5] is None else float(row[5]),
                revoked=row[6] is not None,
                live_tokens=int(row[7]),
            )
        )
    return out
