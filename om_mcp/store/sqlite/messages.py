"""Messages: the append (one transaction, a handful of statements), pages and lookups."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from typing import Any

from om_mcp.store import resends
from om_mcp.store.errors import StoreError
from om_mcp.store.rows import AppendResult, Message, NewMessage, Scope
from om_mcp.store.sqlite import fts
from om_mcp.store.sqlite.decode import MESSAGE_COLUMNS, THREAD_COLUMNS, dumps, message, now_iso, stored_parts, thread
from om_mcp.store.sqlite.observations import ensure_record, record_state
from om_mcp.store.sqlite.privacy import count_redactions

# A new thread's working memory: given what is stored for its scope, the value to store (or None).
WorkingMemorySeed = tuple[Scope, Callable[[str | None], str | None]]


def append(
    conn: sqlite3.Connection,
    thread_id: str,
    resource_id: str,
    record_key: str,
    messages: list[NewMessage],
    *,
    counted_by: int = 0,
    thread_metadata: dict[str, Any] | None = None,
    working_memory: WorkingMemorySeed | None = None,
) -> AppendResult:
    """Insert a batch, all or nothing, and keep the record's running totals.

    A message whose (thread, id) exists with the same content is skipped; with
    other content it is an error and nothing of the batch is written.
    """
    result = AppendResult()
    row = conn.execute(
        f"SELECT {THREAD_COLUMNS}, (SELECT MAX(seq) FROM messages WHERE thread_id = t.id),"
        " (SELECT counted_seq FROM om_cursors WHERE record_key = ? AND thread_id = t.id)"
        " FROM threads t WHERE t.id = ?",
        (record_key, thread_id),
    ).fetchone()
    if row is None:
        current = _create_thread(conn, thread_id, resource_id, thread_metadata, working_memory)
        result.thread_created, last_seq, counted_seq = True, 0, None
    else:
        current, last_seq, counted_seq = thread(row[:-2]), row[-2] or 0, row[-1]
        if current.resource_id != resource_id:
            raise StoreError(
                f"thread {thread_id!r} belongs to resource {current.resource_id!r}, not {resource_id!r};"
                " a thread keeps its resource for life",
                field="resource_id",
            )
    fresh = _new_only(conn, thread_id, messages, result)
    if fresh:
        if ensure_record(conn, record_key, resource_id, thread_id):
            row = conn.execute(
                "SELECT counted_seq FROM om_cursors WHERE record_key = ? AND thread_id = ?", (record_key, thread_id)
            ).fetchone()
            counted_seq = row[0] if row else None
        base = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'messages'").fetchone()
        base = base[0] if base else 0
        conn.executemany(
            "INSERT INTO messages (id, thread_id, resource_id, role, body, parts, created_at, metadata, tokens,"
            " part_tokens, counted_by, observable) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    m.id,
                    thread_id,
                    resource_id,
                    m.role,
                    m.body,
                    stored_parts(m.parts, m.body),
                    m.created_at,
                    dumps(m.metadata) if m.metadata else None,
                    m.tokens,
                    dumps(m.part_tokens) if m.part_tokens and len(m.part_tokens) > 1 else None,
                    counted_by,
                    int(m.observable),
                )
                for m in fresh
            ],
        )
        seqs = list(range(base + 1, base + len(fresh) + 1))
        if conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'messages'").fetchone()[0] != seqs[-1]:
            seqs = [
                conn.execute("SELECT seq FROM messages WHERE thread_id = ? AND id = ?", (thread_id, m.id)).fetchone()[0]
                for m in fresh
            ]
        result.appended = [
            Message(seq, m.id, thread_id, resource_id, m.role, m.parts, m.created_at, m.metadata, m.tokens)
            for seq, m in zip(seqs, fresh)
        ]
        fts.index_messages(conn, seqs)
        result.redactions = count_redactions(conn, resource_id, fresh)
        _update_thread(conn, current, fresh)
        catch_up = 0, 0
        if (counted_seq or 0) < last_seq:
            catch_up = _unobserved_since(conn, thread_id, counted_seq or 0, last_seq)
        observable = [m for m in fresh if m.observable]
        conn.execute(
            "INSERT INTO om_cursors (record_key, thread_id, seq, pending_tokens, pending_messages, counted_seq)"
            " VALUES (?, ?, 0, ?, ?, ?) ON CONFLICT (record_key, thread_id) DO UPDATE SET"
            " pending_tokens = pending_tokens + excluded.pending_tokens,"
            " pending_messages = pending_messages + excluded.pending_messages, counted_seq = excluded.counted_seq",
            (
                record_key,
                thread_id,
                sum(m.tokens for m in observable) + catch_up[0],
                len(observable) + catch_up[1],
                seqs[-1],
            ),
        )
    result.state = record_state(conn, record_key, thread_id)
    result.thread = current
    return result


def _create_thread(
    conn: sqlite3.Connection,
    thread_id: str,
    resource_id: str,
    metadata: dict[str, Any] | None,
    working_memory: WorkingMemorySeed | None,
):
    stamp = now_iso()
    conn.execute(
        "INSERT INTO resources (id, created_at, updated_at) VALUES (?, ?, ?) ON CONFLICT (id) DO NOTHING",
        (resource_id, stamp, stamp),
    )
    metadata = dict(metadata or {})
    title = metadata.pop("title", None)
    metadata.pop("working_memory", None)
    thread_memory = None
    if working_memory is not None:
        scope, seed = working_memory
        if scope == "thread":
            thread_memory = seed(None)
        else:
            stored = conn.execute("SELECT working_memory FROM resources WHERE id = ?", (resource_id,)).fetchone()[0]
            value = seed(stored)
            if value is not None:
                conn.execute("UPDATE resources SET working_memory = ? WHERE id = ?", (value, resource_id))
    conn.execute(
        "INSERT INTO threads (id, resource_id, title, title_pinned, metadata, working_memory, created_at, updated_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (thread_id, resource_id, title, int(title is not None), dumps(metadata), thread_memory, stamp, stamp),
    )
    row = conn.execute(f"SELECT {THREAD_COLUMNS} FROM threads t WHERE t.id = ?", (thread_id,)).fetchone()
    return thread(row)


def _new_only(conn: sqlite3.Connection, thread_id: str, messages: list[NewMessage], result: AppendResult):
    """The messages not stored yet; re-sends are counted, clashes refused (naming the message)."""
    if size := resends.tail_size(messages):
        tail = conn.execute(
            f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.thread_id = ? ORDER BY m.seq DESC LIMIT ?",
            (thread_id, size),
        ).fetchall()
        messages, resent = resends.settle_against_tail([message(r) for r in reversed(tail)], messages)
        result.skipped_duplicates += resent
    ids = list(dict.fromkeys(m.id for m in messages))
    stored: dict[str, Message] = {}
    for start in range(0, len(ids), 500):
        batch = ids[start : start + 500]
        rows = conn.execute(
            f"SELECT {MESSAGE_COLUMNS} FROM messages m"
            f" WHERE m.thread_id = ? AND m.id IN ({','.join('?' * len(batch))})",
            (thread_id, *batch),
        )
        stored.update((r[1], message(r)) for r in rows)
    fresh, skipped = resends.new_by_id(thread_id, messages, stored)
    result.skipped_duplicates += skipped
    return fresh


def _update_thread(conn: sqlite3.Connection, current, fresh: list[NewMessage]) -> None:
    last_assistant, last_id = current.last_assistant_at, current.last_assistant_id
    last_model, previous_model = current.last_model, current.previous_model
    for m in fresh:
        if m.role != "assistant":
            continue
        last_assistant, last_id = max(last_assistant or m.created_at, m.created_at), m.id
        model = m.metadata.get("model")
        if isinstance(model, str) and model:
            previous_model, last_model = last_model, model
    conn.execute(
        "UPDATE threads SET updated_at = ?, message_count = message_count + ?, last_assistant_at = ?,"
        " last_assistant_id = ?, last_model = ?, previous_model = ? WHERE id = ?",
        (now_iso(), len(fresh), last_assistant, last_id, last_model, previous_model, current.id),
    )


def _unobserved_since(conn: sqlite3.Connection, thread_id: str, after_seq: int, through_seq: int) -> tuple[int, int]:
    """Tokens and count of observable messages in (after, through]: a cursor row catching up."""
    tokens, count = conn.execute(
        "SELECT COALESCE(SUM(tokens), 0), COUNT(*) FROM messages"
        " WHERE thread_id = ? AND seq > ? AND seq <= ? AND observable",
        (thread_id, after_seq, through_seq),
    ).fetchone()
    return tokens, count


# -- reads ------------------------------------------------------------------------------


def page(
    conn: sqlite3.Connection,
    thread_id: str,
    *,
    after_seq: int | None = None,
    before_seq: int | None = None,
    limit: int = 20,
    offset: int = 0,
    newest_first: bool = False,
    part_filter: tuple[str | None, str | None] = (None, None),
) -> list[Message]:
    """A page of a thread's messages by seq; `part_filter` = (part type, tool name)."""
    where = ["m.thread_id = ?"]
    params: list[object] = [thread_id]
    if after_seq is not None:
        where.append("m.seq > ?")
        params.append(after_seq)
    if before_seq is not None:
        where.append("m.seq < ?")
        params.append(before_seq)
    part_type, tool_name = part_filter
    if part_type or tool_name:
        # A NULL parts column is one text part.
        conditions, args = [], []
        if part_type:
            conditions.append("json_extract(p.value, '$.type') = ?")
            args.append(part_type)
        if tool_name:
            conditions.append("json_extract(p.value, '$.tool_name') = ?")
            args.append(tool_name)
        text_only = "(m.parts IS NULL AND ? = 'text' AND ? IS NULL)"
        where.append(f"({text_only} OR EXISTS (SELECT 1 FROM json_each(m.parts) p WHERE {' AND '.join(conditions)}))")
        params += [part_type, tool_name, *args]
    order = "DESC" if newest_first else "ASC"
    rows = conn.execute(
        f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE {' AND '.join(where)} ORDER BY m.seq {order} LIMIT ? OFFSET ?",
        (*params, limit, offset),
    ).fetchall()
    return [message(r) for r in rows]


