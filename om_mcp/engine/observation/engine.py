"""`ObservationEngine`: the Observer, the Reflector and the cycles around them.

It holds what every cycle shares (store, limits, agents, events, the worker,
this process's lease owner name) and offers the operations; the cycles
themselves live in their own modules (sync, buffering, resource, reflection,
activation) and the per-turn decisions in turn.py.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from om_mcp.config import Config, ConfigError
from om_mcp.config.models import AUTO, normalize_choice
from om_mcp.engine.budget import Budget, BudgetState, Clock, price_refusal
from om_mcp.engine.observation import activation, thresholds, turn
from om_mcp.engine.observation import status as status_view
from om_mcp.engine.observation.buffering import BufferStep
from om_mcp.engine.observation.cycle import CycleOutcome, Trigger, run_cycle
from om_mcp.engine.observation.deps import CycleDeps
from om_mcp.engine.observation.events import Events, Hooks
from om_mcp.engine.observation.extractors import Extractors
from om_mcp.engine.observation.observer import Observer
from om_mcp.engine.observation.reflection import ReflectStep
from om_mcp.engine.observation.reflector import Reflector
from om_mcp.engine.observation.resource import run_resource
from om_mcp.engine.observation.side_effects import working_memory_extractor
from om_mcp.engine.observation.sync import ObserveStep
from om_mcp.engine.results import ObservationState, Status
from om_mcp.engine.tokens import TokenCounter
from om_mcp.engine.worker import Worker
from om_mcp.models import ModelClient, ModelRouter, readiness
from om_mcp.models import health as breaker
from om_mcp.models.auto import SAMPLING_MODEL, resolve_auto
from om_mcp.models.clients import Clients
from om_mcp.models.health import ModelHealth
from om_mcp.models.sampler import Sampler
from om_mcp.privacy import scrub
from om_mcp.store import Access, Store

log = logging.getLogger(__name__)
Progress = Callable[[str], Awaitable[None]]
MANUAL_CYCLES = 20  # a manual observe of a long backlog: this many cycles at most


class StoreHealthBook:
    """Model health kept in the database, so every process sees the same breaker.
    Reads are cached for a moment: a turn asks often, and the answer rarely changes."""

    CACHE_SECONDS = 2.0

    def __init__(self, store: Store, privacy: dict[str, Any] | None = None):
        self.store = store
        self.privacy = privacy  # a failure's text can quote the model's answer or the provider's reply
        self._cache: dict[str, tuple[float, ModelHealth | None]] = {}

    async def get(self, model: str) -> ModelHealth | None:
        now = time.monotonic()
        hit = self._cache.get(model)
        if hit is not None and now - hit[0] < self.CACHE_SECONDS:
            return hit[1]
        health = await self.store.model_health(model)
        self._cache[model] = (now, health)
        return health

    async def put(self, health: ModelHealth) -> None:
        if health.last_error:
            health = replace(health, last_error=scrub(self.privacy, health.last_error)[0])
        self._cache[health.model] = (time.monotonic(), health)
        await self.store.put_model_health(health)

    def forget_cached(self) -> None:
        """Read the rows again next time (a forget scrubbed an excerpt they quote)."""
        self._cache.clear()


def resolve_choice(om: Any, role: str) -> tuple[Any, readiness.Readiness]:
    """A role's model choice (OM: shared, own, the other role's, else auto) and its readiness, with no
    network; `om-mcp ingest` asks it too before it says observation goes on in the background."""
    own = getattr(om, role).model
    other = om.reflection.model if role == "observation" else om.observation.model
    choice = om.model if om.model is not None else (own if own is not None else other)
    if choice is None or choice == AUTO:
        auto = resolve_auto()
        ready = readiness.Readiness(auto.models != (SAMPLING_MODEL,), auto.reason)
        return list(auto.targets), ready
    targets = normalize_choice(choice)
    if not isinstance(targets, list):
        return choice, readiness.Readiness(True, "models chosen by input size")
    return choice, readiness.check_all(targets)


def budget_refusal(config: Config) -> str | None:
    """Why the spend caps cannot hold with the models configured (a dollar cap on a model with no price),
    in one line naming the options; None when they can. What `om-mcp serve` checks before it starts."""
    om = config.observational_memory
    if not om.enabled or not om.budget.dollars:
        return None
    models = [m for role in ("observation", "reflection") for m in ModelRouter(resolve_choice(om, role)[0]).models()]
    return price_refusal(om.budget, models)


class ObservationEngine:
    def __init__(
        self,
        store: Store,
        config: Config,
        counter: TokenCounter,
        *,
        client: ModelClient | None = None,
        hooks: Hooks | None = None,
        worker: Worker | None = None,
        sampling: Sampler | None = None,
        clock: Clock | None = None,
    ):
        self.store = store
        self.config = config
        self.om = config.observational_memory
        self.limits = self.om.limits()
        self.counter = counter
        self.worker = worker or Worker()
        self.events = Events(store, Hooks.from_config(self.om.hooks, hooks))
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.waited: dict[tuple[str, str], tuple] = {}  # (key, op) -> the crossing a turn already waited for
        self.extractors = Extractors(self.om, counter)
        self.clients = Clients(sampling)
        self.health = health = StoreHealthBook(store, config.privacy.settings())
        observer_choice, self.readiness = self._resolve("observation")
        reflector_choice, _ = self._resolve("reflection")
        obs, refl = self.om.observation, self.om.reflection
        # The one meter of every request these routers make, whoever serves it (models.base.Metered).
        self.budget = Budget(store, self.om.budget, counter, clock, ttl=self.om.call_policy.total_budget_seconds)
        self.observer = Observer(
            ModelRouter(
                observer_choice,
                obs.model_settings,
                self.om.call_policy,
                client,
                health,
                self.clients,
                meter=self.budget,
            ),
            counter,
            instruction=obs.instruction,
            thread_title=obs.thread_title,
            extractors=self.extractors.inline("observation") + working_memory_extractor(config),
            previous_tokens=obs.previous_observer_tokens,
            observe_attachments=obs.observe_attachments,
        )
        self.reflector = Reflector(
            ModelRouter(
                reflector_choice,
                refl.model_settings,
                self.om.call_policy,
                client,
                health,
                self.clients,
                meter=self.budget,
            ),
            counter,
            instruction=refl.instruction,
            extractors=self.extractors.inline("reflection"),
            multi_thread=self.om.scope == "resource",
        )
        if self.om.enabled:
            refusal = price_refusal(self.om.budget, self.observer.router.models() + self.reflector.router.models())
            if refusal is not None:
                raise ConfigError(refusal)
        self.injected_client = client is not None
        if self.injected_client:
            self.readiness = readiness.Readiness(True, "the model client given to the engine")
        self.sampling_only = not self.injected_client and all(
            t.model == SAMPLING_MODEL for t in self.observer.router.targets(0)
        )
        self.deps = CycleDeps(
            store,
            config,
            self.limits,
            counter,
            self.events,
            self.extractors,
            self.observer,
            self.reflector,
            self.owner,
            self.model_available,
        )

    def _resolve(self, role: str) -> tuple[Any, readiness.Readiness]:
        return resolve_choice(self.om, role)

    # -- small shared helpers -------------------------------------------------------

    def record_key(self, thread_id: str, resource_id: str) -> str:
        return self.deps.record_key(thread_id, resource_id)

    def sampling_connected(self) -> bool:
        return self.clients.sampler.available

    async def model_available(self, operation: str, manual: bool = False) -> tuple[bool, str]:
        """Can a cycle call its model now? No network: the spend caps, readiness, sampling, the
        breaker (which a manual run may try past; a cap it may not)."""
        paused = await self.budget.paused()
        if paused:
            return False, paused
        if self.injected_client:
            return True, ""
        if not self.readiness.ready and not (self.sampling_only and self.sampling_connected()):
            return False, self.readiness.reason
        if manual:
            return True, ""
        router = self.reflector.router if operation == "reflection" else self.observer.router
        reasons = []
        for target in router.targets(0) if not router.by_size else []:
            if target.model == SAMPLING_MODEL and not self.sampling_connected():
                reasons.append("no connected client offers MCP sampling")
                continue
            allowed, why = breaker.allowed(await self.health.get(target.model), target)
            if allowed:
                return True, ""
            reasons.append(why)
        return (True, "") if not reasons else (False, "; ".join(reasons))

    async def model_failing(self, operation: str) -> bool:
        """Did the last call of every model of the operation fail (breaker not closed, even
        if its backoff is over)? Then a turn does not wait on the retry."""
        if self.injected_client:
            return False
        router = self.reflector.router if operation == "reflection" else self.observer.router
        targets = router.targets(0) if not router.by_size else []
        for target in targets:
            health = await self.health.get(target.model)
            if health is None or health.state == "ok":
                return False
        return bool(targets)

    async def warm_up(self) -> None:
        """Set up the model clients ahead of the first cycle (litellm's import takes seconds)."""
        if not self.om.enabled or not (await self.model_available("observation"))[0]:
            return
        await self.observer.router.warm_up()
        await self.reflector.router.warm_up()

    # -- operations -------------------------------------------------------------------

    async def observe(
        self,
        thread_id: str,
        resource_id: str,
        trigger: Trigger,
        instruction: str | None = None,
        progress: Progress | None = None,
    ) -> CycleOutcome:
        """One cycle; a manual run goes on, a cycle at a time, until nothing is left (or one fails)."""
        outcome = await self._observe_once(thread_id, resource_id, trigger, instruction, progress)
        for _ in range(MANUAL_CYCLES - 1):
            if trigger != "manual" or not outcome.ran:
                break
            state = await self.store.record_state(self.record_key(thread_id, resource_id), thread_id)
            if state.pending_messages == 0:
                break
            more = await self._observe_once(thread_id, resource_id, trigger, instruction, progress)
            if not more.ran:
                break  # what is left is retried later; its failure is in the events
            outcome.tokens_in += more.tokens_in
            outcome.tokens_out += more.tokens_out
            outcome.events += more.events
        return outcome

    async def _observe_once(
        self, thread_id: str, resource_id: str, trigger: Trigger, instruction: str | None, progress: Progress | None
    ) -> CycleOutcome:
        if self.om.scope == "resource":
            return await run_resource(
                self.deps, thread_id, resource_id, trigger, buffered=False, instruction=instruction, progress=progress
            )
        return await run_cycle(
            self.deps, ObserveStep(self.deps, thread_id, resource_id, trigger, instruction), progress=progress
        )

    async def buffer(self, thread_id: str, resource_id: str, on_idle: bool = False) -> CycleOutcome:
        if self.om.scope == "resource":
            return await run_resource(self.deps, thread_id, resource_id, "async-buffer", buffered=True, on_idle=on_idle)
        step = BufferStep(self.deps, thread_id, resource_id, "async-buffer", on_idle=on_idle)
        return await run_cycle(self.deps, step)

    async def reflect(
        self,
        thread_id: str,
        resource_id: str,
        trigger: Trigger,
        instruction: str | None = None,
        progress: Progress | None = None,
    ) -> CycleOutcome:
        return await run_cycle(
            self.deps, ReflectStep(self.deps, thread_id, resource_id, trigger, instruction), progress=progress
        )

    async def activate(self, thread_id: str, resource_id: str, trigger: str = "threshold") -> CycleOutcome:
        return await activation.activate(self.deps, thread_id, resource_id, trigger)

    async def status(self, thread_id: str, resource_id: str) -> Status:
        snap = await self.store.snapshot(self.record_key(thread_id, resource_id), thread_id)
        return await self.status_of(snap, thread_id, resource_id)

    async def status_of(self, snap: Any, thread_id: str, resource_id: str) -> Status:
        targets = self.observer.router.targets(0) if not self.observer.router.by_size else []
        health = await self.health.get(targets[0].model) if targets and not self.injected_client else None
        budget = await self.budget.state()
        redactions = await self.store.redaction_counts(Access.to([resource_id]))
        state, tenant = self.observation_state(health, budget), self.observation_state(health, budget, detail=False)
        forgotten = await self.forgotten(resource_id)
        return status_view.build(
            self.deps,
            self.worker,
            snap,
            thread_id,
            resource_id,
            state,
            budget,
            redactions,
            forgotten,
            tenant_observation=tenant,
        )

    async def forgotten(self, resource_id: str) -> dict[str, Any]:
        """What the status says of forgetting: messages of the resource the tombstones refused, and a
        pending erase (only what is not nothing)."""
        refused = (await self.store.forgotten_summary(Access.to([resource_id])))["refused"]
        pending = await self.store.erase_pending()
        return {k: v for k, v in (("refused", refused), ("erase_pending_since", pending)) if v}

    def observation_state(
        self, health: ModelHealth | None, budget: BudgetState | None = None, detail: bool = True
    ) -> ObservationState:
        """Can this engine observe now, and if not, why (readiness, the breaker, sampling, the caps);
        `detail`: with the breaker's failure text, which only the operator may see."""
        return status_view.observation_state(
            self.om.enabled,
            self.readiness,
            self.observer.router,
            self.sampling_only and not self.sampling_connected(),
            health,
            budget,
            detail,
        )

    async def after_append(self, thread_id: str, resource_id: str, state: Any, turn_ended: bool) -> None:
        await turn.after_append(self, thread_id, resource_id, state, turn_ended)

    async def before_context(
        self, thread_id: str, resource_id: str, actor_model: str | None = None, snap: Any = None
    ) -> bool:
        """Activate what is due, and let the valve wait; True if the memory may have changed since
        `snap` (the state the context was read from; None: read it here)."""
        if snap is None:
            snap = await self.store.snapshot(self.record_key(thread_id, resource_id), thread_id)
        return await turn.before_context(self, thread_id, resource_id, actor_model, snap)

    async def poll(self) -> int:
        """Schedule work appended by other processes (hooks, other servers); returns how many records."""
        if not self.om.enabled or not (await self.model_available("observation"))[0]:
            return 0
        due = await self.store.due_work(*thresholds.due_floor(self.limits))
        for work in due:
            state = await self.store.record_state(work.record_key, work.thread_id)
            await self.after_append(work.thread_id, work.resource_id, state, turn_ended=False)
        return len(due)
