"""Draining work that other processes appended: what a live om-mcp process does
in the background for the host hooks (and for other servers on the database).

Every few seconds (`Memory.running`'s poll loop in a server; `om-mcp worker`'s
own loop) one `tick`:
1. holds the "worker"/"drain" lease while this process can observe, so the hooks
   know someone drains and start no worker of their own;
2. recounts messages the hooks counted with the byte estimator (the hook does not
   load tiktoken), newest range only;
3. activates buffered observations of host sessions by the engine's rules, as a
   context read would (nobody calls get_context for a hook-fed thread);
4. schedules what the numbers make due (`ObservationEngine.poll`);
5. observes the unobserved tail of host sessions that are over (ended, or quiet
   for ten minutes), like a manual observe: the next session's context then holds
   the end of this one;
and, before 3, tries once more to end an erase that waited for a reader (a forget
while an export held an older snapshot), without waiting for it.
All of it is scheduled on the memory's worker; nothing here waits for a model
except the engine's own block-after valve.
"""

from __future__ import annotations

import logging
import time
from functools import partial
from typing import Protocol

import anyio

from om_mcp.engine.observation.engine import ObservationEngine
from om_mcp.engine.observation.thresholds import due_floor
from om_mcp.engine.worker import Worker
from om_mcp.store import Store
from om_mcp.store.sessions import QUIET_SECONDS, WORKER_LEASE, quiet_before


class Drained(Protocol):
    """What the drainer works on (a `Memory`): its store, its observation engine and the worker
    that runs their cycles in the background, and the recount of other tokenizers' counts."""

    store: Store
    observation: ObservationEngine
    worker: Worker

    def record_key(self, thread_id: str, resource_id: str) -> str: ...

    async def recount_tokens(self, after_seq: int = 0) -> int: ...


log = logging.getLogger(__name__)

LEASE_SECONDS = 20.0  # renewed every poll; a crashed holder frees it this soon
# A worker that cannot observe (no model) keeps the lease this long before the
# hooks try another one, so they do not start a worker per prompt in vain.
NO_MODEL_BACKOFF_SECONDS = 600.0


class Drainer:
    def __init__(self, memory: Drained, owner: str | None = None, lease_seconds: float = LEASE_SECONDS):
        self.memory = memory
        self.owner = owner or memory.observation.owner
        self.lease_seconds = lease_seconds
        self.held = False
        self._recounted_through = 0
        self._flushed: dict[str, tuple[int, str, float]] = {}  # thread -> what it looked like at the last flush

    async def can_observe(self) -> bool:
        engine = self.memory.observation
        return engine.om.enabled and (await engine.model_available("observation"))[0]

    async def hold_lease(self) -> bool:
        """Take or renew the lease while this process can observe; let it go when it cannot."""
        key, op = WORKER_LEASE
        store = self.memory.store
        if await self.can_observe():
            self.held = await store.acquire_lease(key, op, self.owner, self.lease_seconds)
        elif self.held:
            await store.release_lease(key, op, self.owner)
            self.held = False
        return self.held

    async def release(self) -> None:
        if self.held:
            key, op = WORKER_LEASE
            await self.memory.store.release_lease(key, op, self.owner)
            self.held = False

    async def tick(self) -> int:
        """One round; returns how many records or sessions got work."""
        await self.hold_lease()
        await self.recount()
        await self.memory.store.finish_erase(wait=False)  # an erase that had to wait for a reader, if any
        if not await self.can_observe():
            return 0
        await self.activate_host_sessions()
        scheduled = await self.memory.observation.poll()
        return scheduled + await self.settle()

    async def recount(self) -> int:
        """Recount what another tokenizer counted since the last look (a range of seqs, not the table)."""
        top = await self.memory.store.last_seq()
        if top <= self._recounted_through:
            return 0
        done = await self.memory.recount_tokens(after_seq=self._recounted_through)
        self._recounted_through = top
        return done

    async def activate_host_sessions(self) -> None:
        engine = self.memory.observation
        due = await self.memory.store.due_work(*due_floor(engine.limits))
        for work in due:
            thread = await self.memory.store.get_thread(work.thread_id)
            if thread is not None and thread.metadata.get("host"):
                await engine.before_context(work.thread_id, work.resource_id, None)

    async def settle(self) -> int:
        """Observe the tails of host sessions that are over; each tail is tried once until it changes."""
        engine, count = self.memory.observation, 0
        for found in await self.memory.store.settled_threads(quiet_before()):
            if found.record_key != self.memory.record_key(found.thread_id, found.resource_id):
                continue  # a record of another scope setting
            seen = self._flushed.get(found.thread_id)
            now = time.monotonic()
            if seen and seen[:2] == (found.pending_messages, found.updated_at) and now - seen[2] < QUIET_SECONDS:
                continue  # tried already (the Observer may leave a message for later): not every poll
            self._flushed[found.thread_id] = (found.pending_messages, found.updated_at, now)
            log.info("observing the end of session %s (%d messages)", found.thread_id, found.pending_messages)
            await self.memory.worker.submit(
                found.record_key,
                "observe",
                partial(engine.observe, found.thread_id, found.resource_id, "manual"),
                rerun=True,
            )
            count += 1
        return count

    async def poll_forever(self, seconds: float) -> None:
        """A server's background loop (`Memory.running`): a tick every `seconds` until cancelled."""
        try:
            try:
                await self.hold_lease()
            except Exception as error:  # noqa: BLE001 - polling must outlive a bad moment
                log.debug("taking the worker lease failed: %s", error)
            while True:
                await anyio.sleep(seconds)
                try:
                    await self.tick()
                except Exception as error:  # noqa: BLE001 - polling must outlive a bad moment
                    log.debug("polling for work failed: %s", error)
        finally:
            with anyio.CancelScope(shield=True):
                try:
                    await self.release()
                except Exception:  # noqa: BLE001 - the lease expires by itself
                    pass

    async def run_until_idle(self, poll_seconds: float, idle_exit: float) -> None:
        """`om-mcp worker`: drain until nothing has run for `idle_exit` seconds (0: until cancelled)."""
        if not await self.can_observe():
            key, op = WORKER_LEASE
            await self.memory.store.acquire_lease(key, op, self.owner, NO_MODEL_BACKOFF_SECONDS)
            engine = self.memory.observation
            why = (
                (await engine.model_available("observation"))[1]
                if engine.om.enabled
                else "observational_memory.enabled is false"
            )
            log.warning("om-mcp worker: observation cannot run (%s); exiting", why)
            return
        log.info("draining (exits after %gs idle)", idle_exit)
        idle_since = time.monotonic()
        try:
            while True:
                await self.tick()
                if self.memory.worker.active:
                    idle_since = time.monotonic()
                elif idle_exit and time.monotonic() - idle_since >= idle_exit:
                    log.info("om-mcp worker: idle for %gs, exiting", idle_exit)
                    return
                await anyio.sleep(poll_seconds)
        finally:
            with anyio.CancelScope(shield=True):
                await self.release()
