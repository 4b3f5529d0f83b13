"""The background worker's `idle()`: what tests (and callers) settle on instead of polling."""

from __future__ import annotations

import anyio
import pytest

from om_mcp.engine.worker import Worker

pytestmark = pytest.mark.anyio


async def test_idle_returns_once_the_jobs_of_a_key_and_the_jobs_they_start_are_done():
    worker, gate, order = Worker(), anyio.Event(), []

    async def reflect() -> None:
        order.append("reflect")

    async def observe() -> None:
        await gate.wait()
        order.append("observe")
        await worker.submit("k", "reflect", reflect)  # a cycle that schedules the next one

    async def other() -> None:
        await anyio.sleep_forever()

    async with anyio.create_task_group() as group:
        worker.attach(group)
        await worker.submit("k", "observe", observe)
        await worker.submit("elsewhere", "observe", other)  # another key's job does not hold `idle("k")`
        await anyio.wait_all_tasks_blocked()
        assert worker.busy("k", "observe") and order == []
        gate.set()
        await worker.idle("k")
        assert order == ["observe", "reflect"] and not worker.busy("k", "reflect")
        assert worker.busy("elsewhere", "observe")
        group.cancel_scope.cancel()
    await worker.idle()  # nothing left anywhere
