"""The one cycle: select -> model call (no transaction open) -> parse -> one
conditional commit -> side effects -> events.

Synchronous and manual observation, buffering, resource-scope batches and
reflection are all this shape; what varies is a `Step`. The lease, its renewal,
the time budget, the failure path and the events exist here once.

A commit is refused only when what the cycle read changed under it (another cycle
observed those messages first, they were deleted, a newer generation replaced the log
it reflected, another process took its work over): messages appended after its
selection, and other threads' commits, leave it valid. A refused commit throws a paid
model call away, so it is counted with its reason, in the status and in its event.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Generic, Literal, Protocol, TypeVar

import anyio

from om_mcp.config import BudgetConfig
from om_mcp.engine.budget import rates
from om_mcp.engine.observation.deps import CycleDeps
from om_mcp.engine.observation.events import EventType, windows
from om_mcp.engine.observation.observer import CycleFailed
from om_mcp.logs import one_line, warn_once
from om_mcp.models import ModelError, ModelUnavailable, UnusableAnswer
from om_mcp.models.router import probe

log = logging.getLogger(__name__)

Trigger = Literal["manual", "turn-sync", "async-buffer"]
Operation = Literal["observation", "reflection", "buffering", "activation"]
EventOperation = Literal["observation", "reflection"]  # an event's operation_type
S = TypeVar("S")
O = TypeVar("O")  # noqa: E741
BUDGET_GRACE_SECONDS = 1.0


@dataclass
class CycleOutcome:
    """What one cycle did, for tool results and tests."""

    operation: Operation
    ran: bool
    cycle_id: str | None = None
    reason: str | None = None  # why nothing ran
    error: str | None = None  # one line: what failed
    tokens_in: int = 0
    tokens_out: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)


class Step(Protocol, Generic[S, O]):
    """What a kind of cycle supplies; `S` is its selection, `O` what the model produced."""

    kind: Operation  # observation | buffering | reflection (outcome and log wording)
    operation: EventOperation
    buffered: bool  # background work: buffering-* events instead of observation-*
    lease_op: str
    key: str
    thread_id: str
    resource_id: str
    trigger: Trigger
    skip_reason: str

    async def select(self) -> S | None: ...

    def tokens_in(self, selection: S) -> int: ...

    def window(self, selection: S) -> tuple: ...  # where the selection starts (refusals.py)

    async def call(self, selection: S, base: dict[str, Any]) -> O: ...

    def end_fields(self, selection: S, produced: O) -> dict[str, Any]: ...

    async def commit(self, selection: S, produced: O, events: list[dict[str, Any]]) -> bool: ...

    async def stale_reason(self, selection: S) -> str:
        """After a refused commit: what changed under the cycle (said in the status and its event)."""
        ...

    async def after_commit(self, selection: S, produced: O, base: dict[str, Any]) -> list[dict[str, Any]]: ...


def exclusive_with(lease_op: str, trigger: Trigger) -> tuple[str, ...]:
    """The cycles that must not run beside this one on the same record: a buffering run and an
    observation read the same messages after the cursor, and whichever commits second would be
    thrown away. (A manual observe goes ahead: it was asked for, and it activates what was buffered.)"""
    if lease_op == "buffer":
        return ("observe",)
    if lease_op == "observe" and trigger != "manual":
        return ("buffer",)
    return ()


async def refusal(deps: CycleDeps, key: str, lease_op: str) -> str:
    """Why a cycle could not take its lease."""
    holder = await deps.store.lease_holder(key, lease_op)
    if holder is not None and holder != deps.owner:
        return "another process is running this cycle"
    other = "an observation" if lease_op == "buffer" else "a buffering run"
    return f"{other} of this record is running; they take turns"


def now_iso() -> str:
    return datetime.now(UTC).isoformat()


def elapsed_ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


async def run_cycle(
    deps: CycleDeps,
    step: Step[Any, Any],
    *,
    take_lease: bool = True,
    progress: Any = None,
    base_extra: dict[str, Any] | None = None,
) -> CycleOutcome:
    """Run one cycle of `step`; every failure ends here as an outcome, never an exception."""
    store = deps.store
    if take_lease and not await store.acquire_lease(
        step.key, step.lease_op, deps.owner, deps.lease_ttl, excluding=exclusive_with(step.lease_op, step.trigger)
    ):
        return CycleOutcome(step.kind, False, reason=await refusal(deps, step.key, step.lease_op))
    token = probe.set(step.trigger == "manual")
    try:
        available, why = await deps.model_available(step.operation, manual=step.trigger == "manual")
        if not available:
            return CycleOutcome(step.kind, False, reason=why)
        selection = await step.select()
        if selection is None:
            return CycleOutcome(step.kind, False, reason=step.skip_reason)
        tokens_in = step.tokens_in(selection)
        model = deps.reflector if step.operation == "reflection" else deps.observer
        slot, window = (step.key, step.kind, step.thread_id), step.window(selection)
        model_name = model.router.describe()
        if step.trigger != "manual":
            held = deps.refusals.held(slot, window, tokens_in, model_name, deps.retry_interval)
            if held is not None:
                return CycleOutcome(step.kind, False, reason=held)
        cycle_id = uuid.uuid4().hex
        base = {
            **deps.event_base(cycle_id, step.key, step.thread_id, step.resource_id),
            "trigger": step.trigger,
            **(base_extra or {}),
        }
        # Events anchor to the turn's last assistant message, never a user message,
        # so a message's last observation-end event marks where its unobserved parts begin.
        thread = await store.get_thread(step.thread_id)
        if thread is not None and thread.last_assistant_id:
            base["anchor_message_id"] = thread.last_assistant_id
        start_type = EventType.BUFFERING_START if step.buffered else EventType.OBSERVATION_START
        await deps.events.emit(
            [
                {
                    **base,
                    "type": start_type,
                    "operation_type": step.operation,
                    "started_at": now_iso(),
                    "tokens_to_observe": tokens_in,
                    "config": deps.config_snapshot(),
                }
            ]
        )
        if progress is not None:
            await progress(f"{step.kind}: {tokens_in} tokens in")
        started = time.monotonic()
        try:
            # The lease is renewed from here on: a client that takes long to load (litellm on a busy
            # machine: tens of seconds) must not let it lapse and hand the work to another process.
            async with LeaseRenewal(deps, step.key, step.lease_op, cycle_id):
                await model.router.warm_up()  # a slow first import is not the model's time
                started = time.monotonic()
                # The whole model part, retries, fallbacks, extractors and escalation included.
                with anyio.fail_after(deps.call_budget + BUDGET_GRACE_SECONDS):
                    produced = await step.call(selection, base)
            produced, redacted = deps.scrub(produced)  # before any of it is committed, or in an event
        except (ModelError, CycleFailed, TimeoutError) as error:
            if isinstance(error, UnusableAnswer):
                deps.refusals.refused(slot, window, tokens_in, model_name)
            if isinstance(error, TimeoutError):
                error = CycleFailed(f"gave up after the {deps.call_budget:.0f}s call budget")
            return await failed(deps, step, base, error, tokens_in, started)
        end_type = EventType.BUFFERING_END if step.buffered else EventType.OBSERVATION_END
        end = {
            **base,
            "type": end_type,
            "operation_type": step.operation,
            "completed_at": now_iso(),
            "duration_ms": elapsed_ms(started),
            **step.end_fields(selection, produced),
            "windows": windows(deps.limits, deps.om.share_token_budget),
            **({"redactions": redacted} if redacted else {}),
        }
        priced(end, deps.om.budget)
        if not await step.commit(selection, produced, [end]):
            reason = await step.stale_reason(selection)
            deps.discarded(step.key, reason)
            return await skipped(deps, step, base, reason, tokens_in, started)
        deps.refusals.done(slot)
        extra = await step.after_commit(selection, produced, base)
        await deps.events.emit([end, *extra], persisted=True)
        return CycleOutcome(
            step.kind,
            True,
            cycle_id,
            tokens_in=tokens_in,
            tokens_out=end.get("observation_tokens", 0),
            events=[end, *extra],
        )
    finally:
        probe.reset(token)
        if take_lease:
            with anyio.CancelScope(shield=True):
                await store.release_lease(step.key, step.lease_op, deps.owner)


def priced(event: dict[str, Any], budget: BudgetConfig) -> None:
    """The cycle's cost where its provider said none: its tokens at the price the spend meter uses
    (litellm's offline map, else the configured one), so the status page's cost per cycle is there
    whenever the spend is; a model nobody prices stays without one."""
    usage, model = event.get("usage"), event.get("model")
    if not isinstance(usage, dict) or usage.get("cost") is not None or not isinstance(model, str):
        return
    price = rates(budget, model)
    if price is not None and (usage.get("input_tokens") or usage.get("output_tokens")):
        usage["cost"] = usage.get("input_tokens", 0) * price[0] + usage.get("output_tokens", 0) * price[1]


async def failed(
    deps: CycleDeps, step: Step[Any, Any], base: dict[str, Any], error: BaseException, tokens: int, started: float
) -> CycleOutcome:
    """The one failure path: nothing was committed, the messages stay unobserved."""
    text, _ = deps.scrub(one_line(getattr(error, "message", None) or error))  # it may quote the model
    event_type = EventType.BUFFERING_FAILED if step.buffered else EventType.OBSERVATION_FAILED
    event = {
        **base,
        "type": event_type,
        "operation_type": step.operation,
        "failed_at": now_iso(),
        "duration_ms": elapsed_ms(started),
        "tokens_attempted": tokens,
        "error": text,
        "windows": windows(deps.limits, deps.om.share_token_budget),
    }
    if not isinstance(error, ModelUnavailable):  # a paused model is a state, already reported
        warn_once(log, "%s failed, messages stay unobserved: %s", step.kind, text)
    log.debug("%s cycle %s failed", step.kind, base.get("cycle_id"), exc_info=error)
    await deps.events.emit([event])
    return CycleOutcome(step.kind, False, base.get("cycle_id"), error=text, tokens_in=tokens, events=[event])


async def skipped(
    deps: CycleDeps, step: Step[Any, Any], base: dict[str, Any], reason: str, tokens: int, started: float
) -> CycleOutcome:
    """A cycle whose result arrived after what it read had changed (another worker's cycle, the user's
    edit): nothing failed and nothing is lost (the other side has the messages, or they are observed
    again), so it is a skip, said with its reason; its model call is counted in the status's discards."""
    event_type = EventType.BUFFERING_SKIPPED if step.buffered else EventType.OBSERVATION_SKIPPED
    event = {
        **base,
        "type": event_type,
        "operation_type": step.operation,
        "skipped_at": now_iso(),
        "duration_ms": elapsed_ms(started),
        "tokens_attempted": tokens,
        "discarded": reason,
        "windows": windows(deps.limits, deps.om.share_token_budget),
    }
    log.info("%s skipped, its result not kept: %s", step.kind, reason)
    await deps.events.emit([event])
    return CycleOutcome(step.kind, False, base.get("cycle_id"), reason=f"skipped: {reason}", events=[event])


class LeaseRenewal:
    """Keeps a lease alive while a model call runs, so a slow call is not mistaken for
    a dead process; a crash stops renewal and the lease expires."""

    def __init__(self, deps: CycleDeps, key: str, op: str, cycle_id: str):
        self.deps, self.key, self.op, self.cycle_id = deps, key, op, cycle_id

    async def __aenter__(self) -> LeaseRenewal:
        self._group = anyio.create_task_group()
        await self._group.__aenter__()
        self._group.start_soon(self._renew)
        return self

    async def _renew(self) -> None:
        deps = self.deps
        while True:
            await anyio.sleep(deps.lease_ttl / 3)
            await deps.store.acquire_lease(self.key, self.op, deps.owner, deps.lease_ttl, self.cycle_id)

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        self._group.cancel_scope.cancel()
        if exc is not None and not isinstance(exc, anyio.get_cancelled_exc_class()):
            # anyio wraps a body's exception in an ExceptionGroup when the group has
            # child tasks; the cycle must see the plain ModelError/CycleFailed.
            await self._group.__aexit__(None, None, None)
            return False
        return bool(await self._group.__aexit__(exc_type, exc, tb))
