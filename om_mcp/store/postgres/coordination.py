"""What processes sharing one PostgreSQL database agree on: leases, events, model
health, host ingest positions (SQLite's coordination.py, row for row).

Lease times are the database's clock, never a replica's: replicas' clocks differ.
Event ids come from one counter row, taken as the last statement before COMMIT,
so ids are handed out in commit order and a reader of `id > after` misses none
(an identity column would hand them out at INSERT, and a slower transaction
could commit a lower id after a reader moved past it).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from om_mcp.store.rows import Event, IngestState, ModelHealth
from om_mcp.store.sqlite.decode import EVENT_COLUMNS, dumps, event, now_iso

NOW = "extract(epoch FROM clock_timestamp())"

# -- leases -----------------------------------------------------------------------------


async def acquire_lease(
    conn: Any,
    key: str,
    op: str,
    owner: str,
    ttl: float,
    cycle_id: str | None = None,
    *,
    excluding: tuple[str, ...] = (),
) -> bool:
    """Take or renew the (key, op) lease; False while another owner holds a live one, or while
    anyone holds a live lease on the same key for one of the `excluding` ops (takers that exclude
    each other queue on the key's advisory lock, so two of them never both look and both take)."""
    if excluding:
        await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", key)
        held = await conn.fetchval(
            f"SELECT 1 FROM om_leases WHERE key = $1 AND op = ANY($2::text[]) AND expires_at > {NOW}",
            key,
            list(excluding),
        )
        if held:
            return False
    taken = await conn.fetchval(
        "INSERT INTO om_leases AS l (key, op, owner, cycle_id, expires_at)"
        f" VALUES ($1, $2, $3, $4, {NOW} + $5) ON CONFLICT (key, op) DO UPDATE SET owner = excluded.owner,"
        f" cycle_id = excluded.cycle_id, expires_at = excluded.expires_at"
        f" WHERE l.owner = excluded.owner OR l.expires_at <= {NOW} RETURNING owner",
        key,
        op,
        owner,
        cycle_id,
        float(ttl),
    )
    return taken is not None


async def release_lease(conn: Any, key: str, op: str, owner: str) -> None:
    await conn.execute("DELETE FROM om_leases WHERE key = $1 AND op = $2 AND owner = $3", key, op, owner)


async def holds(conn: Any, key: str, op: str, owner: str) -> bool:
    """Inside a commit: FOR SHARE, so a takeover waits until the commit is over."""
    row = await conn.fetchval("SELECT owner FROM om_leases WHERE key = $1 AND op = $2 FOR SHARE", key, op)
    return row == owner


async def lease_holder(conn: Any, key: str, op: str) -> str | None:
    """The owner of a live lease, if any."""
    return await conn.fetchval(
        f"SELECT owner FROM om_leases WHERE key = $1 AND op = $2 AND expires_at > {NOW}", key, op
    )


async def expire_leases(conn: Any) -> int:
    """Drop leases whose holders stopped renewing them (crashed processes)."""
    status = await conn.execute(f"DELETE FROM om_leases WHERE expires_at < {NOW}")
    return int(status.split()[-1])


# -- events -----------------------------------------------------------------------------


async def add_events(conn: Any, events: Iterable[dict[str, Any]]) -> None:
    """Insert events with ids from the counter; call it last in the transaction (the counter row
    stays locked until COMMIT, which is what puts ids in commit order). An event carrying a
    `windows` object gets its record's two windows as they stand in this transaction, as on
    SQLite: the samples the status page plots."""
    events = list(events)
    if not events:
        return
    for e in events:
        if isinstance(e.get("windows"), dict) and e.get("record_id"):
            e["windows"].update(await _windows(conn, e["record_id"]))
    last = await conn.fetchval(
        "UPDATE om_counters SET value = value + $1 WHERE name = 'events' RETURNING value", len(events)
    )
    first = last - len(events) + 1
    await conn.executemany(
        "INSERT INTO om_events (id, type, cycle_id, record_key, resource_id, thread_id, anchor_message_id, payload,"
        " created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        [
            (
                first + i,
                e["type"],
                e.get("cycle_id"),
                e.get("record_id"),
                e.get("resource_id"),
                e.get("thread_id"),
                e.get("anchor_message_id"),
                dumps(e),
                e.get("created_at") or now_iso(),
            )
            for i, e in enumerate(events)
        ],
    )


