"""Where a thread's memory stands (the reference's data-om-status), from one snapshot.

The status holds what the operator may see (the model's failure text, the server's
spend) and, beside it, what any caller may (`Status.for_tenant()`): the model's state
in our own words (`models/health.py: summary`), the caps without the spend of others.
The server, which knows who asks, picks one."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from om_mcp.engine.observation.deps import CycleDeps
from om_mcp.engine.observation.thresholds import activation_prefix, message_threshold
from om_mcp.engine.results import (
    ActiveWindows,
    BufferedObservationWindow,
    BufferedReflectionWindow,
    BufferedWindows,
    ObservationState,
    Status,
    Window,
    Windows,
)
from om_mcp.engine.worker import Worker
from om_mcp.models import ModelRouter
from om_mcp.models import health as breaker
from om_mcp.models.health import ModelHealth
from om_mcp.models.readiness import Readiness
from om_mcp.store import Snapshot

if TYPE_CHECKING:
    from om_mcp.engine.budget import BudgetState


def build(
    deps: CycleDeps,
    worker: Worker,
    snap: Snapshot | None,
    thread_id: str,
    resource_id: str,
    observation: ObservationState,
    budget: BudgetState | None = None,
    redactions: dict[str, int] | None = None,
    forgotten: dict[str, Any] | None = None,
    *,
    tenant_observation: ObservationState,
) -> Status:
    """`tenant_observation`: `observation_state(..., detail=False)`, for `Status.for_tenant()`."""
    key = deps.record_key(thread_id, resource_id)
    limits = deps.limits
    if snap is None:
        pending = observation_tokens = chunks_tokens = 0
        chunks, buffered, generation, observed_at, messages, unobserved = [], None, 0, None, 0, 0
    else:
        state = snap.state
        pending, observation_tokens = state.pending_tokens, state.observation_tokens
        chunks, buffered = snap.chunks, snap.buffered_reflection
        generation, observed_at = snap.record.generation, snap.record.last_observed_at
        messages = snap.thread.message_count if snap.thread else 0
        unobserved = state.thread_pending_messages
        chunks_tokens = sum(c.message_tokens for c in chunks)
    threshold = message_threshold(limits, observation_tokens, deps.om.share_token_budget)
    buffering = worker.busy(key, "buffer")
    reflecting = worker.busy(key, "reflect-buffer")
    return Status(
        record_id=key,
        thread_id=thread_id,
        resource_id=resource_id,
        scope=deps.om.scope,
        message_count=messages,
        unobserved_messages=unobserved,
        windows=Windows(
            active=ActiveWindows(
                messages=Window(tokens=pending, threshold=threshold),
                observations=Window(tokens=observation_tokens, threshold=limits.observation_tokens),
            ),
            buffered=BufferedWindows(
                observations=BufferedObservationWindow(
                    chunks=len(chunks),
                    message_tokens=chunks_tokens,
                    projected_message_removal=sum(
                        c.message_tokens for c in activation_prefix(limits, chunks, pending, threshold)
                    ),
                    observation_tokens=sum(c.tokens for c in chunks),
                    status="running" if buffering else ("complete" if chunks else "idle"),
                ),
                reflection=BufferedReflectionWindow(
                    input_observation_tokens=buffered.input_tokens if buffered else 0,
                    observation_tokens=buffered.tokens if buffered else 0,
                    status="running" if reflecting else ("complete" if buffered else "idle"),
                ),
            ),
        ),
        generation_count=generation,
        last_observed_at=observed_at,
        observation=observation,
        tenant_observation=tenant_observation,
        discarded_cycles=dict(deps.discards.get(key, {})),
        spend=budget.as_dict() if budget is not None else None,
        redactions=redactions or {},
        forgotten=forgotten or {},
    )


def observation_state(
    enabled: bool,
    readiness: Readiness,
    router: ModelRouter,
    sampling_missing: bool,
    health: ModelHealth | None,
    budget: BudgetState | None = None,
    detail: bool = True,
) -> ObservationState:
    """`sampling_missing`: only MCP sampling could observe, and no connected client offers it.
    `detail`: the breaker's failure text is shown (the operator's); else only its state."""
    if not enabled:
        return ObservationState(enabled=False, model_ready=False, reason="observation is off in the configuration")
    state = ObservationState(
        model_ready=readiness.ready, model=router.describe(), reason=None if readiness.ready else readiness.reason
    )
    if health is not None and health.state != "ok":
        _breaker_state(state, health, detail)
    elif readiness.ready and sampling_missing:
        state.model_ready = False
        state.reason = readiness.reason
    elif readiness.ready and router.warming_up:
        state.model_ready, state.warming_up = False, True
        state.reason = "warming up: the model client is loading; observation starts when it is ready"
    if budget is not None and budget.reason:
        # A calm pause, not a fault: the model is fine, the user's cap says wait.
        state.budget_paused = True
        state.reason = budget.reason
        state.next_attempt_at = budget.resumes_at.isoformat() if budget.resumes_at else None
    return state


def _breaker_state(state: ObservationState, health: ModelHealth, detail: bool) -> None:
    """What the breaker says; `detail`: with the failure's own text (the operator's), else in
    our words only (a tenant's: the text may quote another tenant's messages)."""
    said = health.last_error if detail else breaker.summary(health)
    state.last_failure = said
    if health.state == "paused" and breaker.is_unusable(health):
        state.model_ready = False
        state.reason = f"{health.model} {breaker.pause_reason(health, detail)}"
    elif health.state == "paused":
        state.model_ready = False
        error = f": {health.last_error}" if detail else ""
        state.reason = f"paused after a permanent error{error}; fix the setting, then restart"
    else:
        state.next_attempt_at = datetime.fromtimestamp(health.next_attempt_at, UTC).isoformat()
        what = said if breaker.is_unusable(health) or not detail else "is failing"
        state.reason = f"the model {what}; next attempt at {state.next_attempt_at}"
