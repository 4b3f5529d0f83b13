"""The conditional commits that end a cycle.

Every commit is one write transaction that first checks the state the cycle
started from (its cursors, its generation, the chunk tail) and that it still
holds its lease. A check that fails means someone else got there first: the
commit writes nothing and returns False, and the caller discards its work.
That, not the leases, is what makes double observation impossible; leases only
avoid paying for the same model call twice.

SQLite runs one writer at a time, so each check-then-write is atomic there. On
PostgreSQL every commit first locks the record's row (`FOR UPDATE`): writers of
one record queue on it as they queue on BEGIN IMMEDIATE in SQLite (but per
record, not per database), and the checks that follow read the latest committed
state, which nobody can change before COMMIT. Lock order, the same in every
transaction: thread row, record row, lease row, counters.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict
from typing import Any

from om_mcp.store.coordination import add_events, holds, lease_holder
from om_mcp.store.decode import CHUNK_COLUMNS, chunk, dumps, now_iso
from om_mcp.store.observations import groups as read_groups
from om_mcp.store.observations import insert_groups, unobserved_between
from om_mcp.store.retired import add_retired, drop_retired
from om_mcp.store.rows import BufferedReflection, Chunk, NewGroup
from om_mcp.store.tx import Tx

Lease = tuple[str, str]  # (op, owner)


async def _lock(tx: Tx, key: str) -> int | None:
    """Lock the record; its generation, or None when there is no such record."""
    return await tx.fetchval("SELECT generation FROM om_records WHERE key = $1 FOR UPDATE", key)


async def _leased(tx: Tx, key: str, lease: Lease | None) -> bool:
    """No other process took the cycle over. A lease that lapsed with nobody taking it (a slow
    renewal on a busy machine) leaves the work valid: the state checks decide, not the lease."""
    return lease is None or await holds(tx, key, *lease) or await lease_holder(tx, key, lease[0]) is None


async def _unchanged(tx: Tx, key: str, edits: int | None) -> bool:
    """Has the user left the log as the cycle read it (no forget, edit or restore since)? After `_lock`."""
    return edits is None or await tx.fetchval("SELECT edits FROM om_records WHERE key = $1", key) == edits


async def _cursor(tx: Tx, key: str, thread_id: str) -> int:
    seq = await tx.fetchval("SELECT seq FROM om_cursors WHERE record_key = $1 AND thread_id = $2", key, thread_id)
    return seq or 0


async def _move_cursor(tx: Tx, key: str, thread_id: str, seq: int) -> None:
    """Advance a thread's cursor, taking what it passes off the running totals."""
    old = await _cursor(tx, key, thread_id)
    if seq <= old:
        return
    tokens, count = await unobserved_between(tx, thread_id, old, seq)
    await tx.execute(
        "INSERT INTO om_cursors (record_key, thread_id, seq, counted_seq) VALUES ($1, $2, $3, $3)"
        " ON CONFLICT (record_key, thread_id) DO UPDATE SET seq = excluded.seq,"
        " pending_tokens = GREATEST(0, om_cursors.pending_tokens - $4),"
        " pending_messages = GREATEST(0, om_cursors.pending_messages - $5),"
        " counted_seq = GREATEST(om_cursors.counted_seq, excluded.seq)",
        key,
        thread_id,
        seq,
        tokens,
        count,
    )


async def _set_hints(tx: Tx, key: str, thread_id: str, hints: dict[str, Any]) -> None:
    """A thread's continuation hints; an absent hint keeps the old one."""
    for name in ("current_task", "suggested_response"):
        if hints.get(name):
            await tx.execute(
                f"UPDATE om_cursors SET {name} = $1 WHERE record_key = $2 AND thread_id = $3",
                hints[name],
                key,
                thread_id,
            )


async def _touch_record(
    tx: Tx, key: str, *, extracted: dict[str, Any] | None = None, observed_at: str | None = None
) -> None:
    sets, params = ["version = version + 1", "updated_at = $2"], [key, now_iso()]
    if observed_at:
        params.append(observed_at)
        sets.append(f"last_observed_at = ${len(params)}")
    if extracted:
        stored = await tx.fetchval("SELECT extracted FROM om_records WHERE key = $1", key)
        params.append(dumps({**json.loads(stored or "{}"), **extracted}))
        sets.append(f"extracted = ${len(params)}")
    await tx.execute(f"UPDATE om_records SET {', '.join(sets)} WHERE key = $1", *params)


def _group_rows(groups: Iterable[NewGroup]) -> list[dict[str, Any]]:
    return [asdict(g) for g in groups]


