"""Looking after a PostgreSQL database: sizes and counts, and the store's own consistency checks."""

from __future__ import annotations

from typing import Any

from om_mcp.store import overview
from om_mcp.store.postgres.driver import PgTx
from om_mcp.store.rows import Stats


async def stats(conn: Any, location: str, vectors: str) -> Stats:
    size, version = await conn.fetchrow(
        "SELECT pg_database_size(current_database()), (SELECT value FROM om_meta WHERE key = 'schema_version')"
    )
    return await overview.stats(
        PgTx(conn),
        path=location,
        bytes=size,
        wal_bytes=0,
        schema_version=int(version or 0),
        backend="postgres",
        vectors=vectors,
    )


async def integrity(conn: Any) -> list[str]:
    """Every message with text indexed once, the search counters and running totals right."""
    problems = []
    indexed = await conn.fetchval("SELECT COUNT(*) FROM messages WHERE body <> ''")
    in_index = await conn.fetchval("SELECT COUNT(*) FROM messages_fts")
    if indexed != in_index:
        problems.append(f"the search index has {in_index} entries for {indexed} messages with text")
    counted = await conn.fetchval(
        "SELECT COUNT(*) FROM (SELECT resource_id, COUNT(*) AS n, SUM(doclen) AS len FROM messages_fts"
        " GROUP BY resource_id) f FULL JOIN search_stats s USING (resource_id)"
        " WHERE s.n_docs IS DISTINCT FROM f.n OR s.total_len IS DISTINCT FROM f.len"
    )
    if counted:
        problems.append(f"{counted} resources' search counters disagree with the index")
    drift = await conn.fetchval(
        "SELECT COUNT(*) FROM om_cursors c WHERE c.pending_tokens <> (SELECT COALESCE(SUM(m.tokens), 0)"
        " FROM messages m WHERE m.thread_id = c.thread_id AND m.seq > c.seq AND m.seq <= c.counted_seq"
        " AND m.observable)"
    )
    if drift:
        problems.append(f"{drift} unobserved-token totals disagree with their messages")
    return problems
