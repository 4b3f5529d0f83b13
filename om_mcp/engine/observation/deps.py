"""`CycleDeps`: what a cycle step may use, and nothing more.

The steps (observation, buffering, resource batches, reflection, activation,
side effects) are handed this, never the `ObservationEngine`: they cannot
reach the worker, the turn policy or the model clients' set-up, and the
engine can import them without them importing it back.
"""

from __future__ import annotations

import inspect
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Protocol

from om_mcp.config import Config, ObservationalMemoryConfig
from om_mcp.engine.observation.events import Events
from om_mcp.engine.observation.extractors import Extractors
from om_mcp.engine.observation.observer import Observer
from om_mcp.engine.observation.reflector import Reflector
from om_mcp.engine.observation.refusals import Refusals
from om_mcp.engine.tokens import TokenCounter
from om_mcp.limits import Limits
from om_mcp.logs import one_line
from om_mcp.store import Store, gate_for, record_key


class ModelAvailable(Protocol):
    async def __call__(self, operation: str, manual: bool = False) -> tuple[bool, str]:
        """May a cycle of `operation` call its model now; if not, why."""
        ...


@dataclass(eq=False)
class CycleDeps:
    store: Store
    config: Config
    limits: Limits
    counter: TokenCounter
    events: Events
    extractors: Extractors
    observer: Observer
    reflector: Reflector
    owner: str  # this process's name on the leases it takes
    model_available: ModelAvailable
    discards: dict[str, Counter[str]] = field(default_factory=dict)  # record key -> why its cycles were thrown away
    refusals: Refusals = field(default_factory=Refusals)  # windows the model answered with nothing usable

    @property
    def retry_interval(self) -> int:
        """New tokens that make a window the model refused worth sending again."""
        return self.limits.buffer_tokens or self.limits.message_tokens

    @property
    def om(self) -> ObservationalMemoryConfig:
        return self.config.observational_memory

    @property
    def lease_ttl(self) -> float:
        return self.om.lease_seconds

    @property
    def call_budget(self) -> float:
        return self.om.call_policy.total_budget_seconds

    def record_key(self, thread_id: str, resource_id: str) -> str:
        return record_key(self.om.scope, thread_id, resource_id)

    def event_base(self, cycle_id: str, key: str, thread_id: str, resource_id: str) -> dict[str, Any]:
        return {"cycle_id": cycle_id, "record_id": key, "thread_id": thread_id, "resource_id": resource_id}

    def config_snapshot(self) -> dict[str, Any]:
        return {
            "message_tokens": self.limits.message_tokens,
            "observation_tokens": self.limits.observation_tokens,
            "scope": self.om.scope,
        }

    def scrub(self, value: Any) -> tuple[Any, dict[str, int]]:
        """What a model wrote (and every string it was parsed into), with the privacy rules applied
        before anything of it is stored: a model can decode a token the detectors could not see in
        its input (base64, say) into one they can."""
        clean, counts = gate_for(self.config.privacy.settings()).value(value)
        return clean, dict(counts)

    def discarded(self, key: str, reason: str) -> None:
        self.discards.setdefault(key, Counter())[reason] += 1

    async def stale_reason(self, key: str, lease_op: str, moved: str | None, edits: int | None) -> str:
        """Why a commit was refused: the user's edit since the cycle read the record (`edits`, its count
        then), what moved (`moved`, from the step), else who holds the lease now."""
        record = await self.store.record(key)
        if edits is not None and record is not None and record.edits != edits:
            return "the memory changed meanwhile (a forget, a correction or a restore)"
        if moved:
            return moved
        holder = await self.store.lease_holder(key, lease_op)
        if holder is not None and holder != self.owner:
            return "another process took this cycle over (its lease)"
        return "the messages it read were deleted or changed"

    async def on_extracted(
        self, values: dict[str, Any], failures: list[dict[str, str]], base: dict[str, Any]
    ) -> dict[str, Any]:
        """The on_extracted hook sees each value before it is stored: a value it
        returns replaces the extracted one; an exception records a failure for that slug."""
        hook = self.events.hooks.on_extracted
        if hook is None:
            return values
        out = {}
        for slug, value in values.items():
            try:
                replaced = hook({**base, "slug": slug, "value": value})
                if inspect.isawaitable(replaced):
                    replaced = await replaced
            except Exception as error:  # noqa: BLE001 - recorded as that slug's failure
                failures.append({"slug": slug, "error": one_line(error)})
                continue
            out[slug] = value if replaced is None else replaced
        return out
