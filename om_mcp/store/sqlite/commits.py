"""The conditional commits that end a cycle, and leases.

Every commit is one write transaction that first checks the state the cycle
started from (its cursors, its generation, the chunk tail) and that it still
holds its lease. A check that fails means someone else got there first: the
commit writes nothing and returns False, and the caller discards its work.
That, not the leases, is what makes double observation impossible; leases only
avoid paying for the same model call twice.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable
from dataclasses import asdict
from typing import Any

from om_mcp.store.rows import BufferedReflection, Chunk, NewGroup
from om_mcp.store.sqlite.coordination import add_events, holds
from om_mcp.store.sqlite.decode import CHUNK_COLUMNS, chunk, dumps, now_iso
from om_mcp.store.sqlite.observations import groups as read_groups
from om_mcp.store.sqlite.observations import insert_groups

Lease = tuple[str, str]  # (op, owner)


def _leased(conn: sqlite3.Connection, key: str, lease: Lease | None) -> bool:
    return lease is None or holds(conn, key, *lease)


def _unchanged(conn: sqlite3.Connection, key: str, edits: int | None) -> bool:
    """Has the user left the log as the cycle read it (no forget, edit or restore since)?"""
    if edits is None:
        return True
    row = conn.execute("SELECT edits FROM om_records WHERE key = ?", (key,)).fetchone()
    return row is not None and row[0] == edits


def _cursor(conn: sqlite3.Connection, key: str, thread_id: str) -> int:
    row = conn.execute("SELECT seq FROM om_cursors WHERE record_key = ? AND thread_id = ?", (key, thread_id)).fetchone()
    return row[0] if row else 0


def _move_cursor(conn: sqlite3.Connection, key: str, thread_id: str, seq: int) -> None:
    """Advance a thread's cursor, taking what it passes off the running totals."""
    old = _cursor(conn, key, thread_id)
    if seq <= old:
        return
    tokens, count = conn.execute(
        "SELECT COALESCE(SUM(tokens), 0), COUNT(*) FROM messages WHERE thread_id = ? AND seq > ? AND seq <= ?"
        " AND observable",
        (thread_id, old, seq),
    ).fetchone()
    conn.execute(
        "INSERT INTO om_cursors (record_key, thread_id, seq, counted_seq) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (record_key, thread_id) DO UPDATE SET seq = excluded.seq,"
        " pending_tokens = MAX(0, pending_tokens - ?), pending_messages = MAX(0, pending_messages - ?),"
        " counted_seq = MAX(counted_seq, excluded.seq)",
        (key, thread_id, seq, seq, tokens, count),
    )


def _set_hints(conn: sqlite3.Connection, key: str, thread_id: str, hints: dict[str, Any]) -> None:
    """A thread's continuation hints; an absent hint keeps the old one."""
    for name in ("current_task", "suggested_response"):
        if hints.get(name):
            conn.execute(
                f"UPDATE om_cursors SET {name} = ? WHERE record_key = ? AND thread_id = ?",
                (hints[name], key, thread_id),
            )


def _touch_record(
    conn: sqlite3.Connection, key: str, *, extracted: dict[str, Any] | None = None, observed_at: str | None = None
) -> None:
    sets, params = ["version = version + 1", "updated_at = ?"], [now_iso()]
    if observed_at:
        sets.append("last_observed_at = ?")
        params.append(observed_at)
    if extracted:
        import json

        stored = conn.execute("SELECT extracted FROM om_records WHERE key = ?", (key,)).fetchone()[0]
        sets.append("extracted = ?")
        params.append(dumps({**json.loads(stored or "{}"), **extracted}))
    conn.execute(f"UPDATE om_records SET {', '.join(sets)} WHERE key = ?", (*params, key))


def _group_rows(groups: Iterable[NewGroup]) -> list[dict[str, Any]]:
    return [asdict(g) for g in groups]


