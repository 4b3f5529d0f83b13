"""Observation records and their windows: what a turn and a cycle read.

Reads here are bounded by design: running totals on the cursors say how much is
unobserved, and the context window is found by a reverse scan that stops once
its token budget is full, so a backlog of 100k messages costs what 100 do.
"""

from __future__ import annotations

import sqlite3
import uuid
from typing import Any

from om_mcp.store.keys import parse_key, resource_key, thread_key
from om_mcp.store.rows import ContextRead, DueWork, Group, Hints, Message, Record, RecordState, Snapshot
from om_mcp.store.sqlite.decode import (
    CHUNK_COLUMNS,
    GROUP_COLUMNS,
    MESSAGE_COLUMNS,
    RECORD_COLUMNS,
    REFLECTION_COLUMNS,
    THREAD_COLUMNS,
    buffered_reflection,
    chunk,
    group,
    message,
    now_iso,
    record,
    thread,
)

OTHER_THREADS = 5  # resource scope: how many other busy threads the context shows
OTHER_THREAD_MESSAGES = 10


def ensure_record(conn: sqlite3.Connection, key: str, resource_id: str, thread_id: str) -> bool:
    """Create the record if missing; True when it was created (and adopted what another scope knew)."""
    scope, _ = parse_key(key)
    stamp = now_iso()
    created = (
        conn.execute(
            "INSERT OR IGNORE INTO om_records (key, scope, resource_id, thread_id, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (key, scope, resource_id, thread_id if scope == "thread" else None, stamp, stamp),
        ).rowcount
        == 1
    )
    if created:
        _adopt(conn, key, scope, resource_id, thread_id)
    return created


def _adopt(conn: sqlite3.Connection, key: str, scope: str, resource_id: str, thread_id: str) -> None:
    """A new record starts where the other scope's records stand, so switching the
    scope neither observes history twice nor forgets the log made so far."""
    if scope == "resource":
        threads = [r[0] for r in conn.execute("SELECT id FROM threads WHERE resource_id = ?", (resource_id,))]
        sources = {t: thread_key(t) for t in threads}
    else:
        sources = {thread_id: resource_key(resource_id)}
    groups: list[tuple[Any, ...]] = []
    for tid, source in sources.items():
        row = conn.execute(
            "SELECT seq FROM om_cursors WHERE record_key = ? AND thread_id = ?", (source, tid)
        ).fetchone()
        seq = row[0] if row else 0
        last = conn.execute("SELECT COALESCE(MAX(seq), 0) FROM messages WHERE thread_id = ?", (tid,)).fetchone()[0]
        if not last:
            continue
        tokens, count = conn.execute(
            "SELECT COALESCE(SUM(tokens), 0), COUNT(*) FROM messages WHERE thread_id = ? AND seq > ? AND observable",
            (tid, seq),
        ).fetchone()
        conn.execute(
            "INSERT OR REPLACE INTO om_cursors (record_key, thread_id, seq, pending_tokens, pending_messages,"
            " counted_seq) VALUES (?, ?, ?, ?, ?, ?)",
            (key, tid, seq, tokens, count, last),
        )
        groups += conn.execute(
            "SELECT g.kind, COALESCE(g.thread_id, r.thread_id), g.first_seq, g.last_seq, g.first_message_id,"
            " g.last_message_id, g.text, g.tokens, g.observed_at FROM om_groups g JOIN om_records r"
            " ON r.key = g.record_key AND r.generation = g.generation WHERE g.record_key = ?"
            " AND COALESCE(g.thread_id, r.thread_id) = ?",
            (source, tid),
        ).fetchall()
    if groups:
        groups.sort(key=lambda g: g[2])
        insert_groups(
            conn,
            key,
            0,
            [
                dict(
                    zip(
                        (
                            "kind",
                            "thread_id",
                            "first_seq",
                            "last_seq",
                            "first_message_id",
                            "last_message_id",
                            "text",
                            "tokens",
                            "observed_at",
                        ),
                        g,
                    )
                )
                for g in groups
            ],
        )


