"""`SQLiteStore`: the store operations as awaitables, one trip to the database thread each.

The operations themselves are the plain functions of this package's modules;
this class only decides, for each, whether it reads or writes.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, Concatenate, Literal, ParamSpec, TypeVar

from om_mcp.store.rows import Rewrite, Rewritten
from om_mcp.store.sqlite import (
    admin,
    commits,
    coordination,
    forget,
    fts,
    messages,
    observations,
    overview,
    privacy,
    sessions,
    spend,
    threads,
    transfer,
    vectors,
)
from om_mcp.store.sqlite.database import Database

P = ParamSpec("P")
R = TypeVar("R")


def _reads(
    op: Callable[Concatenate[sqlite3.Connection, P], R],
) -> Callable[Concatenate[Any, P], Coroutine[Any, Any, R]]:
    async def method(self: SQLiteStore, *args: P.args, **kwargs: P.kwargs) -> R:
        return await self.db.read(op, *args, **kwargs)

    method.__name__, method.__doc__ = op.__name__, op.__doc__
    return method


def _writes(
    op: Callable[Concatenate[sqlite3.Connection, P], R],
) -> Callable[Concatenate[Any, P], Coroutine[Any, Any, R]]:
    async def method(self: SQLiteStore, *args: P.args, **kwargs: P.kwargs) -> R:
        return await self.db.write(op, *args, **kwargs)

    method.__name__, method.__doc__ = op.__name__, op.__doc__
    return method


class SQLiteStore:
    """The memory's SQLite database."""

    backend: Literal["sqlite"] = "sqlite"

    def __init__(self, db: Database):
        self.db = db
        self.location = db.path

    @classmethod
    async def open(cls, path: str | Path) -> SQLiteStore:
        return cls(await Database.open(path))

    async def close(self) -> None:
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

    async def delete_thread(self, thread_id: str) -> int:
        count = await self.db.write(threads.delete_thread, thread_id)
        await self.db.raw(admin.checkpoint)
        return count

    async def delete_resource(self, resource_id: str) -> tuple[int, int]:
        counts = await self.db.write(threads.delete_resource, resource_id)
        await self.db.raw(admin.checkpoint)
        return counts

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
    due_work = _reads(observations.due)
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
    expire_leases = _writes(commits.expire_leases)
    add_events = _writes(coordination.add_events)
    events = _reads(coordination.events)
    model_health = _reads(coordination.model_health)
    put_model_health = _writes(coordination.put_model_health)
    ingest_state = _reads(coordination.ingest_state)
    put_ingest_state = _writes(coordination.put_ingest_state)
    settled_threads = _reads(sessions.settled_threads)

    # search and vectors
    search_messages = _reads(fts.find)
    search_groups = _reads(vectors.search_groups)
    pending_vectors = _reads(vectors.pending)
    put_vectors = _writes(vectors.put)
    nearest_vectors = _reads(vectors.nearest)
    groups_by_id = _reads(vectors.groups_by_id)

    # the file
    async def stats(self):
        return await self.db.read(admin.stats, self.db.path)

    integrity = _reads(admin.integrity)

    async def backup(self, target: str) -> int:
        return await self.db.raw(admin.backup, target)

    # looking at a memory, and moving it
    thread_states = _reads(overview.thread_states)
    series_inputs = _reads(overview.series_inputs)
    pending_records = _reads(overview.pending_records)
    export = _reads(transfer.export)
    import_records = _writes(transfer.import_records)
    set_thread_times = _writes(transfer.set_thread_times)

    # forgetting and correcting one thing
    group_records = _reads(forget.group_records)
    find_text = _reads(forget.find_text)

    async def apply_rewrite(self, plan: Rewrite) -> Rewritten | None:
        done = await self.db.write(forget.apply_rewrite, plan)
        if done is not None:
            await self.db.raw(admin.checkpoint)  # the old pages leave the -wal too
        return done

    # model spend, for the spend caps
    add_spend = _writes(spend.add_spend)
    spend_since = _reads(spend.spend_since)

    # privacy: redaction counts
    redaction_counts = _reads(privacy.redaction_counts)

    # changes seen by other processes: SQLite's processes share a file, not a channel
    async def broadcast(self, message: dict) -> None:
        return None

    async def listen(self, callback):
        async def stop() -> None:
            return None

        return stop
