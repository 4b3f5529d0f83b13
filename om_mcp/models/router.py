"""Route one logical model call over a model choice: pick by input size, walk
the fallback list, retry transient errors (in manual cycles; background ones
leave retrying to the breaker), and keep the whole thing inside one time budget.

This knows nothing of providers; it only sees `ModelClient.complete` and the
`transient` flag of the errors it raises. Nor does it know what a usable answer is:
the caller's `accept` says, and an answer it refuses is a failed attempt like any
other (the breaker counts it, the next entry of the choice is tried).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

import anyio

from om_mcp.config.models import (
    ByInputSize,
    CallPolicy,
    ModelSettings,
    ModelTarget,
    effective_max_output_tokens,
    normalize_choice,
)
from om_mcp.models import health as breaker
from om_mcp.models.base import Completion, Meter, Metered, ModelClient, Unmetered
from om_mcp.models.errors import (
    CapReached,
    ModelError,
    ModelSelectionError,
    ModelUnavailable,
    UnusableAnswer,
    is_transient,
)
from om_mcp.models.health import HealthBook

log = logging.getLogger(__name__)

# Set for a call someone asked for explicitly (a manual observe): it tries the model
# even while its breaker is open, and a success closes the breaker for everyone.
probe: ContextVar[bool] = ContextVar("om_model_probe", default=False)

# An attempt that failed after this share of its timeout ran out of time.
TIMED_OUT_SHARE = 0.95


class ModelRouter:
    """Calls the model(s) of one role (Observer or Reflector)."""

    def __init__(
        self,
        choice: Any = None,
        settings: ModelSettings | None = None,
        policy: CallPolicy | None = None,
        client: ModelClient | None = None,
        health: HealthBook | None = None,
        clients: Any = None,
        *,
        meter: Meter | None = None,
    ) -> None:
        self.choice = normalize_choice(choice)
        self.policy = policy or CallPolicy()
        base = settings or ModelSettings()
        # Resolved once: the default max_output_tokens depends on the choice, not on the tier picked.
        self.settings = base.model_copy(update={"max_output_tokens": effective_max_output_tokens(choice, base)})
        # One client for every target (tests pass a scripted one), else one per kind of target.
        self.client = client
        self.clients = clients
        self.health = health
        self._warming = 0  # warm-ups in progress
        # Told of every request, before and after it (what it may cost, what it used): the engine's spend
        # meter. Every request leaves through `client_for`'s `Metered`, whatever loop above asks for it.
        self.meter: Meter = meter or Unmetered()

    @property
    def by_size(self) -> bool:
        return isinstance(self.choice, ByInputSize)

    def targets(self, input_tokens: int) -> list[ModelTarget]:
        """Enabled targets to try for this input, in order; ModelSelectionError if none fits."""
        if isinstance(self.choice, ByInputSize):
            entry = self.choice.resolve(input_tokens)
            if entry is None:
                raise ModelSelectionError(
                    f"input of {input_tokens} tokens is above the largest up_to threshold"
                    f" ({self.choice.thresholds()[-1]}) of the by-input-size model selector;"
                    " add a larger tier or shrink the input"
                )
            targets = [entry if isinstance(entry, ModelTarget) else ModelTarget(model=entry)]
        else:
            targets = self.choice
        return [t for t in targets if t.enabled]

    def describe(self) -> str:
        """Model names for logs and events, e.g. 'a -> b' or 'by size: <=8000 a, <=64000 b'."""
        if isinstance(self.choice, ByInputSize):
            tiers = ", ".join(f"<={n} {_name(self.choice.up_to[n])}" for n in self.choice.thresholds())
            return f"by size: {tiers}"
        names = [t.model + ("" if t.enabled else " (disabled)") for t in self.choice]
        return " -> ".join(names)

    def client_for(self, target: ModelTarget) -> Metered:
        """The client for `target`, metered: the one way a request of this router leaves for a model."""
        return Metered(self._client_for(target), self.meter)

    def _client_for(self, target: ModelTarget) -> ModelClient:
        if self.client is not None:
            return self.client
        if self.clients is None:
            from om_mcp.models.clients import Clients

            self.clients = Clients()
        return self.clients.for_target(target)

    def only(self, target: ModelTarget) -> ModelRouter:
        """This router narrowed to one target (`om-mcp doctor --call` tries each): same clients, breaker
        and meter."""
        return ModelRouter(
            [target], self.settings, self.policy, self.client, self.health, self.clients, meter=self.meter
        )

    def models(self) -> list[str]:
        """Every model this router may call (each by-size tier's too)."""
        return [t.model for t in self._every_target()]

    def _every_target(self) -> list[ModelTarget]:
        if isinstance(self.choice, ByInputSize):
            return [e if isinstance(e, ModelTarget) else ModelTarget(model=e) for e in self.choice.up_to.values()]
        return self.choice

    @property
    def warm(self) -> bool:
        """Is every client set up, so that a call costs only the model's time?"""
        return all(getattr(self.client_for(t), "warm", True) for t in self._every_target())

    @property
    def warming_up(self) -> bool:
        """Is a client being set up right now (the status says so)?"""
        return self._warming > 0 and not self.warm

    async def warm_up(self) -> None:
        """One-time client setup (litellm's import takes 2.5 s, far more on a busy machine), done before
        any call's time budget starts. Failures surface on the call itself."""
        self._warming += 1
        try:
            for target in self._every_target():
                warm_up = getattr(self.client_for(target), "warm_up", None)
                if warm_up is not None:
                    try:
                        await warm_up()
                    except Exception:  # noqa: BLE001 - reported by the call that needs this client
                        pass
        finally:
            self._warming -= 1

    async def complete(
        self,
        messages: list[dict[str, Any]],
        input_tokens: int = 0,
        accept: Callable[[Completion], str | None] | None = None,
        escalate: Callable[[Completion, str], list[dict[str, Any]] | None] | None = None,
    ) -> Completion:
        """One logical call: the targets in order, transient errors retried, all inside
        `total_budget_seconds`. Targets whose breaker is open are skipped without a call.

        `accept(completion)` returns None for a usable answer, else what is wrong with it
        (one line, quoting a neutralised excerpt): that attempt then fails with
        `UnusableAnswer`, and so does the call if no entry does better. Before that,
        `escalate(completion, problem)` may give the messages of another attempt on the
        same target (a stronger request: an answer that looped may not loop when asked for
        less), again after each unusable answer for as long as it gives some (the caller
        bounds it: the Observer asks once more, the Reflector climbs its compression
        levels); each is metered like any attempt, and only the last answer counts for the
        breaker."""
        targets = self.targets(input_tokens)  # ModelSelectionError propagates: no call made
        if not targets:
            raise ModelError(f"no enabled model in {self.describe()}")
        policy = self.policy
        deadline: float | None = None  # starts after the first warm-up: a slow import is not the call's time
        attempts = 0
        last: ModelError | None = None
        skipped: list[str] = []
        for target in targets:
            state = await self.health.get(target.model) if self.health else None
            ok, why = breaker.allowed(state, target)
            if not ok and not probe.get():
                skipped.append(why)
                continue
            try:
                client = self.client_for(target)
                warm_up = getattr(client, "warm_up", None)
                if warm_up is not None:
                    await warm_up()  # one-time setup (litellm's slow import) must not eat the call budget
            except ModelError as exc:
                last = exc
                continue
            except Exception as exc:  # a backend that cannot even start: this target fails, the next may not
                last = ModelError(f"{target.model} cannot be used: {type(exc).__name__}: {exc}", model=target.model)
                continue
            if deadline is None:
                deadline = anyio.current_time() + policy.total_budget_seconds
            backoff = policy.backoff_initial_seconds
            failure: ModelError | None = None
            # Background cycles try once: the breaker spaces out their next try across turns, so a
            # failing model never costs a turn several attempts. A manual cycle retries as configured.
            retries = target.max_retries if probe.get() else 0
            for retry in range(retries + 1):
                remaining = deadline - anyio.current_time()
                if remaining <= 0:
                    break
                timeout = min(policy.timeout_seconds, remaining)
                attempts += 1
                started = anyio.current_time()
                try:
                    completion = await client.complete(messages, target, self.settings, timeout)
                    problem = accept(completion) if accept is not None else None
                    while problem is not None and escalate is not None:
                        harder = escalate(completion, problem)
                        remaining = deadline - anyio.current_time()
                        if harder is None or remaining <= 0:
                            break
                        attempts += 1
                        timeout = min(policy.timeout_seconds, remaining)
                        completion = await client.complete(harder, target, self.settings, timeout)
                        problem = accept(completion) if accept is not None else None
                    if problem is not None:
                        raise UnusableAnswer(problem, model=target.model)
                    if self.health:
                        closed = breaker.after_success(state, target)
                        if closed is not None:
                            await self.health.put(closed)
                    return completion.model_copy(update={"attempts": attempts})
                except CapReached:
                    raise  # no call was made, and another model would pass the same cap
                except ModelUnavailable as exc:
                    last = exc  # no call was made (e.g. no sampling client): not a failure of the model
                    break
                except ModelError as exc:
                    last = failure = exc
                except Exception as exc:  # a timeout, or a client bug: the cycle fails cleanly
                    text = (
                        f"timed out after {timeout:.1f}s"
                        if isinstance(exc, TimeoutError)
                        else (f"{type(exc).__name__}: {exc}")
                    )
                    last = failure = ModelError(text, transient=is_transient(exc), model=target.model)
                log.debug(
                    "model call failed (model=%s attempt=%d transient=%s): %s",
                    target.model,
                    attempts,
                    last.transient,
                    last.message,
                )
                if not last.transient or retry == retries or isinstance(last, UnusableAnswer):
                    break  # next entry (the same question would get the same refusal)
                pause = _jittered(backoff, policy.jitter)
                if anyio.current_time() + pause >= deadline:
                    break  # a retry could not finish in time; the next entry may
                ran_out = anyio.current_time() - started >= timeout * TIMED_OUT_SHARE
                if ran_out and deadline - (anyio.current_time() + pause) < timeout:
                    break  # it needed all its time and failed: a retry with less would be a wasted call
                await anyio.sleep(pause)
                backoff = min(backoff * 2, policy.backoff_max_seconds)
            if failure is not None and self.health:
                await self.health.put(
                    breaker.after_failure(
                        state,
                        target,
                        failure.message,
                        transient=failure.transient,
                        unusable=isinstance(failure, UnusableAnswer),
                    )
                )
            if deadline is not None and deadline - anyio.current_time() <= 0:
                break

        if last is None:
            if skipped:
                raise ModelUnavailable("; ".join(skipped))
            raise ModelError(
                f"model call budget of {policy.total_budget_seconds}s ran out before any attempt",
                transient=True,
                attempts=attempts,
            )
        raise (UnusableAnswer if isinstance(last, UnusableAnswer) else ModelError)(
            f"{self.describe()} failed after {attempts} attempt(s): {last.message}",
            last_error=last.last_error,
            transient=last.transient,
            status_code=last.status_code,
            model=last.model,
            attempts=attempts,
        ) from last


def _jittered(seconds: float, jitter: float) -> float:
    return max(0.0, seconds * random.uniform(1 - jitter, 1 + jitter))


def _name(entry: str | ModelTarget) -> str:
    return entry.model if isinstance(entry, ModelTarget) else entry
