"""PostgreSQL's side of `store.tx.Tx`: the shared rules on an asyncpg connection,
inside the transaction `PgDatabase` opened, and the statements that differ here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any, TypeVar

import anyio
import anyio.from_thread
import anyio.to_thread

from om_mcp.store.decode import dumps, stored_parts
from om_mcp.store.gate import Gate
from om_mcp.store.postgres import search
from om_mcp.store.rows import NewMessage
from om_mcp.store.tx import Row, Tx

T = TypeVar("T")

NOW = "extract(epoch FROM clock_timestamp())"
_UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"

# The records that may need a cycle, less those some process holds a live lease on (their cycle
# is running) and those locked by a commit right now (SKIP LOCKED): replicas polling together do
# not all line up behind the same work.
DUE = (
    "SELECT r.key, r.resource_id, COALESCE(r.thread_id, (SELECT c2.thread_id FROM om_cursors c2"
    "  WHERE c2.record_key = r.key ORDER BY c2.pending_tokens DESC LIMIT 1)), p.pending"
    " FROM om_records r CROSS JOIN LATERAL (SELECT COALESCE(SUM(c.pending_tokens), 0) AS pending"
    "  FROM om_cursors c WHERE c.record_key = r.key) p"
    " WHERE (p.pending >= $1 OR r.observation_tokens >= $2) AND NOT EXISTS (SELECT 1 FROM om_leases l"
    f"  WHERE l.key = r.key AND l.expires_at > {NOW})"
    " FOR UPDATE OF r SKIP LOCKED"
)

# Seqs come from a sequence at INSERT; the thread row, locked by the append, keeps them in commit order.
INSERT_MESSAGES = (
    "INSERT INTO messages (id, thread_id, resource_id, role, body, parts, created_at, metadata, tokens,"
    " part_tokens, counted_by, observable)"
    " SELECT u.id, $1, $2, u.role, u.body, u.parts, u.created_at, u.metadata, u.tokens, u.part_tokens, $3,"
    " u.observable FROM unnest($4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[],"
    " $10::int[], $11::text[], $12::bool[]) WITH ORDINALITY"
    " AS u(id, role, body, parts, created_at, metadata, tokens, part_tokens, observable, n)"
    " ORDER BY u.n RETURNING id, seq"
)


class PgTx(Tx):
    backend = "postgres"

    def __init__(self, conn: Any, pgvector: bool = False, gate: Gate | None = None):
        self.conn = conn
        self.gate = gate
        self.pgvector = pgvector  # the embeddings column is pgvector's `vector`

    async def _fetch(self, sql: str, *args: Any) -> list[Row]:
        return [tuple(r) for r in await self.conn.fetch(sql, *args)]

    async def _fetchrow(self, sql: str, *args: Any) -> Row | None:
        row = await self.conn.fetchrow(sql, *args)
        return tuple(row) if row is not None else None

    async def _fetchval(self, sql: str, *args: Any) -> Any:
        return await self.conn.fetchval(sql, *args)

    async def _execute(self, sql: str, *args: Any) -> int:
        status = await self.conn.execute(sql, *args)  # "UPDATE 3", "INSERT 0 1"
        last = status.rsplit(" ", 1)[-1]
        return int(last) if last.isdigit() else 0

    async def _executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            await self.conn.executemany(sql, rows)

    async def _scan(self, sql: str, *args: Any, until: Callable[[Row], bool]) -> None:
        async for row in self.conn.cursor(sql, *args, prefetch=100):  # a server-side cursor, 100 rows a trip
            if until(tuple(row)):
                return

    async def epoch(self) -> float:
        return await self.conn.fetchval(f"SELECT {NOW}::float8")

    async def lock_key(self, key: str) -> None:
        await self.conn.execute("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", key)

    async def _insert_messages(
        self, thread_id: str, resource_id: str, counted_by: int, fresh: list[NewMessage]
    ) -> list[int]:
        # PostgreSQL text cannot hold NUL: such a message keeps its exact parts as JSON (which escapes
        # it) and a searchable body without it.
        bodies = [m.body.replace("\x00", " ") for m in fresh]
        parts = [stored_parts(m.parts, m.body) if "\x00" not in m.body else dumps(m.parts) for m in fresh]
        inserted = await self.conn.fetch(
            INSERT_MESSAGES,
            thread_id,
            resource_id,
            counted_by,
            [m.id for m in fresh],
            [m.role for m in fresh],
            bodies,
            parts,
            [m.created_at for m in fresh],
            [dumps(m.metadata) if m.metadata else None for m in fresh],
            [m.tokens for m in fresh],
            [dumps(m.part_tokens) if m.part_tokens and len(m.part_tokens) > 1 else None for m in fresh],
            [m.observable for m in fresh],
        )
        by_id = {r["id"]: r["seq"] for r in inserted}
        seqs = [by_id[m.id] for m in fresh]
        await search.index_messages(self.conn, thread_id, resource_id, list(zip(seqs, bodies)))
        return seqs

    async def _index_groups(self, key: str, groups: list[tuple[str, str]]) -> None:
        # Their words are a generated tsvector column; ranking needs each group's length.
        await self.executemany(
            "UPDATE om_groups SET doclen = $2 WHERE id = $1", [(gid, search.doclen(text)) for gid, text in groups]
        )

    async def forget_index(self, thread_ids: list[str], group_ids: list[str]) -> None:
        await search.forget_threads(self.conn, thread_ids)  # a group's words go with its row

    async def unindex_messages(self, thread_id: str, seqs: list[int]) -> list[int]:
        return await search.forget_messages(self.conn, thread_id, seqs)

    async def reindex_messages(self, thread_id: str, seqs: list[int]) -> None:
        await search.index_again(self.conn, thread_id, seqs)

    async def purge(self, resource_id: str | None = None) -> None:
        if resource_id is not None:
            await self.conn.execute("DELETE FROM search_stats WHERE resource_id = $1", resource_id)
            await self.conn.execute("DELETE FROM search_terms WHERE resource_id = $1", resource_id)

    async def next_event_ids(self, count: int) -> int | None:
        last = await self.conn.fetchval(
            "UPDATE om_counters SET value = value + $1 WHERE name = 'events' RETURNING value", count
        )
        return last - count + 1

    async def due_rows(self, min_pending: int, min_observation_tokens: int) -> list[Row]:
        return await self.fetch(DUE, min_pending, min_observation_tokens)

    def json_field(self, column: str, name: str) -> str:
        # `json`, not `jsonb`: it accepts any JSON text (jsonb refuses \u0000); "C": ISO times compare as bytes.
        return f"(({column})::json ->> '{name}') COLLATE \"C\""

    async def rank_vectors(
        self, where: str, args: list[Any], query: list[float], limit: int | None
    ) -> list[Row] | None:
        if not self.pgvector:
            return None
        args = [*args, [float(v) for v in query]]
        sql = (
            f"WITH q AS MATERIALIZED (SELECT ${len(args)}::real[]::vector AS v)"
            f" SELECT e.kind, e.ref, 1 - (e.vector <=> q.v) FROM embeddings e, q WHERE {where}"
            " ORDER BY e.vector <=> q.v, e.kind, e.ref"
        )
        if limit is not None:
            args.append(limit)
            sql += f" LIMIT ${len(args)}"
        return await self.fetch(sql, *args)

    def vector(self, values: list[float]) -> Any:
        return [float(v) for v in values]

    folds_exactly = False

    def contains(self, column: str, text: str) -> str:
        # ASCII lowered by translate(), the same in every locale (lower() follows the database's).
        return f"strpos(translate({column}, '{_UPPER}', '{_UPPER.lower()}'), {text}) > 0"

    def json_elements(self, column: str) -> str:
        return f"json_array_elements(({column})::json)"

    async def stream(self, consume: Callable[[Iterator[T]], Any], items: AsyncIterator[T]) -> Any:
        """The consumer runs on a worker thread and pulls each item from this transaction on the loop."""

        async def next_item() -> T:
            return await items.__anext__()

        def pull() -> Iterator[T]:
            while True:
                try:
                    yield anyio.from_thread.run(next_item)
                except StopAsyncIteration:
                    return

        return await anyio.to_thread.run_sync(consume, pull())