def commit_observation(
    conn: sqlite3.Connection,
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
    """Append groups and move cursors, if every cursor is still where the cycle saw it.
    `hints` are per thread."""
    if not _leased(conn, key, lease) or not _unchanged(conn, key, edits):
        return False
    if any(_cursor(conn, key, t) != seq for t, seq in expected_cursors.items()):
        return False
    generation = conn.execute("SELECT generation FROM om_records WHERE key = ?", (key,)).fetchone()[0]
    insert_groups(conn, key, generation, _group_rows(groups))
    for thread_id, seq in new_cursors.items():
        _move_cursor(conn, key, thread_id, seq)
        _drop_stale_chunks(conn, key, thread_id, seq)
        _set_hints(conn, key, thread_id, hints.get(thread_id, {}))
    # Buffering intervals count from what is still unobserved.
    conn.execute("UPDATE om_records SET last_buffered_at_tokens = 0 WHERE key = ?", (key,))
    _touch_record(conn, key, extracted=extracted, observed_at=observed_at)
    add_events(conn, events)
    return True


def _gap(conn: sqlite3.Connection, thread_id: str, after: int, before: int) -> bool:
    """Is an observable message between two seqs (exclusive)? Then chunks do not continue there."""
    return (
        conn.execute(
            "SELECT 1 FROM messages WHERE thread_id = ? AND seq > ? AND seq < ? AND observable LIMIT 1",
            (thread_id, after, before),
        ).fetchone()
        is not None
    )


def _drop_stale_chunks(conn: sqlite3.Connection, key: str, thread_id: str, cursor: int) -> None:
    """After the cursor moved: a chunk overlapping what was just observed would observe it twice,
    and chunks that no longer continue right after the cursor would skip messages."""
    conn.execute(
        "DELETE FROM om_chunks WHERE record_key = ? AND thread_id = ? AND first_seq <= ?", (key, thread_id, cursor)
    )
    previous = cursor
    for _chunk_id, first, last in conn.execute(
        "SELECT id, first_seq, last_seq FROM om_chunks WHERE record_key = ? AND thread_id = ? ORDER BY first_seq",
        (key, thread_id),
    ).fetchall():
        if _gap(conn, thread_id, previous, first):
            conn.execute(
                "DELETE FROM om_chunks WHERE record_key = ? AND thread_id = ? AND first_seq >= ?",
                (key, thread_id, first),
            )
            return
        previous = last


def tail(conn: sqlite3.Connection, key: str, thread_id: str) -> int:
    """The last seq of a thread that is observed or buffered."""
    chunk_end = conn.execute(
        "SELECT MAX(last_seq) FROM om_chunks WHERE record_key = ? AND thread_id = ?", (key, thread_id)
    ).fetchone()[0]
    return max(_cursor(conn, key, thread_id), chunk_end or 0)


def append_chunks(
    conn: sqlite3.Connection,
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
    if not _leased(conn, key, lease) or not _unchanged(conn, key, edits):
        return False
    if any(tail(conn, key, t) != seq for t, seq in expected_tails.items()):
        return False
    conn.executemany(
        f"INSERT INTO om_chunks ({CHUNK_COLUMNS}, record_key) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (cycle_id) DO NOTHING",
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
        conn.execute("UPDATE om_records SET last_buffered_at_tokens = ? WHERE key = ?", (buffered_at_tokens, key))
    # A chunk's extracted values count at once (OM-25); its hints wait for activation.
    _touch_record(conn, key, extracted=extracted)
    add_events(conn, events)
    return True


def activate_chunks(
    conn: sqlite3.Connection,
    key: str,
    chunk_ids: list[str],
    *,
    lease: Lease | None = None,
    events: Iterable[dict[str, Any]] = (),
) -> bool:
    """Move a prefix of the buffered chunks into the log, with no model call."""
    if not _leased(conn, key, lease):
        return False
    stored = [
        chunk(r)
        for r in conn.execute(f"SELECT {CHUNK_COLUMNS} FROM om_chunks WHERE record_key = ? ORDER BY first_seq", (key,))
    ]
    prefix = stored[: len(chunk_ids)]
    if not prefix or [c.id for c in prefix] != chunk_ids:
        return False
    # Per thread, the chunks must continue right after the cursor, with no message skipped.
    previous: dict[str, int] = {}
    for c in prefix:
        start = previous.get(c.thread_id)
        if start is None:
            start = _cursor(conn, key, c.thread_id)
            if c.first_seq <= start:
                return False
        if _gap(conn, c.thread_id, start, c.first_seq):
            # They would skip messages: drop them, buffering starts again from the cursor.
            _drop_stale_chunks(conn, key, c.thread_id, _cursor(conn, key, c.thread_id))
            return False
        previous[c.thread_id] = c.last_seq
    generation = conn.execute("SELECT generation FROM om_records WHERE key = ?", (key,)).fetchone()[0]
    insert_groups(conn, key, generation, [c.as_group() for c in prefix])
    last_by_thread: dict[str, Chunk] = {}
    for c in prefix:
        last_by_thread[c.thread_id] = c
    for thread_id, last in last_by_thread.items():
        _move_cursor(conn, key, thread_id, last.last_seq)
        _set_hints(conn, key, thread_id, last.hints)
    # The buffering high-water mark drops with the tokens that left the window.
    conn.execute(
        "UPDATE om_records SET last_buffered_at_tokens = MAX(0, last_buffered_at_tokens - ?) WHERE key = ?",
        (sum(c.message_tokens for c in prefix), key),
    )
    conn.execute(f"DELETE FROM om_chunks WHERE id IN ({','.join('?' * len(chunk_ids))})", chunk_ids)
    _touch_record(conn, key, observed_at=max((c.last_message_at or "" for c in prefix), default=None) or None)
    add_events(conn, events)
    return True


def commit_reflection(
    conn: sqlite3.Connection,
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
) -> bool:
    """Start generation+1: the reflected groups, then every group of `generation`
    past the first `covered` (those were added while the reflection ran)."""
    if not _leased(conn, key, lease) or not _unchanged(conn, key, edits):
        return False
    current = conn.execute("SELECT generation FROM om_records WHERE key = ?", (key,)).fetchone()
    if current is None or current[0] != generation:
        return False
    old = read_groups(conn, key, generation)
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
    conn.execute(
        "UPDATE om_records SET generation = ?, last_reflection_at = ?, reflection_blocked_at = ? WHERE key = ?",
        (generation + 1, now_iso(), blocked_at, key),
    )
    insert_groups(conn, key, generation + 1, _group_rows(groups) + kept)
    conn.execute("DELETE FROM om_buffered_reflections WHERE record_key = ?", (key,))
    for thread_id, values in (hints or {}).items():
        _set_hints(conn, key, thread_id, values)
    _touch_record(conn, key, extracted=extracted)
    add_events(conn, events)
    return True


def store_buffered_reflection(
    conn: sqlite3.Connection,
    key: str,
    reflection: BufferedReflection,
    *,
    lease: Lease | None,
    events: Iterable[dict[str, Any]] = (),
    edits: int | None = None,
) -> bool:
    if not _leased(conn, key, lease) or not _unchanged(conn, key, edits):
        return False
    current = conn.execute("SELECT generation FROM om_records WHERE key = ?", (key,)).fetchone()
    if current is None or current[0] != reflection.generation:
        return False
    conn.execute(
        "INSERT OR REPLACE INTO om_buffered_reflections (record_key, cycle_id, generation, covered, input_tokens,"
        " text, tokens, hints, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            key,
            reflection.cycle_id,
            reflection.generation,
            reflection.covered,
            reflection.input_tokens,
            reflection.text,
            reflection.tokens,
            dumps(reflection.hints),
            now_iso(),
        ),
    )
    _touch_record(conn, key)
    add_events(conn, events)
    return True


def discard_buffered_reflection(conn: sqlite3.Connection, key: str) -> None:
    conn.execute("DELETE FROM om_buffered_reflections WHERE record_key = ?", (key,))


def expire_leases(conn: sqlite3.Connection) -> int:
    """Drop leases whose holders stopped renewing them (crashed processes)."""
    return conn.execute("DELETE FROM om_leases WHERE expires_at < ?", (time.time(),)).rowcount
