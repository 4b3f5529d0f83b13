"""Vectors on PostgreSQL: pgvector where the extension is there, else real[] compared in Python.

With pgvector the `embeddings.vector` column is of type `vector` and the nearest
neighbours of a resource are found by an exact scan in the database (`<=>`,
cosine distance) over the (resource_id, embedder) index: exact, and cheap up to
many thousands of vectors per resource (`PgTx.rank_vectors`). Without it the column is real[] and the
rows come back to be compared in Python (store/vectors.py), as on SQLite. A database created without
the extension switches to `vector` at the next start after it is installed.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)

WITHOUT = "pgvector is not installed on the server: vectors are compared in Python (install it for in-database search)"


async def adopt(conn: Any) -> None:
    """Use pgvector when the server has it (run at start, under the migration lock)."""
    kind = await conn.fetchval(
        "SELECT format_type(atttypid, atttypmod) FROM pg_attribute"
        " WHERE attrelid = 'embeddings'::regclass AND attname = 'vector'"
    )
    if kind != "real[]":
        return
    if not await conn.fetchval("SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector')"):
        return
    try:
        async with conn.transaction():  # a savepoint: a refused extension must not end the start-up
            await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            await conn.execute("ALTER TABLE embeddings ALTER COLUMN vector TYPE vector USING vector::vector")
    except Exception as error:  # noqa: BLE001 - not allowed to create it: stay on real[]
        log.warning("pgvector is available but could not be enabled (%s): vectors are compared in Python", error)


async def status(conn: Any) -> str | None:
    """'pgvector 0.8.6' when the column uses it, else None."""
    return await conn.fetchval(
        "SELECT 'pgvector ' || e.extversion FROM pg_extension e, pg_attribute a WHERE e.extname = 'vector'"
        " AND a.attrelid = 'embeddings'::regclass AND a.attname = 'vector'"
        " AND format_type(a.atttypid, a.atttypmod) = 'vector'"
    )
