"""Lines the user asked to remember, written into the log with no model.

The engine words each line (engine/remember.py); the store writes it as a group of the
active log: with the message that asked (a `<remember>` span, in the append's transaction,
so a message acknowledged has its line), or on its own (`om-mcp remember`, the
`update_thread` tool's `remember`). A cycle that read the log before keeps it: its commit
keeps the groups it did not read.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from om_mcp.store.coordination import add_events
from om_mcp.store.decode import now_iso
from om_mcp.store.observations import ensure_record, insert_groups
from om_mcp.store.rows import Message, NewGroup, Remembered
from om_mcp.store.tx import Tx


async def with_messages(tx: Tx, key: str, thread_id: str, appended: list[Message], remembered: list[Remembered]) -> int:
    """The lines of the messages just appended (a re-sent message adds none); how many."""
    by_id = {m.id: m for m in appended}
    groups = [
        NewGroup(
            text=line.text,
            tokens=line.tokens,
            first_seq=m.seq,
            last_seq=m.seq,
            first_message_id=m.id,
            last_message_id=m.id,
            thread_id=thread_id,
            observed_at=m.created_at,
        )
        for line in remembered
        if (m := by_id.get(line.message_id)) is not None
    ]
    if groups:
        generation = await tx.fetchval("SELECT generation FROM om_records WHERE key = $1 FOR UPDATE", key)
        await insert_groups(tx, key, generation, [asdict(g) for g in groups])
        await tx.execute("UPDATE om_records SET version = version + 1, updated_at = $1 WHERE key = $2", now_iso(), key)
    return len(groups)


async def remember(
    tx: Tx, key: str, resource_id: str, thread_id: str | None, group: NewGroup, events: list[dict[str, Any]]
) -> str:
    """Add one remembered line to a record's log (made when missing); the new group's id."""
    stamp = now_iso()
    await tx.execute(
        "INSERT INTO resources (id, created_at, updated_at) VALUES ($1, $2, $2) ON CONFLICT (id) DO NOTHING",
        resource_id,
        stamp,
    )
    await ensure_record(tx, key, resource_id, thread_id or "")
    generation = await tx.fetchval("SELECT generation FROM om_records WHERE key = $1 FOR UPDATE", key)
    await insert_groups(tx, key, generation, [asdict(group)])
    await tx.execute("UPDATE om_records SET version = version + 1, updated_at = $1 WHERE key = $2", stamp, key)
    await add_events(tx, events)
    found = await tx.fetchval(
        "SELECT id FROM om_groups WHERE record_key = $1 AND generation = $2 ORDER BY position DESC LIMIT 1",
        key,
        generation,
    )
    return str(found)
