"""The memory as it was at a given time: the log, the working memory, the messages.

A generation starts when its first group is written (a reflection or a restore writes
all of its groups at once); groups observed later carry their own time. So the log at
time T is the newest generation that had started by then, less the groups written after
T. Working memory keeps every value it was given (`om_working_memory_history`), so its
value at T is the last one saved by then. Times are ISO 8601 text in UTC, compared as
text (every time the store writes has the same form).
"""

from __future__ import annotations

from datetime import UTC, datetime

from om_mcp.store.decode import GROUP_COLUMNS, MESSAGE_COLUMNS, group, message, now_iso
from om_mcp.store.rows import Group, Message, Scope
from om_mcp.store.tx import Row, Tx

MESSAGES_AT = 200


async def save_working_memory(tx: Tx, scope: Scope, owner: str, text: str | None) -> None:
    """Keep a value working memory was given (with the write that stores it)."""
    await tx.execute(
        "INSERT INTO om_working_memory_history (scope, owner, text, saved_at) VALUES ($1, $2, $3, $4)",
        scope,
        owner,
        text,
        now_iso(),
    )


async def working_memory_at(tx: Tx, scope: Scope, owner: str, at: str) -> str | None:
    """Working memory as it was at `at` (None: it had none yet)."""
    return await tx.fetchval(
        "SELECT text FROM om_working_memory_history WHERE scope = $1 AND owner = $2 AND saved_at <= $3"
        " ORDER BY saved_at DESC, id DESC LIMIT 1",
        scope,
        owner,
        at,
    )


async def log_at(tx: Tx, key: str, at: str) -> tuple[int | None, list[Group]]:
    """(generation, groups) of a record's log as it was at `at`; (None, []) before its first group."""
    generation = await tx.fetchval(
        "SELECT MAX(generation) FROM (SELECT generation, MIN(created_at) AS started FROM om_groups"
        " WHERE record_key = $1 AND generation >= 0 GROUP BY generation) s WHERE started <= $2",
        key,
        at,
    )
    if generation is None:
        return None, []
    rows = await tx.fetch(
        f"SELECT {GROUP_COLUMNS} FROM om_groups g WHERE g.record_key = $1 AND g.generation = $2"
        " AND g.created_at <= $3 ORDER BY g.position",
        key,
        generation,
        at,
    )
    return generation, [group(r) for r in rows]


async def messages_at(tx: Tx, thread_id: str, after_seq: int, at: datetime, budget: int) -> list[Message]:
    """The thread's newest observable messages after `after_seq` made by `at`, whose stored
    token counts fit `budget` (at least one), oldest first. A message keeps the time zone it
    was sent with, so times are compared as times, not as text; at most MESSAGES_AT are read."""
    out: list[Message] = []
    used = 0

    def full(row: Row) -> bool:
        nonlocal used
        found = message(row)
        if _time(found.created_at) > at:
            return False
        if out and used + found.tokens > budget:
            return True
        out.append(found)
        used += found.tokens
        return len(out) >= MESSAGES_AT

    await tx.scan(
        f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.thread_id = $1 AND m.seq > $2 AND m.observable"
        " ORDER BY m.seq DESC",
        thread_id,
        after_seq,
        until=full,
    )
    return list(reversed(out))


def _time(stamp: str) -> datetime:
    when = datetime.fromisoformat(stamp)
    return when if when.tzinfo else when.replace(tzinfo=UTC)
