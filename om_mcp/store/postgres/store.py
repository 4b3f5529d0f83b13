"""`PostgresStore`: the store operations on PostgreSQL, one transaction each.

The operations are the plain async functions of this package's modules; this
class only decides, for each, whether it reads (one REPEATABLE READ snapshot)
or writes (READ COMMITTED with row locks), as `SQLiteStore` does for SQLite.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, Concatenate, Literal, ParamSpec, TypeVar

from om_mcp.store.postgres import (
    admin,
    commits,
    coordination,
    forget,
    messages,
    observations,
    overview,
    privacy,
    search,
    sessions,
    spend,
    threads,
    vectors,
)
from om_mcp.store.postgres.database import SETTINGS, PgDatabase, redact
from om_mcp.store.postgres.listen import CHANNEL, Listener, payload
from om_mcp.store.postgres.migrate import migrate

if TYPE_CHECKING:
    from om_mcp.store.interface import Overview

log = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")


def _reads(op: Callable[Concatenate[Any, P], Awaitable[R]]) -> Callable[Concatenate[Any, P], Coroutine[Any, Any, R]]:
    async def method(self: PostgresStore, *args: P.args, **kwargs: P.kwargs) -> R:
        return await self.db.read(op, *args, **kwargs)

    method.__name__, method.__doc__ = op.__name__, op.__doc__
    return method


def _writes(op: Callable[Concatenate[Any, P], Awaitable[R]]) -> Callable[Concatenate[Any, P], Coroutine[Any, Any, R]]:
    async def method(self: PostgresStore, *args: P.args, **kwargs: P.kwargs) -> R:
        return await self.db.write(op, *args, **kwargs)

    method.__name__, method.__doc__ = op.__name__, op.__doc__
    return method


class PostgresStore:
    """The memory's PostgreSQL database (tables in its `om` schema)."""

    backend: Literal["postgres"] = "postgres"

    def __init__(self, db: PgDatabase, vector_status: str | None):
        self.db = db
        self.location = redact(db.url)
        self.pgvector = vector_status  # "pgvector 0.8.6", or None: compared in Python
        self.origin = uuid.uuid4().hex  # this process, in notifications
        self._listeners: list[Listener] = []

    @classmethod
    async def open(cls, url: str) -> PostgresStore:
        db = await PgDatabase.open(url)
        try:
            async with db.pool.acquire() as conn:
                await migrate(conn, redact(url))
                status = await vectors.status(conn)
        except BaseException:
            await db.close()
            raise
        log.info("database: PostgreSQL %s; vectors: %s", redact(url), status or vectors.WITHOUT)
        return cls(db, status)

    async def close(self) -> None:
        for listener in self._listeners:
            await listener.stop()
        self._listeners.clear()
        await self.db.close()

    # threads and resources
    get_thread = _reads(threads.get)
    list_threads = _reads(threads.list_threads)
    list_resources = _reads(threads.resources)
    update_thread = _writes(threads.update)
    set_generated_title = _writes(threads.set_generated_title)
    set_thread_metadata_paths = _writes(threads.set_metadata_paths)
    get_working_memory = _reads(threads.get_working_memory)
    update_working_memory = _writes(threads.update_working_memory)
    delete_thread = _writes(threads.delete_thread)
    delete_resource = _writes(threads.delete_resource)

    # messages
    append_messages = _writes(messages.append)
    message_page = _reads(messages.page)
    count_messages_before = _reads(messages.count_before)
    find_message = _reads(messages.find)
    messages_by_seq = _reads(messages.by_seq)
    last_message_time = _reads(messages.last_created_at)
    tokenizer_id = _writes(messages.tokenizer_id)
    stale_token_counts = _reads(messages.stale_counts)
    set_token_counts = _writes(messages.set_counts)
    last_seq = _reads(messages.last_seq)

    # observation records and their windows
    record = _reads(observations.get_record)
    record_state = _reads(observations.record_state)
    snapshot = _reads(observations.snapshot)
    context = _reads(observations.context)
    groups = _reads(observations.groups)
    generations = _reads(observations.generations)
    chunks = _reads(observations.chunks)
    unobserved = _reads(observations.unobserved)
    busy_threads = _reads(observations.busy_threads)
    thread_hints = _reads(observations.thread_hints)
    due_work = _writes(observations.due)  # skips rows locked by commits: FOR UPDATE SKIP LOCKED
    tail = _reads(commits.tail)

    # cycles' conditional commits
    commit_observation = _writes(commits.commit_observation)
    append_chunks = _writes(commits.append_chunks)
    activate_chunks = _writes(commits.activate_chunks)
    commit_reflection = _writes(commits.commit_reflection)
    store_buffered_reflection = _writes(commits.store_buffered_reflection)
    discard_buffered_reflection = _writes(commits.discard_buffered_reflection)

    # coordination between processes
    acquire_lease = _writes(coordination.acquire_lease)
    release_lease = _writes(coordination.release_lease)
    lease_holder = _reads(coordination.lease_holder)
    expire_leases = _writes(coordination.expire_leases)
    add_events = _writes(coordination.add_events)
    events = _reads(coordination.events)
    model_health = _reads(coordination.model_health)
    put_model_health = _writes(coordination.put_model_health)
    ingest_state = _reads(coordination.ingest_state)
    put_ingest_state = _writes(coordination.put_ingest_state)
    settled_threads = _reads(sessions.settled_threads)

    # search and vectors
    search_messages = _reads(search.find)
    search_groups = _reads(search.search_groups)
    pending_vectors = _reads(vectors.pending)
    put_vectors = _writes(vectors.put)
    groups_by_id = _reads(vectors.groups_by_id)

    # forgetting and correcting one thing
    group_records = _reads(forget.group_records)
    find_text = _reads(forget.find_text)
    apply_rewrite = _writes(forget.apply_rewrite)

    # model spend, for the spend caps
    add_spend = _writes(spend.add_spend)
    spend_since = _reads(spend.spend_since)

    # privacy: redaction counts
    redaction_counts = _reads(privacy.redaction_counts)

    # looking at the memory (the status page; `om-mcp status`, `threads`, `show`)
    thread_states = _reads(overview.thread_states)
    series_inputs = _reads(overview.series_inputs)
    pending_records = _reads(overview.pending_records)

    async def nearest_vectors(
        self,
        resource_id: str,
        embedder: str,
        query: list[float],
        *,
        thread_id: str | None = None,
        limit: int | None = None,
    ) -> list[tuple[str, str, float]]:
        return await self.db.read(
            vectors.nearest,
            resource_id,
            embedder,
            query,
            thread_id=thread_id,
            limit=limit,
            in_database=self.pgvector is not None,
        )

    # the database
    @property
    def vector_status(self) -> str:
        return f"{self.pgvector} (in the database)" if self.pgvector else vectors.WITHOUT

    async def stats(self):
        return await self.db.read(admin.stats, self.location, self.vector_status)

    integrity = _reads(admin.integrity)

    async def backup(self, target: str) -> int:
        """A consistent copy into a new SQLite file (`om-mcp migrate` the other way round); its size."""
        import os

        from om_mcp.store.copy import copy

        await copy(self.db.url, target)
        return os.path.getsize(target)

    # changes seen by other processes
    async def broadcast(self, message: dict[str, Any]) -> None:
        """Tell the other processes on this database (LISTEN/NOTIFY; delivered at once, not stored)."""
        text = payload(self.origin, message)

        async def send(conn: Any) -> None:
            await conn.execute("SELECT pg_notify($1, $2)", CHANNEL, text)

        await self.db.raw(send)

    async def listen(self, callback: Callable[[dict[str, Any]], Awaitable[None]]) -> Callable[[], Awaitable[None]]:
        """Call `callback` with what other processes broadcast; returns the coroutine that stops listening."""
        listener = Listener(self.db.url, SETTINGS, self.origin, callback)
        await listener.start()
        self._listeners.append(listener)

        async def stop() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)
                await listener.stop()

        return stop


def _has_the_overview_reads(store: PostgresStore) -> Overview:
    return store  # mypy checks PostgresStore against the Overview protocol, read by read
