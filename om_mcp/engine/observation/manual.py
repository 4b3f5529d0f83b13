"""Cycles a caller asks for (observe or reflect now, trigger 'manual'), one at a time per record."""

from __future__ import annotations

from typing import Literal

from om_mcp.engine.errors import InputError
from om_mcp.engine.observation.cycle import CycleOutcome
from om_mcp.engine.observation.engine import ObservationEngine, Progress


async def run_manual(
    observation: ObservationEngine,
    op: Literal["observe", "reflect"],
    thread_id: str,
    resource_id: str,
    instruction: str | None = None,
    progress: Progress | None = None,
) -> CycleOutcome:
    """Run the cycle through the worker, so a request while one runs for the same record joins
    it instead of starting a second; its error is the caller's."""
    if not observation.om.enabled:
        raise InputError(
            "observation is off in the configuration (observational_memory.enabled)",
            field="observational_memory.enabled",
        )
    cycle = observation.observe if op == "observe" else observation.reflect
    job = await observation.worker.submit(
        observation.record_key(thread_id, resource_id),
        op,
        lambda: cycle(thread_id, resource_id, "manual", instruction, progress),
    )
    await job.wait()
    if job.error is not None:
        raise job.error
    return job.result
