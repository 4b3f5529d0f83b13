"""Windows a model answered with nothing usable are not sent again until something changed.

The breaker (`models/health.py`) spaces out the calls of a model that keeps answering
with nothing usable, and pauses it. But one window can be refused while others succeed
(a content filter on one conversation), and every success closes the breaker. So each
refused window is remembered here, per record, kind of cycle and thread: the same
window (same start) goes to the model again only once it has grown by a buffering
interval of new tokens, the model choice changed, or its own backoff expired (the
breaker's delays). After UNUSABLE_BEFORE_PAUSE refusals only new tokens or another
model bring it back. A manual cycle (someone asked) is never held.

This is kept in the process; other processes on the database learn from the breaker.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from om_mcp.models.health import BACKOFF_INITIAL_SECONDS, BACKOFF_MAX_SECONDS, UNUSABLE_BEFORE_PAUSE

Slot = tuple[str, str, str]  # (record key, kind of cycle, thread id)


@dataclass
class Refusal:
    window: tuple  # where the refused window started
    tokens: int  # its size when it was refused
    model: str
    times: int
    retry_at: float  # monotonic seconds


class Refusals:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._held: dict[Slot, Refusal] = {}

    def held(self, slot: Slot, window: tuple, tokens: int, model: str, interval: int) -> str | None:
        """Why this window is not sent now (None: send it)."""
        refusal = self._held.get(slot)
        if refusal is None:
            return None
        if refusal.window != window or refusal.model != model or tokens >= refusal.tokens + interval:
            del self._held[slot]  # something changed: a new window
            return None
        wait = refusal.retry_at - self.clock()
        if refusal.times < UNUSABLE_BEFORE_PAUSE and wait <= 0:
            return None
        when = f"or in {int(wait) + 1} s" if refusal.times < UNUSABLE_BEFORE_PAUSE else "(or another model)"
        return (
            f"the model answered these messages with nothing usable {refusal.times} time(s); they are sent"
            f" again after {refusal.tokens + interval - tokens} more tokens {when}"
        )

    def refused(self, slot: Slot, window: tuple, tokens: int, model: str) -> None:
        earlier = self._held.get(slot)
        times = earlier.times + 1 if earlier is not None and earlier.window == window else 1
        delay = min(BACKOFF_INITIAL_SECONDS * 2 ** (times - 1), BACKOFF_MAX_SECONDS)
        self._held[slot] = Refusal(window, tokens, model, times, self.clock() + delay)

    def done(self, slot: Slot) -> None:
        self._held.pop(slot, None)
