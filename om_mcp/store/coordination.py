"""What processes sharing one database agree on: leases, events, model health, and
how far host transcripts have been read.

Lease times are the database's clock (`Tx.epoch`), never a replica's: replicas'
clocks differ. On PostgreSQL event ids come from one counter row, taken as the
last statement before COMMIT, so ids are handed out in commit order and a reader
of `id > after` misses none; SQLite's single writer gets that from its own
numbering.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from om_mcp.store.decode import EVENT_COLUMNS, dumps, event, now_iso
from om_mcp.store.rows import Event, IngestState, ModelHealth
from om_mcp.store.tx import Tx

# -- leases -----------------------------------------------------------------------------


async def acquire_lease(
    tx: Tx, key: str, op: str, owner: str, ttl: float, cycle_id: str | None = None, *, excluding: tuple[str, ...] = ()
) -> bool:
    """Take or renew the (key, op) lease; False while another owner holds a live one, or while
    anyone holds a live lease on the same key for one of the `excluding` ops (a buffering run and
    a turn's observation never read one record at once). Takers that exclude each other queue on
    the key's lock first, so two of them never both look and both take."""
    if excluding:
        await tx.lock_key(key)
    now = await tx.epoch()  # after the wait for the key's lock
    if excluding:
        held = await tx.fetchval(
            "SELECT 1 FROM om_leases WHERE key = $1 AND op = ANY ($2::text[]) AND expires_at > $3",
            key,
            list(excluding),
            now,
        )
        if held:
            return False
    return (
        await tx.execute(
            "INSERT INTO om_leases AS l (key, op, owner, cycle_id, expires_at) VALUES ($1, $2, $3, $4, $5)"
            " ON CONFLICT (key, op) DO UPDATE SET owner = excluded.owner, cycle_id = excluded.cycle_id,"
            " expires_at = excluded.expires_at WHERE l.owner = excluded.owner OR l.expires_at <= $6",
            key,
            op,
            owner,
            cycle_id,
            now + float(ttl),
            now,
        )
        == 1
    )


async def release_lease(tx: Tx, key: str, op: str, owner: str) -> None:
    await tx.execute("DELETE FROM om_leases WHERE key = $1 AND op = $2 AND owner = $3", key, op, owner)


async def holds(tx: Tx, key: str, op: str, owner: str) -> bool:
    """Inside a commit: FOR SHARE, so a takeover waits until the commit is over."""
    return await tx.fetchval("SELECT owner FROM om_leases WHERE key = $1 AND op = $2 FOR SHARE", key, op) == owner


async def lease_holder(tx: Tx, key: str, op: str) -> str | None:
    """The owner of a live lease, if any."""
    return await tx.fetchval(
        "SELECT owner FROM om_leases WHERE key = $1 AND op = $2 AND expires_at > $3", key, op, await tx.epoch()
    )


async def expire_leases(tx: Tx) -> int:
    """Drop leases whose holders stopped renewing them (crashed processes)."""
    return await tx.execute("DELETE FROM om_leases WHERE expires_at < $1", await tx.epoch())


# -- events -----------------------------------------------------------------------------


async def add_events(tx: Tx, events: Iterable[dict[str, Any]]) -> None:
    """Store events; call it last in the transaction (see the module docstring). An event
    carrying a `windows` object gets its record's two windows filled in as they stand in this
    transaction (after the cycle's commit): the samples the status page plots, exact without
    an event per append."""
    events = list(events)
    if not events:
        return
    for e in events:
        if isinstance(e.get("windows"), dict) and e.get("record_id"):
            e["windows"].update(await _windows(tx, e["record_id"]))
    rows = [
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
    ]
    columns = "type, cycle_id, record_key, resource_id, thread_id, anchor_message_id, payload, created_at"
    first = await tx.next_event_ids(len(rows))
    if first is None:
        await tx.executemany(f"INSERT INTO om_events ({columns}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)", rows)
    else:
        await tx.executemany(
            f"INSERT INTO om_events (id, {columns}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            [(first + i, *row) for i, row in enumerate(rows)],
        )


async def _windows(tx: Tx, key: str) -> dict[str, int]:
    row = await tx.fetchrow(
        "SELECT r.observation_tokens, COALESCE(SUM(c.pending_tokens), 0), COALESCE(MAX(c.counted_seq), 0)"
        " FROM om_records r LEFT JOIN om_cursors c ON c.record_key = r.key WHERE r.key = $1 GROUP BY r.key",
        key,
    )
    observation, unobserved, seq = row or (0, 0, 0)
    # seq: the newest message these numbers include, so a plot places later appends after them.
    return {"unobserved_tokens": int(unobserved), "observation_tokens": observation, "seq": int(seq)}


async def events(
    tx: Tx,
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
    rows = await tx.fetch(
        f"SELECT {EVENT_COLUMNS} FROM om_events WHERE {' AND '.join(where)} ORDER BY id DESC LIMIT ${len(params)}",
        *params,
    )
    return [event(r) for r in reversed(rows)]


# -- model health ------------------------------------------------------------------------


async def model_health(tx: Tx, model: str) -> ModelHealth | None:
    row = await tx.fetchrow(
        "SELECT model, state, failures, next_attempt_at, last_error, last_failure_at, config_hash"
        " FROM model_health WHERE model = $1",
        model,
    )
    return ModelHealth(*row) if row else None


async def put_model_health(tx: Tx, health: ModelHealth) -> None:
    await tx.execute(
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


async def ingest_state(tx: Tx, source: str) -> IngestState:
    row = await tx.fetchrow(
        'SELECT source, "offset", last_id, fingerprint, updated_at FROM ingest_state WHERE source = $1', source
    )
    return IngestState(*row) if row else IngestState(source)


async def put_ingest_state(tx: Tx, state: IngestState) -> None:
    await tx.execute(
        'INSERT INTO ingest_state (source, "offset", last_id, fingerprint, updated_at) VALUES ($1, $2, $3, $4, $5)'
        ' ON CONFLICT (source) DO UPDATE SET "offset" = excluded."offset", last_id = excluded.last_id,'
        " fingerprint = excluded.fingerprint, updated_at = excluded.updated_at",
        state.source,
        state.offset,
        state.last_id,
        state.fingerprint,
        now_iso(),
    )
