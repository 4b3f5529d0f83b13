"""`Operations`: the store's operations, each mapped once to its rule in this package.

Each name below is an operation of every store (`interface.Store` inherits this
class, so its signature is the rule's own, never restated). How one operation
runs is what a subclass supplies: `_read` (one consistent snapshot) and `_write`
(one transaction that takes the locks it needs), each given an
`async def op(tx, ...)` of the rules' modules:

* a backend's store class (`SQLiteStore`, `PostgresStore`): a transaction each;
* `Transaction`: every operation inside one transaction already open, for work
  composed of several (`Store.transaction`, `store.local.read`/`write`).

What only one backend has (search SQL, vectors, the file's own care, listening
for other processes) stays in that backend's class.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from om_mcp.lazy import later
from om_mcp.store import (
    coordination,
    history,
    messages,
    observations,
    privacy,
    remembered,
    sessions,
    threads,
    tombstones,
)
from om_mcp.store.tx import Tx

if TYPE_CHECKING:
    from om_mcp.store import commits, forget, oauth, overview, retired, spend, transfer, vectors
else:
    # Rules modules imported when one of their rules is first called: the host hook (one process per
    # prompt) reaches the store through these operations too, and pays only for what it runs.
    commits, forget, oauth, overview, retired, spend, transfer, vectors = (
        later(f"om_mcp.store.{name}")
        for name in ("commits", "forget", "oauth", "overview", "retired", "spend", "transfer", "vectors")
    )

P = ParamSpec("P")
R = TypeVar("R")
Op = Callable[Concatenate[Tx, P], Coroutine[Any, Any, R]]


def reads(op: Op[P, R]) -> Callable[Concatenate[Any, P], Coroutine[Any, Any, R]]:
    async def method(self: Operations, *args: P.args, **kwargs: P.kwargs) -> R:
        return await self._read(op, *args, **kwargs)

    method.__name__, method.__doc__ = op.__name__, op.__doc__
    return method


def writes(op: Op[P, R]) -> Callable[Concatenate[Any, P], Coroutine[Any, Any, R]]:
    async def method(self: Operations, *args: P.args, **kwargs: P.kwargs) -> R:
        return await self._write(op, *args, **kwargs)

    method.__name__, method.__doc__ = op.__name__, op.__doc__
    return method


class Operations:
    """Every operation of the store (see the module docstring)."""

    async def _read(self, op: Op[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        raise NotImplementedError

    async def _write(self, op: Op[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        raise NotImplementedError

    # threads and resources
    get_thread = reads(threads.get)
    list_threads = reads(threads.list_threads)
    list_resources = reads(threads.resources)
    update_thread = writes(threads.update)
    set_generated_title = writes(threads.set_generated_title)
    set_thread_metadata_paths = writes(threads.set_metadata_paths)
    get_working_memory = reads(threads.get_working_memory)
    update_working_memory = writes(threads.update_working_memory)
    delete_thread = writes(threads.delete_thread)
    delete_resource = writes(threads.delete_resource)

    # messages
    append_messages = writes(messages.append)
    message_page = reads(messages.page)
    count_messages_before = reads(messages.count_before)
    find_message = reads(messages.find)
    messages_by_seq = reads(messages.by_seq)
    last_message_time = reads(messages.last_created_at)
    tokenizer_id = writes(messages.tokenizer_id)
    stale_token_counts = reads(messages.stale_counts)
    set_token_counts = writes(messages.set_counts)
    last_seq = reads(messages.last_seq)

    # observation records and their windows
    record = reads(observations.get_record)
    record_state = reads(observations.record_state)
    snapshot = reads(observations.snapshot)
    context = reads(observations.context)
    groups = reads(observations.groups)
    groups_by_id = reads(observations.groups_by_id)
    generations = reads(observations.generations)
    chunks = reads(observations.chunks)
    unobserved = reads(observations.unobserved)
    busy_threads = reads(observations.busy_threads)
    thread_hints = reads(observations.thread_hints)
    due_work = reads(observations.due)
    tail = reads(commits.tail)

    # cycles' conditional commits
    commit_observation = writes(commits.commit_observation)
    append_chunks = writes(commits.append_chunks)
    mark_buffered = writes(commits.mark_buffered)
    activate_chunks = writes(commits.activate_chunks)
    commit_reflection = writes(commits.commit_reflection)
    store_buffered_reflection = writes(commits.store_buffered_reflection)
    discard_buffered_reflection = writes(commits.discard_buffered_reflection)

    # coordination between processes
    acquire_lease = writes(coordination.acquire_lease)
    release_lease = writes(coordination.release_lease)
    lease_holder = reads(coordination.lease_holder)
    expire_leases = writes(coordination.expire_leases)
    add_events = writes(coordination.add_events)
    events = reads(coordination.events)
    model_health = reads(coordination.model_health)
    put_model_health = writes(coordination.put_model_health)
    ingest_state = reads(coordination.ingest_state)
    put_ingest_state = writes(coordination.put_ingest_state)
    settled_threads = reads(sessions.settled_threads)
    recent_sessions = reads(sessions.recent_sessions)
    lending_record = reads(sessions.lending_record)
    session_hints = reads(sessions.session_hints)

    # looking at a memory (the status page; `om-mcp status`, `threads`, `show`)
    thread_states = reads(overview.thread_states)
    series_inputs = reads(overview.series_inputs)
    pending_records = reads(overview.pending_records)

    # privacy: redaction counts, added by append_messages
    redaction_counts = reads(privacy.redaction_counts)

    # forgetting and correcting one thing; what was forgotten (tombstones) and an erase not finished yet
    group_records = reads(forget.group_records)
    record_groups = reads(forget.record_groups)
    find_text = reads(forget.find_text)
    apply_rewrite = writes(forget.apply_rewrite)
    forgotten_summary = reads(tombstones.summary)
    erase_pending = reads(forget.erase_pending)
    mark_erase_pending = writes(forget.mark_erase_pending)
    clear_erase_pending = writes(forget.clear_erase_pending)

    # remembered lines, the retired pile, the memory as it was
    remember = writes(remembered.remember)
    remember_with_messages = writes(remembered.with_messages)
    retired_groups = reads(retired.retired)
    restore_lines = writes(retired.restore_lines)
    log_at = reads(history.log_at)
    working_memory_at = reads(history.working_memory_at)
    messages_at = reads(history.messages_at)

    # model spend, for the spend caps: a call's estimate reserved before it, settled after
    add_spend = writes(spend.add_spend)
    spend_since = reads(spend.spend_since)
    reserve_spend = writes(spend.reserve)
    settle_spend = writes(spend.settle)
    open_reservations = reads(spend.open_reservations)

    # OAuth: registered clients, the owner's grants, the flow's secrets stored as digests
    oauth_put_client = writes(oauth.put_client)
    oauth_client = reads(oauth.client)
    oauth_new_grant = writes(oauth.new_grant)
    oauth_put_secret = writes(oauth.put_secret)
    oauth_secret = reads(oauth.secret)
    oauth_redeem = writes(oauth.redeem)
    oauth_consent_failed = writes(oauth.consent_failed)
    oauth_revoke_grant = writes(oauth.revoke_grant)
    oauth_grants = reads(oauth.grants)

    # vectors for semantic recall
    pending_vectors = reads(vectors.pending)
    put_vectors = writes(vectors.put)
    nearest_vectors = reads(vectors.nearest)

    # moving a memory
    export = reads(transfer.export)
    import_records = writes(transfer.import_records)
    set_thread_times = writes(transfer.set_thread_times)


class Transaction(Operations):
    """The operations inside one open transaction: each runs its rule on it, so what a caller
    composes of several is all or nothing. Given to the work of `Store.transaction` (awaited,
    either backend) and of `store.local.read`/`write` (SQLite's file, run synchronously: every
    operation completes at once there, so the work must await nothing but these operations)."""

    def __init__(self, tx: Tx):
        self.tx = tx

    async def _read(self, op: Op[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        return await op(self.tx, *args, **kwargs)

    async def _write(self, op: Op[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        return await op(self.tx, *args, **kwargs)

    @asynccontextmanager
    async def savepoint(self, name: str = "om_step") -> AsyncIterator[None]:
        """What the block writes is undone if it raises; the transaction's other writes stay."""
        await self.tx.execute(f"SAVEPOINT {name}")
        try:
            yield
        except BaseException:
            await self.tx.execute(f"ROLLBACK TO SAVEPOINT {name}")
            await self.tx.execute(f"RELEASE SAVEPOINT {name}")
            raise
        await self.tx.execute(f"RELEASE SAVEPOINT {name}")


Work = Callable[Concatenate[Transaction, P], Coroutine[Any, Any, R]]


def within(work: Work[P, R], *args: Any, **kwargs: Any) -> Callable[[Tx], Coroutine[Any, Any, R]]:
    """`work(transaction, *args)` as one operation of a driver's transaction."""

    async def op(tx: Tx) -> R:
        return await work(Transaction(tx), *args, **kwargs)

    op.__name__ = getattr(work, "__name__", "work")  # named in the retry log
    return op