async def _windows(conn: Any, key: str) -> dict[str, int]:
    row = await conn.fetchrow(
        "SELECT r.observation_tokens, COALESCE(SUM(c.pending_tokens), 0), COALESCE(MAX(c.counted_seq), 0)"
        " FROM om_records r LEFT JOIN om_cursors c ON c.record_key = r.key WHERE r.key = $1 GROUP BY r.key",
        key,
    )
    observation, unobserved, seq = row or (0, 0, 0)
    # seq: the newest message these numbers include, so a plot places later appends after them.
    return {"unobserved_tokens": int(unobserved), "observation_tokens": observation, "seq": int(seq)}


async def events(
    conn: Any,
    *,
    thread_id: str | None = None,
    record_key: str | None = None,
    cycle_id: str | None = None,
    after_id: int = 0,
    limit: int = 100,
) -> list[Event]:
    """Events oldest first: the newest `limit` after `after_id`."""
    where = ["id > $1"]
    params: list[object] = [after_id]
    for column, value in (("thread_id", thread_id), ("record_key", record_key), ("cycle_id", cycle_id)):
        if value is not None:
            params.append(value)
            where.append(f"{column} = ${len(params)}")
    params.append(limit)
    rows = await conn.fetch(
        f"SELECT {EVENT_COLUMNS} FROM om_events WHERE {' AND '.join(where)} ORDER BY id DESC LIMIT ${len(params)}",
        *params,
    )
    return [event(tuple(r)) for r in reversed(rows)]


# -- model health ------------------------------------------------------------------------


async def model_health(conn: Any, model: str) -> ModelHealth | None:
    row = await conn.fetchrow(
        "SELECT model, state, failures, next_attempt_at, last_error, last_failure_at, config_hash"
        " FROM model_health WHERE model = $1",
        model,
    )
    return ModelHealth(*row) if row else None


async def put_model_health(conn: Any, health: ModelHealth) -> None:
    await conn.execute(
        "INSERT INTO model_health (model, state, failures, next_attempt_at, last_error, last_failure_at, config_hash)"
        " VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (model) DO UPDATE SET state = excluded.state,"
        " failures = excluded.failures, next_attempt_at = excluded.next_attempt_at, last_error = excluded.last_error,"
        " last_failure_at = excluded.last_failure_at, config_hash = excluded.config_hash",
        health.model,
        health.state,
        health.failures,
        float(health.next_attempt_at),
        health.last_error,
        health.last_failure_at,
        health.config_hash,
    )


# -- host transcripts ---------------------------------------------------------------------


async def ingest_state(conn: Any, source: str) -> IngestState:
    row = await conn.fetchrow(
        'SELECT source, "offset", last_id, fingerprint, updated_at FROM ingest_state WHERE source = $1', source
    )
    return IngestState(*row) if row else IngestState(source)


async def put_ingest_state(conn: Any, state: IngestState) -> None:
    await conn.execute(
        'INSERT INTO ingest_state (source, "offset", last_id, fingerprint, updated_at) VALUES ($1, $2, $3, $4, $5)'
        ' ON CONFLICT (source) DO UPDATE SET "offset" = excluded."offset", last_id = excluded.last_id,'
        " fingerprint = excluded.fingerprint, updated_at = excluded.updated_at",
        state.source,
        state.offset,
        state.last_id,
        state.fingerprint,
        now_iso(),
    )