def count_before(conn: sqlite3.Connection, thread_id: str, seq: int) -> int:
    return conn.execute("SELECT COUNT(*) FROM messages WHERE thread_id = ? AND seq < ?", (thread_id, seq)).fetchone()[0]


def find(conn: sqlite3.Connection, resource_id: str, message_id: str, thread_id: str | None = None) -> Message | None:
    """A message by id within a resource (or one thread of it); the newest wins on a clash."""
    if thread_id is not None:
        sql = f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.thread_id = ? AND m.id = ? AND m.resource_id = ?"
        row = conn.execute(sql, (thread_id, message_id, resource_id)).fetchone()
    else:
        # Through the (thread_id, id) index, one probe per thread of the resource.
        row = conn.execute(
            f"SELECT {MESSAGE_COLUMNS} FROM threads t JOIN messages m ON m.thread_id = t.id AND m.id = ?"
            " WHERE t.resource_id = ? ORDER BY m.seq DESC LIMIT 1",
            (message_id, resource_id),
        ).fetchone()
    return message(row) if row else None


def by_seq(conn: sqlite3.Connection, seqs: list[int]) -> dict[int, Message]:
    out: dict[int, Message] = {}
    for start in range(0, len(seqs), 500):
        batch = seqs[start : start + 500]
        rows = conn.execute(
            f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.seq IN ({','.join('?' * len(batch))})", batch
        )
        out.update((r[0], message(r)) for r in rows)
    return out