def insert_groups(conn: sqlite3.Connection, key: str, generation: int, groups: list[dict[str, Any]]) -> None:
    """Append groups at the end of a generation, and index them; keeps the record's token total."""
    position = conn.execute(
        "SELECT COALESCE(MAX(position), -1) FROM om_groups WHERE record_key = ? AND generation = ?", (key, generation)
    ).fetchone()[0]
    stamp = now_iso()
    rows = []
    for offset, g in enumerate(groups, start=1):
        rows.append(
            (
                uuid.uuid4().hex[:16],
                key,
                generation,
                position + offset,
                g["kind"],
                g["thread_id"],
                g["first_seq"],
                g["last_seq"],
                g["first_message_id"],
                g["last_message_id"],
                g["text"],
                g["tokens"],
                g["observed_at"],
                stamp,
            )
        )
    conn.executemany(
        "INSERT INTO om_groups (id, record_key, generation, position, kind, thread_id, first_seq, last_seq,"
        " first_message_id, last_message_id, text, tokens, observed_at, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    conn.executemany(
        "INSERT INTO om_groups_fts (group_id, record_key, text) VALUES (?, ?, ?)", [(r[0], key, r[10]) for r in rows]
    )
    conn.execute(
        "UPDATE om_records SET observation_tokens = (SELECT COALESCE(SUM(tokens), 0) FROM om_groups"
        " WHERE record_key = om_records.key AND generation = om_records.generation) WHERE key = ?",
        (key,),
    )


def record_state(conn: sqlite3.Connection, key: str, thread_id: str) -> RecordState:
    row = conn.execute(
        "SELECT r.generation, r.observation_tokens, r.last_buffered_at_tokens, r.reflection_blocked_at,"
        " (SELECT COALESCE(SUM(pending_tokens), 0) FROM om_cursors WHERE record_key = r.key),"
        " (SELECT COALESCE(SUM(pending_messages), 0) FROM om_cursors WHERE record_key = r.key),"
        " (SELECT pending_tokens FROM om_cursors WHERE record_key = r.key AND thread_id = ?),"
        " (SELECT pending_messages FROM om_cursors WHERE record_key = r.key AND thread_id = ?),"
        " (SELECT COUNT(*) FROM om_chunks WHERE record_key = r.key),"
        " (SELECT COALESCE(SUM(message_tokens), 0) FROM om_chunks WHERE record_key = r.key),"
        " (SELECT generation FROM om_buffered_reflections WHERE record_key = r.key)"
        " FROM om_records r WHERE r.key = ?",
        (thread_id, thread_id, key),
    ).fetchone()
    if row is None:
        return RecordState(key, 0, 0, 0, 0, 0, 0, 0, 0, 0, None, None)
    (
        generation,
        observation_tokens,
        buffered_at,
        blocked_at,
        pending,
        count,
        t_pending,
        t_count,
        chunks,
        chunk_tokens,
        reflection_generation,
    ) = row
    return RecordState(
        key=key,
        generation=generation,
        observation_tokens=observation_tokens,
        pending_tokens=pending,
        pending_messages=count,
        thread_pending_tokens=t_pending or 0,
        thread_pending_messages=t_count or 0,
        last_buffered_at_tokens=buffered_at,
        chunk_count=chunks,
        chunk_message_tokens=chunk_tokens,
        buffered_reflection_generation=reflection_generation,
        reflection_blocked_at=blocked_at,
    )


def get_record(conn: sqlite3.Connection, key: str) -> Record | None:
    row = conn.execute(f"SELECT {RECORD_COLUMNS} FROM om_records WHERE key = ?", (key,)).fetchone()
    if row is None:
        return None
    cursors = dict(conn.execute("SELECT thread_id, seq FROM om_cursors WHERE record_key = ?", (key,)))
    return record(row, cursors)


