"""The retired pile: what a reflection dropped, merged or superseded, and the archive.

Such a group stays in `om_groups` at generation RETIRED (-1), outside every log, with the
generation that retired it, why, and the hash of the line that took its place. Recall's
search finds it (both backends index every group), forget removes it like any line, and
a restore puts one back into the active log, as a group of its own.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from om_mcp.store.coordination import add_events
from om_mcp.store.decode import GROUP_COLUMNS, group, now_iso
from om_mcp.store.observations import insert_groups
from om_mcp.store.rows import RETIRED, Group, NewGroup
from om_mcp.store.tx import Tx


async def retired(tx: Tx, key: str, limit: int | None = None) -> list[Group]:
    """A record's retired groups, the most recently retired first (`limit`: at most that many)."""
    rows = await tx.fetch(
        f"SELECT {GROUP_COLUMNS} FROM om_groups g WHERE g.record_key = $1 AND g.generation = $2"
        " ORDER BY g.retired_by DESC, g.position DESC LIMIT $3",
        key,
        RETIRED,
        limit if limit is not None else 2**62,
    )
    return [group(r) for r in rows]


async def add_retired(tx: Tx, key: str, generation: int, groups: list[NewGroup]) -> None:
    """Retire groups, as retired by `generation` (with the commit that makes it)."""
    if groups:
        await insert_groups(tx, key, RETIRED, [{**asdict(g), "retired_by": generation} for g in groups])


async def drop_retired(tx: Tx, key: str, group_ids: list[str]) -> int:
    """Take groups off the pile (they are back in the log); how many there were."""
    ids = [
        r[0]
        for r in await tx.fetch(
            "SELECT id FROM om_groups WHERE record_key = $1 AND generation = $2 AND id = ANY ($3::text[])",
            key,
            RETIRED,
            group_ids,
        )
    ]
    if ids:
        await tx.forget_index([], ids)
        await tx.execute("DELETE FROM embeddings WHERE kind = 'group' AND ref = ANY ($1::text[])", ids)
        await tx.execute("DELETE FROM om_groups WHERE id = ANY ($1::text[])", ids)
    return len(ids)


async def restore_lines(
    tx: Tx, key: str, *, version: int, group: NewGroup, unretired: list[str], events: list[dict[str, Any]]
) -> bool:
    """Put a retired line back at the end of the active log, if the record is still at `version`.
    It counts as the user's change: a cycle that read the log before cannot commit."""
    generation = await tx.fetchval("SELECT generation FROM om_records WHERE key = $1 FOR UPDATE", key)
    if generation is None or await tx.fetchval("SELECT version FROM om_records WHERE key = $1", key) != version:
        return False
    await drop_retired(tx, key, unretired)
    await insert_groups(tx, key, generation, [asdict(group)])
    await tx.execute("DELETE FROM om_buffered_reflections WHERE record_key = $1", key)
    await tx.execute(
        "UPDATE om_records SET edits = edits + 1, version = version + 1, updated_at = $1 WHERE key = $2", now_iso(), key
    )
    await add_events(tx, events)
    return True
