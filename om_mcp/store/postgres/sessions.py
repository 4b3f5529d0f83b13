"""Host sessions on PostgreSQL: which ones are over and still hold unobserved
messages (see `store/sqlite/sessions.py`, whose rules and constants these are)."""

from __future__ import annotations

from typing import Any

from om_mcp.store.rows import SettledThread


async def settled_threads(
    conn: Any, quiet_before: str, record_key: str | None = None, limit: int = 50
) -> list[SettledThread]:
    """Host threads with unobserved messages that ended, or saw no message since `quiet_before` (ISO time)."""
    sql = (
        "SELECT c.record_key, c.thread_id, t.resource_id, c.pending_messages, c.pending_tokens, t.updated_at"
        " FROM om_cursors c JOIN threads t ON t.id = c.thread_id"
        " WHERE c.pending_messages > 0 AND t.metadata::jsonb ->> 'host' IS NOT NULL"
        " AND ((t.metadata::jsonb ->> 'ended_at') COLLATE \"C\" >= t.updated_at OR t.updated_at < $1)"
    )
    params: list[object] = [quiet_before]
    if record_key is not None:
        params.append(record_key)
        sql += f" AND c.record_key = ${len(params)}"
    params.append(limit)
    rows = await conn.fetch(sql + f" ORDER BY t.updated_at LIMIT ${len(params)}", *params)
    return [SettledThread(*row) for row in rows]