def snapshot(conn: sqlite3.Connection, key: str, thread_id: str) -> Snapshot | None:
    """The record, its windows, chunks and buffered reflection, and the thread; None before the first message."""
    found = get_record(conn, key)
    if found is None:
        return None
    reflection = conn.execute(
        f"SELECT {REFLECTION_COLUMNS} FROM om_buffered_reflections WHERE record_key = ?", (key,)
    ).fetchone()
    row = conn.execute(f"SELECT {THREAD_COLUMNS} FROM threads t WHERE t.id = ?", (thread_id,)).fetchone()
    hints = conn.execute(
        "SELECT current_task, suggested_response FROM om_cursors WHERE record_key = ? AND thread_id = ?",
        (key, thread_id),
    ).fetchone()
    return Snapshot(
        record=found,
        state=record_state(conn, key, thread_id),
        chunks=chunks(conn, key),
        buffered_reflection=buffered_reflection(reflection) if reflection else None,
        thread=thread(row) if row else None,
        hints=Hints(*hints) if hints else Hints(),
    )


def chunks(conn: sqlite3.Connection, key: str) -> list:
    rows = conn.execute(f"SELECT {CHUNK_COLUMNS} FROM om_chunks WHERE record_key = ? ORDER BY first_seq", (key,))
    return [chunk(r) for r in rows]


def groups(conn: sqlite3.Connection, key: str, generation: int | None = None) -> list[Group]:
    """A generation's groups in log order; the active one by default."""
    if generation is None:
        rows = conn.execute(
            f"SELECT {GROUP_COLUMNS} FROM om_groups g JOIN om_records r ON r.key = g.record_key"
            " AND r.generation = g.generation WHERE g.record_key = ? ORDER BY g.position",
            (key,),
        )
    else:
        rows = conn.execute(
            f"SELECT {GROUP_COLUMNS} FROM om_groups g WHERE g.record_key = ? AND g.generation = ? ORDER BY g.position",
            (key, generation),
        )
    return [group(r) for r in rows]


def generations(conn: sqlite3.Connection, key: str) -> list[tuple[int, list[Group]]]:
    """Every generation, newest first."""
    out: dict[int, list[Group]] = {}
    rows = conn.execute(
        f"SELECT {GROUP_COLUMNS} FROM om_groups g WHERE g.record_key = ? ORDER BY g.generation DESC, g.position", (key,)
    )
    for row in rows:
        found = group(row)
        out.setdefault(found.generation, []).append(found)
    return list(out.items())


def context(
    conn: sqlite3.Connection,
    key: str,
    thread_id: str,
    budget: int,
    working_memory: tuple[str, str] | None,
    others_since: str | None = None,
) -> ContextRead | None:
    """Everything the agent sees, in one snapshot: record, log, window, other threads, working memory.
    Other threads: the most recently active ones with unobserved messages (active since
    `others_since`, an ISO time, when given)."""
    snap = snapshot(conn, key, thread_id)
    if snap is None:
        return None
    cursor = snap.record.cursors.get(thread_id, 0)
    others: dict[str, list[Message]] = {}
    if snap.record.scope == "resource":
        busy = conn.execute(
            "SELECT c.thread_id, c.seq FROM om_cursors c JOIN threads t ON t.id = c.thread_id"
            " WHERE c.record_key = ? AND c.thread_id != ? AND c.pending_messages > 0 AND t.updated_at >= ?"
            " ORDER BY t.updated_at DESC LIMIT ?",
            (key, thread_id, others_since or "", OTHER_THREADS),
        ).fetchall()
        for other, seq in busy:
            recent = conn.execute(
                f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.thread_id = ? AND m.seq > ? AND m.observable"
                " ORDER BY m.seq DESC LIMIT ?",
                (other, seq, OTHER_THREAD_MESSAGES),
            ).fetchall()
            others[other] = [message(r) for r in reversed(recent)]
    memory = None
    if working_memory is not None:
        table, ident = working_memory
        row = conn.execute(f"SELECT working_memory FROM {table} WHERE id = ?", (ident,)).fetchone()
        memory = row[0] if row else None
    return ContextRead(
        snapshot=snap,
        groups=groups(conn, key),
        window=window(conn, thread_id, cursor, budget),
        other_threads=others,
        working_memory=memory,
    )