async def commit_observation(
    tx: Tx,
    key: str,
    *,
    lease: Lease | None,
    expected_cursors: dict[str, int],
    new_cursors: dict[str, int],
    groups: list[NewGroup],
    hints: dict[str, dict[str, Any]],
    extracted: dict[str, Any] | None,
    observed_at: str | None,
    events: Iterable[dict[str, Any]] = (),
    edits: int | None = None,
) -> bool:
    """Append groups and move cursors, if every cursor is still where the cycle saw it."""
    generation = await _lock(tx, key)
    if generation is None or not await _leased(tx, key, lease) or not await _unchanged(tx, key, edits):
        return False
    for thread_id, seq in expected_cursors.items():
        if await _cursor(tx, key, thread_id) != seq:
            return False
    await insert_groups(tx, key, generation, _group_rows(groups))
    for thread_id, seq in sorted(new_cursors.items()):
        await _move_cursor(tx, key, thread_id, seq)
        await _drop_stale_chunks(tx, key, thread_id, seq)
        await _set_hints(tx, key, thread_id, hints.get(thread_id, {}))
    # Buffering intervals count from what is still unobserved.
    await tx.execute("UPDATE om_records SET last_buffered_at_tokens = 0 WHERE key = $1", key)
    await _touch_record(tx, key, extracted=extracted, observed_at=observed_at)
    await add_events(tx, events)
    return True


async def _gap(tx: Tx, thread_id: str, after: int, before: int) -> bool:
    """Is an observable message between two seqs (exclusive)? Then chunks do not continue there."""
    return await tx.fetchval(
        "SELECT EXISTS (SELECT 1 FROM messages WHERE thread_id = $1 AND seq > $2 AND seq < $3 AND observable)",
        thread_id,
        after,
        before,
    )


async def _drop_stale_chunks(tx: Tx, key: str, thread_id: str, cursor: int) -> None:
    """After the cursor moved: drop chunks that overlap it, and those that no longer continue right after it."""
    await tx.execute(
        "DELETE FROM om_chunks WHERE record_key = $1 AND thread_id = $2 AND first_seq <= $3", key, thread_id, cursor
    )
    previous = cursor
    for _chunk_id, first, last in await tx.fetch(
        "SELECT id, first_seq, last_seq FROM om_chunks WHERE record_key = $1 AND thread_id = $2 ORDER BY first_seq",
        key,
        thread_id,
    ):
        if await _gap(tx, thread_id, previous, first):
            await tx.execute(
                "DELETE FROM om_chunks WHERE record_key = $1 AND thread_id = $2 AND first_seq >= $3",
                key,
                thread_id,
                first,
            )
            return
        previous = last


async def tail(tx: Tx, key: str, thread_id: str) -> int:
    """The last seq of a thread that is observed or buffered."""
    chunk_end = await tx.fetchval(
        "SELECT MAX(last_seq) FROM om_chunks WHERE record_key = $1 AND thread_id = $2", key, thread_id
    )
    return max(await _cursor(tx, key, thread_id), chunk_end or 0)


async def append_chunks(
    tx: Tx,
    key: str,
    *,
    lease: Lease | None,
    expected_tails: dict[str, int],
    chunks: list[Chunk],
    extracted: dict[str, Any] | None,
    buffered_at_tokens: int | None,
    events: Iterable[dict[str, Any]] = (),
    edits: int | None = None,
) -> bool:
    """Store buffered chunks, each continuing exactly after its thread's cursor or last chunk."""
    if await _lock(tx, key) is None or not await _leased(tx, key, lease) or not await _unchanged(tx, key, edits):
        return False
    for thread_id, seq in expected_tails.items():
        if await tail(tx, key, thread_id) != seq:
            return False
    await tx.executemany(
        f"INSERT INTO om_chunks ({CHUNK_COLUMNS}, record_key) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11,"
        " $12, $13, $14, $15) ON CONFLICT (cycle_id) DO NOTHING",
        [
            (
                c.id,
                c.cycle_id,
                c.thread_id,
                c.first_seq,
                c.last_seq,
                c.first_message_id,
                c.last_message_id,
                c.message_count,
                c.message_tokens,
                c.text,
                c.tokens,
                dumps(c.hints),
                c.last_message_at,
                c.created_at,
                key,
            )
            for c in chunks
        ],
    )
    if buffered_at_tokens is not None:
        await tx.execute("UPDATE om_records SET last_buffered_at_tokens = $1 WHERE key = $2", buffered_at_tokens, key)
    # A chunk's extracted values count at once; its hints wait for activation.
    await _touch_record(tx, key, extracted=extracted)
    await add_events(tx, events)
    return True


async def mark_buffered(tx: Tx, key: str, pending_tokens: int) -> None:
    """A buffering run found nothing worth a call at this count: the interval it crossed counts as
    covered. Without the mark a recount that raised the count (the hooks estimate) would make every
    poll schedule the same empty run, and a worker that waits for idle would never exit."""
    await tx.execute(
        "UPDATE om_records SET last_buffered_at_tokens = GREATEST(last_buffered_at_tokens, $1) WHERE key = $2",
        pending_tokens,
        key,
    )


