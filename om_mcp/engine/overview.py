"""`MemoryOverview`: the reads for looking at a memory (the status page), through the engine.

The status page shows what the store holds more or less as it is stored, so most
of these read one store operation; they live here so that the server reaches a
memory through the engine only, and the scope and working-memory settings are
applied in one place.
"""

from __future__ import annotations

from om_mcp.config import Config
from om_mcp.engine.budget import Budget, BudgetState
from om_mcp.store import Event, Group, ResourceSummary, Snapshot, Store
from om_mcp.store.rows import Scope
from om_mcp.store.summaries import SeriesInputs, ThreadState


class MemoryOverview:
    def __init__(self, store: Store, config: Config, budget: Budget):
        self._store, self._config, self._budget = store, config, budget

    @property
    def location(self) -> str:
        return self._store.location

    async def resources(self) -> list[ResourceSummary]:
        return await self._store.list_resources()

    async def thread_states(
        self, *, resource_id: str | None = None, thread_id: str | None = None, limit: int = 200
    ) -> list[ThreadState]:
        scope = self._config.observational_memory.scope
        return await self._store.thread_states(scope, resource_id=resource_id, thread_id=thread_id, limit=limit)

    async def snapshot(self, record_key: str, thread_id: str) -> Snapshot | None:
        return await self._store.snapshot(record_key, thread_id)

    async def generations(self, record_key: str) -> list[tuple[int, list[Group]]]:
        return await self._store.generations(record_key)

    async def working_memory(self, scope: Scope, key: str) -> str | None:
        return await self._store.get_working_memory(scope, key)

    async def spend(self) -> BudgetState:
        return await self._budget.state()

    async def redactions(self, resource_id: str) -> dict[str, int]:
        return await self._store.redaction_counts(resource_id)

    async def events(self, thread_id: str, after_id: int, limit: int) -> list[Event]:
        return await self._store.events(thread_id=thread_id, after_id=after_id, limit=limit)

    async def series_inputs(self, record_key: str) -> SeriesInputs:
        return await self._store.series_inputs(record_key)