def window(conn: sqlite3.Connection, thread_id: str, cursor: int, budget: int) -> list[Message]:
    """The newest unobserved messages whose stored token counts fit `budget` (at least one), oldest first."""
    used, first = 0, None
    sizes = conn.execute(
        "SELECT seq, tokens FROM messages WHERE thread_id = ? AND seq > ? AND observable ORDER BY seq DESC",
        (thread_id, cursor),
    )
    for seq, tokens in sizes:  # stepped lazily: stops reading at the budget
        if first is not None and used + tokens > budget:
            break
        used += tokens
        first = seq
    sizes.close()
    if first is None:
        return []
    rows = conn.execute(
        f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.thread_id = ? AND m.seq >= ? AND m.observable"
        " ORDER BY m.seq",
        (thread_id, first),
    )
    return [message(r) for r in rows]


def unobserved(
    conn: sqlite3.Connection, key: str, thread_id: str, *, after_seq: int | None = None, max_tokens: int | None = None
) -> list[Message]:
    """A thread's observable messages after the record's cursor (and `after_seq`), oldest first,
    up to `max_tokens` (at least one)."""
    row = conn.execute("SELECT seq FROM om_cursors WHERE record_key = ? AND thread_id = ?", (key, thread_id)).fetchone()
    start = max(row[0] if row else 0, after_seq or 0)
    rows = conn.execute(
        f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.thread_id = ? AND m.seq > ? AND m.observable ORDER BY m.seq",
        (thread_id, start),
    )
    out: list[Message] = []
    used = 0
    for r in rows:
        if max_tokens is not None and out and used + r[9] > max_tokens:
            break
        out.append(message(r))
        used += r[9]
    rows.close()
    return out


def busy_threads(conn: sqlite3.Connection, key: str) -> list[tuple[str, int, int]]:
    """(thread_id, cursor seq, pending tokens) of a record's threads with unobserved messages, busiest first."""
    rows = conn.execute(
        "SELECT thread_id, seq, pending_tokens FROM om_cursors WHERE record_key = ? AND pending_messages > 0"
        " ORDER BY pending_tokens DESC",
        (key,),
    )
    return [tuple(r) for r in rows]  # type: ignore[misc]


def due(conn: sqlite3.Connection, min_pending: int, min_observation_tokens: int) -> list[DueWork]:
    """Records that may need a cycle: enough unobserved tokens, or a log big enough to reflect."""
    rows = conn.execute(
        "SELECT r.key, r.resource_id, COALESCE(r.thread_id, (SELECT c2.thread_id FROM om_cursors c2"
        "  WHERE c2.record_key = r.key ORDER BY c2.pending_tokens DESC LIMIT 1)),"
        " (SELECT COALESCE(SUM(c.pending_tokens), 0) FROM om_cursors c WHERE c.record_key = r.key) AS pending"
        " FROM om_records r WHERE pending >= ? OR r.observation_tokens >= ?",
        (min_pending, min_observation_tokens),
    ).fetchall()
    return [DueWork(key, resource, thread_id, pending) for key, resource, thread_id, pending in rows if thread_id]


def thread_hints(conn: sqlite3.Connection, key: str, thread_ids: list[str]) -> dict[str, Hints]:
    """Each thread's continuation hints under a record."""
    if not thread_ids:
        return {}
    rows = conn.execute(
        "SELECT thread_id, current_task, suggested_response FROM om_cursors WHERE record_key = ?"
        f" AND thread_id IN ({','.join('?' * len(thread_ids))})",
        (key, *thread_ids),
    )
    return {t: Hints(task, response) for t, task, response in rows}
