"""A circuit breaker per model, shared by every process on the database.

A model that keeps failing must not cost every turn a doomed call: after a
transient failure (timeout, 429, 5xx, connection refused) the model backs off,
across turns, exponentially; after a permanent one (bad key, unknown model, bad
request, context too long) it is paused until its configuration changes or an
operator resumes it. An answer with nothing usable in it (`UnusableAnswer`) backs
off the same way; UNUSABLE_BEFORE_PAUSE of them in a row pause the model, and the
pause says what it answered. One success closes the breaker.

The breaker is one per model, shared by every tenant of the server, and its
`last_error` is a provider's message or an excerpt of what the model answered (which
quotes whoever's messages it was shown). So what any cycle records, and what a tenant's
status shows, is `summary()`: the state in our own words. The text itself is the
operator's (an admin's status, `om-mcp doctor --model`).

The decisions are pure functions of a `ModelHealth`, the store's row (`store/rows.py`: one type, kept
where it is stored); `HealthBook` is where they live (the engine keeps them in the database).
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import replace
from datetime import UTC, datetime
from typing import Protocol

from om_mcp.config.models import ModelTarget
from om_mcp.store.rows import ModelHealth

BACKOFF_INITIAL_SECONDS = 30.0
BACKOFF_MAX_SECONDS = 30 * 60.0
ERROR_CHARS = 300
UNUSABLE_BEFORE_PAUSE = 3
# last_error of a breaker opened by unusable answers starts with this; `failures` then
# counts those answers in a row (a failure of another kind starts the count again).
UNUSABLE = "answered with nothing usable"


class HealthBook(Protocol):
    async def get(self, model: str) -> ModelHealth | None: ...

    async def put(self, health: ModelHealth) -> None: ...


def fingerprint(target: ModelTarget) -> str:
    """What a permanent failure depends on: the target's settings and its key's value.
    A change (a new key in the environment, another api_base) lifts a pause."""
    from om_mcp.models.readiness import key_variables

    keys = [os.environ.get(name, "") for name in key_variables(target)]
    text = "|".join([target.model, target.api_base or "", target.api_key_env or "", *keys])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def allowed(health: ModelHealth | None, target: ModelTarget, now: float | None = None) -> tuple[bool, str]:
    """May a call be made now? (yes/no, and a one-line reason when not)."""
    if health is None or health.state == "ok":
        return True, ""
    if health.state == "paused":
        if health.config_hash != fingerprint(target):
            return True, ""  # the configuration changed since it failed
        return False, f"{target.model} {pause_reason(health, detail=False)}"
    now = time.time() if now is None else now
    if now >= health.next_attempt_at:
        return True, ""
    wait = int(health.next_attempt_at - now)
    return False, f"{target.model} {summary(health)}; next attempt in {wait}s"


def is_unusable(health: ModelHealth | None) -> bool:
    """Was the breaker's last failure an answer with nothing usable in it?"""
    return health is not None and health.state != "ok" and (health.last_error or "").startswith(UNUSABLE)


def summary(health: ModelHealth) -> str:
    """The breaker's state after the model's name, in our words only: never the failure's text."""
    times = f"{health.failures} time{'s' if health.failures != 1 else ''} in a row"
    if is_unusable(health):
        return f"{UNUSABLE} {times}"
    if health.state == "paused":
        return "failed with a permanent error"
    return f"is failing ({times})"


def pause_reason(health: ModelHealth, detail: bool = True) -> str:
    """Why a paused model is paused and what lifts it (one line, after the model's name);
    `detail`: quoting the failure's text (for the operator)."""
    if is_unusable(health):
        said = health.last_error if detail else summary(health)
        return (
            f"is paused: it {said}. Choose another model (or fix what makes it refuse),"
            " or run `om-mcp doctor --model` to try it again"
        )
    error = f" ({health.last_error})" if detail else ""
    return (
        f"is paused after a permanent error{error}; fix the setting"
        " or run `om-mcp doctor --model` (a successful test call resumes it)"
    )


def after_failure(
    health: ModelHealth | None,
    target: ModelTarget,
    error: str,
    *,
    transient: bool,
    unusable: bool = False,
    now: float | None = None,
) -> ModelHealth:
    """The breaker after a failed call. `unusable`: the model answered, with nothing usable
    (`error` says what and quotes it): a backoff, and a pause once it happened
    UNUSABLE_BEFORE_PAUSE times in a row."""
    now = time.time() if now is None else now
    base = health or ModelHealth(model=target.model)
    text = " ".join(error.split())[:ERROR_CHARS]
    if unusable:
        failures = (base.failures if is_unusable(health) else 0) + 1
        text = f"{UNUSABLE} {failures} time{'s' if failures > 1 else ''} in a row; last: {text}"[:ERROR_CHARS]
        transient = failures < UNUSABLE_BEFORE_PAUSE
    else:
        failures = (0 if is_unusable(health) else base.failures) + 1
    stamp = datetime.fromtimestamp(now, UTC).isoformat()
    if not transient:
        return replace(
            base,
            state="paused",
            failures=failures,
            next_attempt_at=0.0,
            last_error=text,
            last_failure_at=stamp,
            config_hash=fingerprint(target),
        )
    delay = min(BACKOFF_INITIAL_SECONDS * 2 ** (failures - 1), BACKOFF_MAX_SECONDS)
    return replace(
        base,
        state="backoff",
        failures=failures,
        next_attempt_at=now + delay,
        last_error=text,
        last_failure_at=stamp,
        config_hash=None,
    )


def after_success(health: ModelHealth | None, target: ModelTarget) -> ModelHealth | None:
    """The closed breaker, or None when nothing needs writing."""
    if health is None or (health.state == "ok" and health.failures == 0):
        return None
    return ModelHealth(model=target.model)