def last_created_at(conn: sqlite3.Connection, thread_id: str) -> str | None:
    row = conn.execute(
        "SELECT created_at FROM messages WHERE thread_id = ? ORDER BY seq DESC LIMIT 1", (thread_id,)
    ).fetchone()
    return row[0] if row else None


# -- token recounts -----------------------------------------------------------------------


def tokenizer_id(conn: sqlite3.Connection, name: str) -> int:
    """A small number standing for a tokenizer name (stored with every count)."""
    conn.execute("INSERT OR IGNORE INTO om_tokenizers (name) VALUES (?)", (name,))
    return conn.execute("SELECT id FROM om_tokenizers WHERE name = ?", (name,)).fetchone()[0]


def stale_counts(
    conn: sqlite3.Connection, counted_by: int, limit: int = 500, after_seq: int = 0
) -> list[dict[str, Any]]:
    """Messages counted by another tokenizer: role, parts and their per-part counts.
    `after_seq` skips the messages already looked at (a range scan on seq, not the whole table)."""
    rows = conn.execute(
        "SELECT seq, role, body, parts, part_tokens FROM messages WHERE seq > ? AND counted_by != ? ORDER BY seq"
        " LIMIT ?",
        (after_seq, counted_by, limit),
    ).fetchall()
    return [
        {
            "seq": seq,
            "role": role,
            "parts": json.loads(parts) if parts is not None else [{"type": "text", "text": body}],
            "part_tokens": json.loads(counts) if counts else None,
        }
        for seq, role, body, parts, counts in rows
    ]


def last_seq(conn: sqlite3.Connection) -> int:
    """The newest message's seq (0 for none): one index probe."""
    return conn.execute("SELECT COALESCE(MAX(seq), 0) FROM messages").fetchone()[0]


def set_counts(conn: sqlite3.Connection, counted_by: int, counts: list[tuple[int, int, list[int]]]) -> None:
    """(seq, tokens, per-part counts) for recounted messages; running totals follow the difference."""
    for seq, tokens, parts in counts:
        old = conn.execute("SELECT tokens, thread_id, observable FROM messages WHERE seq = ?", (seq,)).fetchone()
        if old is None:
            continue
        conn.execute(
            "UPDATE messages SET tokens = ?, part_tokens = ?, counted_by = ? WHERE seq = ?",
            (tokens, dumps(parts) if len(parts) > 1 else None, counted_by, seq),
        )
        if old[2] and tokens != old[0]:
            conn.execute(
                "UPDATE om_cursors SET pending_tokens = MAX(0, pending_tokens + ?)"
                " WHERE thread_id = ? AND seq < ? AND counted_seq >= ?",
                (tokens - old[0], old[1], seq, seq),
            )
