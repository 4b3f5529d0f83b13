"""The background worker: one task group, single flight per (key, op), a cap
on model calls in flight.

Without a running task group (plain library use) jobs run inline, so the
engine behaves the same, only synchronously.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.abc import TaskGroup

log = logging.getLogger(__name__)


@dataclass
class Job:
    key: str
    op: str
    done: anyio.Event = field(default_factory=anyio.Event)
    result: Any = None
    error: BaseException | None = None
    again: bool = False  # a request came in while running: run once more after
    run_done: anyio.Event = field(default_factory=anyio.Event)  # the run in progress ended

    async def wait(self, timeout: float | None = None) -> bool:
        """True once finished; False if `timeout` passed first (the job goes on)."""
        with anyio.move_on_after(timeout):
            await self.done.wait()
        return self.done.is_set()

    async def wait_run(self, timeout: float | None = None) -> bool:
        """Wait for the run in progress (not the ones queued after it); True once it ended."""
        ended = self.run_done
        with anyio.move_on_after(timeout):
            await ended.wait()
        return ended.is_set()


class Worker:
    def __init__(self, max_concurrent: int = 4):
        self._group: TaskGroup | None = None
        self._jobs: dict[tuple[str, str], Job] = {}
        self._limit = anyio.Semaphore(max_concurrent)

    @property
    def group(self) -> TaskGroup | None:
        return self._group

    async def idle(self, key: str | None = None) -> None:
        """Return once no job (for `key`) is running or waiting, including jobs those jobs start."""
        while jobs := [job for (k, _), job in self._jobs.items() if key is None or k == key]:
            await jobs[0].done.wait()

    def attach(self, group: TaskGroup | None) -> None:
        self._group = group

    def busy(self, key: str, op: str) -> bool:
        return (key, op) in self._jobs

    def job(self, key: str, op: str) -> Job | None:
        """The job running (or waiting for a slot) for (key, op), to join it."""
        return self._jobs.get((key, op))

    @property
    def active(self) -> int:
        """Jobs running or waiting for a slot."""
        return len(self._jobs)

    async def submit(self, key: str, op: str, factory: Callable[[], Awaitable[Any]], *, rerun: bool = False) -> Job:
        """Start `factory()` for (key, op) unless it is already running.

        With `rerun`, a request for a running job schedules one more run after
        it, so work that arrived meanwhile is not left waiting for a trigger."""
        existing = self._jobs.get((key, op))
        if existing is not None:
            existing.again = existing.again or rerun
            return existing
        job = Job(key, op)
        self._jobs[(key, op)] = job
        if self._group is None:
            await self._run(job, factory)
        else:
            self._group.start_soon(self._run, job, factory)
        return job

    async def _run(self, job: Job, factory: Callable[[], Awaitable[Any]]) -> None:
        try:
            while True:
                job.again = False
                async with self._limit:
                    try:
                        job.result = await factory()
                        job.error = None
                    except anyio.get_cancelled_exc_class():
                        raise
                    except Exception as error:  # a failed cycle is reported by events, never fatal
                        job.error = error
                        log.warning("background %s for %s failed: %s", job.op, job.key, error)
                    finally:
                        job.run_done.set()
                if not job.again or self._group is None:
                    break
                job.run_done = anyio.Event()
        finally:
            self._jobs.pop((job.key, job.op), None)
            job.done.set()