async def activate_chunks(
    tx: Tx, key: str, chunk_ids: list[str], *, lease: Lease | None = None, events: Iterable[dict[str, Any]] = ()
) -> bool:
    """Move a prefix of the buffered chunks into the log, with no model call."""
    generation = await _lock(tx, key)
    if generation is None or not await _leased(tx, key, lease):
        return False
    stored = [
        chunk(r)
        for r in await tx.fetch(f"SELECT {CHUNK_COLUMNS} FROM om_chunks WHERE record_key = $1 ORDER BY first_seq", key)
    ]
    prefix = stored[: len(chunk_ids)]
    if not prefix or [c.id for c in prefix] != chunk_ids:
        return False
    # Per thread, the chunks must continue right after the cursor, with no message skipped.
    previous: dict[str, int] = {}
    for c in prefix:
        start = previous.get(c.thread_id)
        if start is None:
            start = await _cursor(tx, key, c.thread_id)
            if c.first_seq <= start:
                return False
        if await _gap(tx, c.thread_id, start, c.first_seq):
            # They would skip messages: drop them, buffering starts again from the cursor.
            await _drop_stale_chunks(tx, key, c.thread_id, await _cursor(tx, key, c.thread_id))
            return False
        previous[c.thread_id] = c.last_seq
    await insert_groups(tx, key, generation, [c.as_group() for c in prefix])
    last_by_thread: dict[str, Chunk] = {}
    for c in prefix:
        last_by_thread[c.thread_id] = c
    for thread_id, last in sorted(last_by_thread.items()):
        await _move_cursor(tx, key, thread_id, last.last_seq)
        await _set_hints(tx, key, thread_id, last.hints)
    # The buffering high-water mark drops with the tokens that left the window.
    await tx.execute(
        "UPDATE om_records SET last_buffered_at_tokens = GREATEST(0, last_buffered_at_tokens - $1) WHERE key = $2",
        sum(c.message_tokens for c in prefix),
        key,
    )
    await tx.execute("DELETE FROM om_chunks WHERE id = ANY ($1::text[])", chunk_ids)
    await _touch_record(tx, key, observed_at=max((c.last_message_at or "" for c in prefix), default=None) or None)
    await add_events(tx, events)
    return True


async def commit_reflection(
    tx: Tx,
    key: str,
    *,
    lease: Lease | None,
    generation: int,
    covered: int,
    groups: list[NewGroup],
    extracted: dict[str, Any] | None,
    blocked_at: int | None,
    events: Iterable[dict[str, Any]] = (),
    hints: dict[str, dict[str, Any]] | None = None,
    edits: int | None = None,
    retired: list[NewGroup] | None = None,
    unretired: list[str] | None = None,
) -> bool:
    """Start generation+1: the reflected groups, then every group of `generation` past the first `covered`.
    `retired`: what it dropped, merged, superseded or archived, onto the retired pile as retired by
    generation+1; `unretired`: groups of the pile back in the new log (a restore)."""
    current = await _lock(tx, key)
    if current is None or not await _leased(tx, key, lease) or current != generation:
        return False
    if not await _unchanged(tx, key, edits):
        return False
    old = await read_groups(tx, key, generation)
    if len(old) < covered:
        return False
    kept = [
        {
            "kind": g.kind,
            "thread_id": g.thread_id,
            "first_seq": g.first_seq,
            "last_seq": g.last_seq,
            "first_message_id": g.first_message_id,
            "last_message_id": g.last_message_id,
            "text": g.text,
            "tokens": g.tokens,
            "observed_at": g.observed_at,
        }
        for g in old[covered:]
    ]
    await tx.execute(
        "UPDATE om_records SET generation = $1, last_reflection_at = $2, reflection_blocked_at = $3 WHERE key = $4",
        generation + 1,
        now_iso(),
        blocked_at,
        key,
    )
    await insert_groups(tx, key, generation + 1, _group_rows(groups) + kept)
    await add_retired(tx, key, generation + 1, retired or [])
    await drop_retired(tx, key, unretired or [])
    await tx.execute("DELETE FROM om_buffered_reflections WHERE record_key = $1", key)
    for thread_id, values in sorted((hints or {}).items()):
        await _set_hints(tx, key, thread_id, values)
    await _touch_record(tx, key, extracted=extracted)
    await add_events(tx, events)
    return True


async def store_buffered_reflection(
    tx: Tx,
    key: str,
    reflection: BufferedReflection,
    *,
    lease: Lease | None,
    events: Iterable[dict[str, Any]] = (),
    edits: int | None = None,
) -> bool:
    current = await _lock(tx, key)
    if current is None or not await _leased(tx, key, lease) or current != reflection.generation:
        return False
    if not await _unchanged(tx, key, edits):
        return False
    await tx.execute(
        "INSERT INTO om_buffered_reflections (record_key, cycle_id, generation, covered, input_tokens, text, tokens,"
        " hints, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (record_key) DO UPDATE SET"
        " cycle_id = excluded.cycle_id, generation = excluded.generation, covered = excluded.covered,"
        " input_tokens = excluded.input_tokens, text = excluded.text, tokens = excluded.tokens,"
        " hints = excluded.hints, created_at = excluded.created_at",
        key,
        reflection.cycle_id,
        reflection.generation,
        reflection.covered,
        reflection.input_tokens,
        reflection.text,
        reflection.tokens,
        dumps(reflection.hints),
        now_iso(),
    )
    await _touch_record(tx, key)
    await add_events(tx, events)
    return True


async def discard_buffered_reflection(tx: Tx, key: str) -> None:
    await _lock(tx, key)
    await tx.execute("DELETE FROM om_buffered_reflections WHERE record_key = $1", key)
