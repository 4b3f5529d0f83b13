"""A token bucket per caller: `per_minute` requests a minute, in bursts of up to as many."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

MAX_TRACKED = 10_000  # callers remembered; full buckets are forgotten first


@dataclass
class _Bucket:
    tokens: float
    updated: float


class RateLimiter:
    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        if per_minute <= 0:
            raise ValueError("per_minute must be > 0")
        self.per_minute = per_minute
        self._rate = per_minute / 60.0  # tokens per second
        self._clock = clock
        self._buckets: dict[str, _Bucket] = {}

    def take(self, key: str) -> float:
        """Spend one request for `key`: 0.0 if allowed, else the seconds until one is."""
        now = self._clock()
        bucket = self._buckets.get(key)
        if bucket is None:
            if len(self._buckets) >= MAX_TRACKED:
                self._forget_full(now)
            bucket = self._buckets[key] = _Bucket(float(self.per_minute), now)
        bucket.tokens = min(float(self.per_minute), bucket.tokens + (now - bucket.updated) * self._rate)
        bucket.updated = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return 0.0
        return (1.0 - bucket.tokens) / self._rate

    def retry_after(self, wait: float) -> int:
        """Whole seconds for a Retry-After header."""
        return max(1, math.ceil(wait))

    def _forget_full(self, now: float) -> None:
        refill = self.per_minute / self._rate  # seconds an empty bucket takes to fill
        for key in [k for k, b in self._buckets.items() if now - b.updated >= refill]:
            del self._buckets[key]
        if len(self._buckets) >= MAX_TRACKED:  # all busy: drop the oldest half
            for key in sorted(self._buckets, key=lambda k: self._buckets[k].updated)[: MAX_TRACKED // 2]:
                del self._buckets[key]
