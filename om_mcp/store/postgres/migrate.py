"""Bringing a PostgreSQL database up to the schema this version knows, or refusing it.

`om_meta` (key, value) holds what SQLite keeps in its header: the application
id and the schema version. Replicas starting together take turns: the first
locks `om_meta`, migrates and commits; the others wait for the lock, then find
nothing to do. DDL is transactional, so a migration is all or nothing, and a
killed migrator leaves the database as it was (its lock goes with its session).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from om_mcp.store.errors import DatabaseRefused
from om_mcp.store.postgres import vectors
from om_mcp.store.postgres.schema import SCHEMA, PostgresStep

log = logging.getLogger(__name__)

APPLICATION = "om-mcp"
CREATE_META = f"""
CREATE SCHEMA IF NOT EXISTS {SCHEMA};
CREATE TABLE IF NOT EXISTS {SCHEMA}.om_meta (key text PRIMARY KEY, value text NOT NULL);
"""


async def migrate(conn: Any, where: str, steps: Sequence[PostgresStep]) -> int:
    """Migrate (or refuse) the database `conn` is on; returns the schema version. `steps[N - 1]`
    reaches version N (the list is `om_mcp.store.migrations`, which holds this package's steps)."""
    import asyncpg

    latest = len(steps)

    tables = {r[0] for r in await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname = $1", SCHEMA)}
    if tables and "om_meta" not in tables:  # refused before anything is created there
        raise DatabaseRefused(
            f"{where}: the schema {SCHEMA!r} holds tables that are not om-mcp's: use another database"
        )
    for attempt in range(3):
        try:
            await conn.execute(CREATE_META)
            break
        except (asyncpg.UniqueViolationError, asyncpg.DuplicateObjectError, asyncpg.DuplicateTableError):
            if attempt == 2:  # two replicas created it at the same instant: it exists now
                raise
        except asyncpg.InsufficientPrivilegeError as error:
            raise DatabaseRefused(
                f"{where}: this user may not create the schema {SCHEMA!r} ({error}); grant CREATE on the database"
                f" or create the schema for it"
            ) from None
    async with conn.transaction():
        await conn.execute("LOCK TABLE om_meta IN SHARE ROW EXCLUSIVE MODE")
        meta = {r["key"]: r["value"] for r in await conn.fetch("SELECT key, value FROM om_meta")}
        current = int(meta.get("schema_version", "0"))
        if meta.get("application_id", APPLICATION) != APPLICATION:
            raise DatabaseRefused(
                f"{where}: the schema {SCHEMA!r} belongs to another application ({meta['application_id']!r}):"
                " use another database for om-mcp"
            )
        if not meta and await conn.fetchval(
            "SELECT count(*) FROM pg_tables WHERE schemaname = $1 AND tablename <> 'om_meta'", SCHEMA
        ):
            raise DatabaseRefused(
                f"{where}: the schema {SCHEMA!r} holds tables that are not om-mcp's: use another database"
            )
        if current > latest:
            raise DatabaseRefused(
                f"{where} was written by a newer om-mcp (schema {current}; this version knows up to"
                f" {latest}): upgrade om-mcp"
            )
        for version, step in enumerate(steps, start=1):
            if version <= current:
                continue
            if isinstance(step, str):
                await conn.execute(step)
            elif step is not None:
                await step(conn)
            log.info("database migrated to schema version %d", version)
        if current < latest:
            await conn.executemany(
                "INSERT INTO om_meta (key, value) VALUES ($1, $2)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                [("application_id", APPLICATION), ("schema_version", str(latest))],
            )
        await vectors.adopt(conn)
    return max(current, latest)
