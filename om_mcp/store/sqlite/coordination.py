"""What processes sharing one database agree on: leases, events, model health,
and how far host transcripts have been read."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable
from typing import Any

from om_mcp.store.rows import Event, IngestState, ModelHealth
from om_mcp.store.sqlite.decode import EVENT_COLUMNS, dumps, event, now_iso

# -- leases -----------------------------------------------------------------------------


def acquire_lease(
    conn: sqlite3.Connection,
    key: str,
    op: str,
    owner: str,
    ttl: float,
    cycle_id: str | None = None,
    *,
    excluding: tuple[str, ...] = (),
) -> bool:
    """Take or renew the (key, op) lease; False while another owner holds a live one, or while
    anyone holds a live lease on the same key for one of the `excluding` ops."""
    now = time.time()
    row = conn.execute("SELECT owner, expires_at FROM om_leases WHERE key = ? AND op = ?", (key, op)).fetchone()
    if row is not None and row[0] != owner and row[1] > now:
        return False
    if (
        excluding
        and conn.execute(
            f"SELECT 1 FROM om_leases WHERE key = ? AND op IN ({','.join('?' * len(excluding))}) AND expires_at > ?",
            (key, *excluding, now),
        ).fetchone()
    ):
        return False
    conn.execute(
        "INSERT INTO om_leases (key, op, owner, cycle_id, expires_at) VALUES (?, ?, ?, ?, ?)"
        " ON CONFLICT (key, op) DO UPDATE SET owner = excluded.owner, cycle_id = excluded.cycle_id,"
        " expires_at = excluded.expires_at",
        (key, op, owner, cycle_id, now + ttl),
    )
    return True


def release_lease(conn: sqlite3.Connection, key: str, op: str, owner: str) -> None:
    conn.execute("DELETE FROM om_leases WHERE key = ? AND op = ? AND owner = ?", (key, op, owner))


def holds(conn: sqlite3.Connection, key: str, op: str, owner: str) -> bool:
    row = conn.execute("SELECT owner FROM om_leases WHERE key = ? AND op = ?", (key, op)).fetchone()
    return row is not None and row[0] == owner


def lease_holder(conn: sqlite3.Connection, key: str, op: str) -> str | None:
    """The owner of a live lease, if any."""
    row = conn.execute(
        "SELECT owner FROM om_leases WHERE key = ? AND op = ? AND expires_at > ?", (key, op, time.time())
    ).fetchone()
    return row[0] if row else None


# -- events -----------------------------------------------------------------------------


def add_events(conn: sqlite3.Connection, events: Iterable[dict[str, Any]]) -> None:
    """Store events. An event carrying a `windows` object gets its record's two windows
    filled in as they stand in this transaction (after the cycle's commit): the samples
    the status page plots, exact without an event per append."""
    events = list(events)
    for e in events:
        if isinstance(e.get("windows"), dict) and e.get("record_id"):
            e["windows"].update(_windows(conn, e["record_id"]))
    conn.executemany(
        "INSERT INTO om_events (type, cycle_id, record_key, resource_id, thread_id, anchor_message_id, payload,"
        " created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                e["type"],
                e.get("cycle_id"),
                e.get("record_id"),
                e.get("resource_id"),
                e.get("thread_id"),
                e.get("anchor_message_id"),
                dumps(e),
                e.get("created_at") or now_iso(),
            )
            for e in events
        ],
    )


def _windows(conn: sqlite3.Connection, key: str) -> dict[str, int]:
    row = conn.execute(
        "SELECT r.observation_tokens, COALESCE(SUM(c.pending_tokens), 0), COALESCE(MAX(c.counted_seq), 0)"
        " FROM om_records r LEFT JOIN om_cursors c ON c.record_key = r.key WHERE r.key = ? GROUP BY r.key",
        (key,),
    ).fetchone()
    observation, unobserved, seq = row or (0, 0, 0)
    # seq: the newest message these numbers include, so a plot places later appends after them.
    return {"unobserved_tokens": unobserved, "observation_tokens": observation, "seq": seq}


def events(
    conn: sqlite3.Connection,
    *,
    thread_id: str | None = None,
    record_key: str | None = None,
    cycle_id: str | None = None,
    after_id: int = 0,
    limit: int = 100,
) -> list[Event]:
    """Events oldest first: the newest `limit` after `after_id`."""
    where = ["id > ?"]
    params: list[object] = [after_id]
    for column, value in (("thread_id", thread_id), ("record_key", record_key), ("cycle_id", cycle_id)):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    rows = conn.execute(
        f"SELECT {EVENT_COLUMNS} FROM om_events WHERE {' AND '.join(where)} ORDER BY id DESC LIMIT ?", (*params, limit)
    ).fetchall()
    return [event(r) for r in reversed(rows)]


# -- model health ------------------------------------------------------------------------


def model_health(conn: sqlite3.Connection, model: str) -> ModelHealth | None:
    row = conn.execute(
        "SELECT model, state, failures, next_attempt_at, last_error, last_failure_at, config_hash"
        " FROM model_health WHERE model = ?",
        (model,),
    ).fetchone()
    return ModelHealth(*row) if row else None


def put_model_health(conn: sqlite3.Connection, health: ModelHealth) -> None:
    conn.execute(
        "INSERT OR REPLACE INTO model_health (model, state, failures, next_attempt_at, last_error, last_failure_at,"
        " config_hash) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            health.model,
            health.state,
            health.failures,
            health.next_attempt_at,
            health.last_error,
            health.last_failure_at,
            health.config_hash,
        ),
    )


# -- host transcripts ---------------------------------------------------------------------


def ingest_state(conn: sqlite3.Connection, source: str) -> IngestState:
    row = conn.execute(
        "SELECT source, offset, last_id, fingerprint, updated_at FROM ingest_state WHERE source = ?", (source,)
    ).fetchone()
    return IngestState(*row) if row else IngestState(source)


def put_ingest_state(conn: sqlite3.Connection, state: IngestState) -> None:
    conn.execute(
        "INSERT OR REPLACE INTO ingest_state (source, offset, last_id, fingerprint, updated_at) VALUES (?, ?, ?, ?, ?)",
        (state.source, state.offset, state.last_id, state.fingerprint, now_iso()),
    )
