"""Spend caps: observation and reflection pause when a day's or a month's spend reaches its cap.

Every model call the Observer and Reflector make (extractors' follow-ups included)
is added to the store's spend table by UTC day and model, in dollars when the call
had a price (litellm's offline cost map; the `claude` CLI's own total) and always in
tokens (input + output). Because the table is in the database, every process on it
adds to the same totals and stops at the same cap.

When a cap is reached no new cycle starts: the status says which cap and when it
resumes ("daily budget of $0.50 reached; resumes at 00:00 UTC"), messages stay
unobserved (nothing is lost), and the backlog is observed once a new day or month
begins. A call already running when the cap is reached finishes, so a cap can be
passed by the calls in flight at that moment, never by a new one.

The clock is injected (`clock`), so tests move time instead of waiting for it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from om_mcp.config import BudgetConfig
from om_mcp.logs import one_line
from om_mcp.models.base import Completion
from om_mcp.store import Store
from om_mcp.store.rows import SpendDay

log = logging.getLogger(__name__)
Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class Period:
    """The UTC day and month containing an instant, and when each ends."""

    day: str  # 2026-03-02
    month: str  # 2026-03
    next_day: datetime
    next_month: datetime

    @classmethod
    def of(cls, now: datetime) -> Period:
        now = now.astimezone(UTC)
        start = datetime(now.year, now.month, now.day, tzinfo=UTC)
        month_start = datetime(now.year, now.month, 1, tzinfo=UTC)
        next_month = datetime(now.year + (now.month == 12), now.month % 12 + 1, 1, tzinfo=UTC)
        return cls(start.date().isoformat(), month_start.strftime("%Y-%m"), start + timedelta(days=1), next_month)

    @property
    def first_day_of_month(self) -> str:
        return f"{self.month}-01"


@dataclass(frozen=True)
class Spend:
    calls: int = 0
    tokens: int = 0
    usd: float = 0.0
    unpriced_calls: int = 0

    @classmethod
    def total(cls, rows: list[SpendDay]) -> Spend:
        return cls(
            calls=sum(r.calls for r in rows),
            tokens=sum(r.input_tokens + r.output_tokens for r in rows),
            usd=sum(r.usd for r in rows),
            unpriced_calls=sum(r.unpriced_calls for r in rows),
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "tokens": self.tokens,
            "usd": round(self.usd, 6),
            "unpriced_calls": self.unpriced_calls,
        }


@dataclass(frozen=True)
class BudgetState:
    day: Spend
    month: Spend
    caps: dict[str, float | int]  # the caps that are set, by their config key
    reached: str | None  # the cap reached first, by its config key
    reason: str | None  # "daily budget of $0.50 reached; resumes at 00:00 UTC"
    resumes_at: datetime | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "today": self.day.as_dict(),
            "this_month": self.month.as_dict(),
            "caps": self.caps,
            "reached": self.reached,
            "reason": self.reason,
            "resumes_at": self.resumes_at.isoformat() if self.resumes_at else None,
        }


def money(usd: float) -> str:
    """$0.50, $12.00; a fraction of a cent keeps its digits ($0.0042)."""
    return f"${usd:,.2f}" if usd >= 0.01 or usd == 0 else f"${usd:.4f}"


def judge(config: BudgetConfig, period: Period, day: Spend, month: Spend) -> BudgetState:
    """Which cap, if any, the spend has reached, and what the status says about it. Pure."""
    caps = {
        key: value
        for key, value in (
            ("daily_usd", config.daily_usd),
            ("daily_tokens", config.daily_tokens),
            ("monthly_usd", config.monthly_usd),
            ("monthly_tokens", config.monthly_tokens),
        )
        if value is not None
    }
    spent = {"daily_usd": day.usd, "daily_tokens": day.tokens, "monthly_usd": month.usd, "monthly_tokens": month.tokens}
    # A month's cap outlasts a day's: name it first, it says when observation really resumes.
    for key in ("monthly_usd", "monthly_tokens", "daily_usd", "daily_tokens"):
        cap = caps.get(key)
        if cap is None or spent[key] < cap:
            continue
        amount = money(float(cap)) if key.endswith("usd") else f"{int(cap):,} tokens"
        if key.startswith("daily"):
            resumes, when = period.next_day, "at 00:00 UTC"
        else:
            resumes, when = period.next_month, f"on {period.next_month.date().isoformat()} at 00:00 UTC"
        label = "daily" if key.startswith("daily") else "monthly"
        return BudgetState(day, month, caps, key, f"{label} budget of {amount} reached; resumes {when}", resumes)
    return BudgetState(day, month, caps, None, None, None)


class Budget:
    """The spend meter (`record`, given to the model routers) and the caps (`state`)."""

    def __init__(self, store: Store, config: BudgetConfig, clock: Clock | None = None):
        self.store = store
        self.config = config
        self.clock = clock or utc_now

    async def state(self) -> BudgetState:
        period = Period.of(self.clock())
        rows = await self.store.spend_since(period.first_day_of_month)
        today = [r for r in rows if r.day == period.day]
        return judge(self.config, period, Spend.total(today), Spend.total(rows))

    async def paused(self) -> str | None:
        """Why no cycle may start now, or None (no cap set: no read at all)."""
        if not self.config.any:
            return None
        return (await self.state()).reason

    async def record(self, completion: Completion) -> None:
        """Add one call to today's spend. A failed write is logged, never the call's failure."""
        usage = completion.usage
        try:
            await self.store.add_spend(
                Period.of(self.clock()).day, completion.model, usage.input_tokens, usage.output_tokens, usage.cost
            )
        except Exception as error:  # noqa: BLE001 - the call itself succeeded; its result must not be lost
            log.warning("could not record a model call's spend: %s", one_line(error))
