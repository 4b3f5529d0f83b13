"""Spend caps: a call is made only when its estimated cost fits under every cap, whichever process makes it.

Every model call the Observer and Reflector make (extractors' follow-ups included), whoever serves
it (a provider through litellm, the `claude` CLI, MCP sampling), goes through this meter, which each
request reserves before it leaves and settles after (`models.base.Meter`, `Metered`):

1. before the call, its estimate is *reserved* in the database (store/spend.py): our own count of
   the prompt plus a margin for the provider's tokenizer, and the output it may write, priced from
   litellm's offline cost map or the configured price. In one step every process on the database
   takes in turn, the day's and the month's spend plus the reservations still open are checked
   against the caps: a call that would pass one is not made (`CapReached`), and the status says why
   and when observation resumes. Under a cap the call's output is limited to what was reserved, so
   the estimate bounds what the call can cost;
2. after the call, the reservation is *settled* with the larger of the provider's count and ours
   (a provider that reports zero usage, and MCP sampling, which reports none, are counted by ours),
   in dollars the larger of the provider's figure and our count priced;
3. a call we stopped waiting for (our timeout, a cancellation) is counted at its estimate, since
   the provider may have done the work; one whose process died is folded in at its estimate once
   its time is up; one the provider answered with an error is a call that cost nothing; one that
   never reached a model (no connection, no sampling client) is no call.

Every request is metered where it leaves (`models.base.Metered`, the only way a router reaches a
client): first attempts, retries, fallbacks, size tiers, the Observer's second try after a looping or
empty answer, the Reflector's compression levels, extractors' follow-ups, MCP sampling. So the calls
recorded here are the requests a provider received, one for one (tests/test_meter.py).

So the recorded spend passes a cap by at most what one call's estimate undercounts (a provider's
tokenizer counting beyond our margin), never by the calls in flight. The spend is kept by UTC day
and model, in dollars when the call had a price and always in tokens (input + output).

When a cap is reached no new cycle starts: messages stay unobserved (nothing is lost), and the
backlog is observed once a new day or month begins. The clock is injected (`clock`), so tests move
time instead of waiting for it.
"""

from __future__ import annotations

import logging
import math
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio

from om_mcp.config import BudgetConfig
from om_mcp.config.models import ModelSettings, ModelTarget
from om_mcp.engine.tokens import IMAGE_FALLBACK, PER_CONVERSATION, PER_MESSAGE, TokenCounter
from om_mcp.logs import one_line
from om_mcp.models import prices
from om_mcp.models.base import Completion
from om_mcp.models.errors import CapReached, ModelError, UnusableAnswer
from om_mcp.store import Store, Transaction
from om_mcp.store.rows import Reservation, SpendDay

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

    @property
    def month_days(self) -> tuple[str, str]:
        """The first day of this month and of the next one."""
        return self.first_day_of_month, self.next_month.date().isoformat()


@dataclass(frozen=True)
class Spend:
    """A period's spend: settled calls, plus the reservations of the calls in flight (in the totals too)."""

    calls: int = 0
    tokens: int = 0
    usd: float = 0.0
    unpriced_calls: int = 0
    abandoned_calls: int = 0
    refused_calls: int = 0
    reserved_tokens: int = 0
    reserved_usd: float = 0.0
    # The estimate of the last call a cap refused (0 once a call fits again): a reason to wait.
    refused_tokens: int = 0
    refused_usd: float = 0.0

    @classmethod
    def total(cls, rows: list[SpendDay], reserved: Iterable[tuple[str, str, int, float]] = ()) -> Spend:
        held = list(reserved)
        return cls(
            calls=sum(r.calls for r in rows),
            tokens=sum(r.input_tokens + r.output_tokens for r in rows) + sum(r[2] for r in held),
            usd=sum(r.usd for r in rows) + sum(r[3] for r in held),
            unpriced_calls=sum(r.unpriced_calls for r in rows),
            abandoned_calls=sum(r.abandoned_calls for r in rows),
            refused_calls=sum(r.refused_calls for r in rows),
            reserved_tokens=sum(r[2] for r in held),
            reserved_usd=sum(r[3] for r in held),
            refused_tokens=max((r.refused_tokens for r in rows), default=0),
            refused_usd=max((r.refused_usd for r in rows), default=0.0),
        )

    def spent(self, cap: str) -> float:
        return self.usd if cap.endswith("usd") else self.tokens

    def refused(self, cap: str) -> float:
        return self.refused_usd if cap.endswith("usd") else self.refused_tokens

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "calls": self.calls,
            "tokens": self.tokens,
            "usd": round(self.usd, 6),
            "unpriced_calls": self.unpriced_calls,
        }
        # Only what is not nothing: most days have no call in flight, abandoned or refused.
        for key in ("abandoned_calls", "refused_calls", "reserved_tokens"):
            if getattr(self, key):
                out[key] = getattr(self, key)
        if self.reserved_usd:
            out["reserved_usd"] = round(self.reserved_usd, 6)
        return out


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


# The estimate: our count of the prompt plus this share, for a provider whose tokenizer counts more.
INPUT_MARGIN = 1.25
# The output a call may write, under a cap: what its settings allow, at most its input's size (an
# Observer's log, a Reflector's condensed one and an extractor's value are shorter than what they read)
# and at least this.
OUTPUT_FLOOR = 1024
# Without a max_output_tokens, what a reservation counts the output at (no cap: nothing is limited).
OUTPUT_UNBOUNDED = 8192
# A reservation never settled counts as an abandoned call this long after the call's whole time budget.
SETTLE_GRACE_SECONDS = 60.0


def prompt_tokens(counter: TokenCounter, messages: list[dict[str, Any]]) -> int:
    """Our count of what a call sends (OpenAI-style chat messages), as the engine counts messages."""
    total = 0.0
    for message in messages:
        content = message.get("content")
        items = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        for item in items:
            if item.get("type") == "text":
                total += counter.count_text(item.get("text") or "")
            elif item.get("type") in ("image_url", "image", "file"):
                total += IMAGE_FALLBACK
        total += counter.count_text(str(message.get("role") or "")) + PER_MESSAGE
    return math.ceil(total + PER_CONVERSATION) if messages else 0


def rates(config: BudgetConfig, model: str) -> tuple[float, float] | None:
    """Dollars per (input, output) token: litellm's offline price, else the configured one, else None."""
    return prices.per_token(model) or config.price


def price_refusal(config: BudgetConfig, models: Iterable[str]) -> str | None:
    """Why a dollar cap cannot hold for these models (one line naming the options), or None."""
    if not config.dollars or config.price is not None:
        return None
    unpriced = [m for m in dict.fromkeys(models) if prices.per_token(m) is None]
    if not unpriced:
        return None
    cap = "daily_usd" if config.daily_usd is not None else "monthly_usd"
    names = ", ".join(repr(m) for m in unpriced)
    return (
        f"observational_memory.budget.{cap} is set, but litellm's cost map has no price for {names}: set"
        " observational_memory.budget.price_per_million_input and price_per_million_output (dollars per"
        " million tokens), or cap tokens instead (daily_tokens, monthly_tokens)"
    )


@dataclass
class Ticket:
    """One call's reservation, as the meter settles it."""

    id: str
    model: str
    input_tokens: int  # the estimate
    output_tokens: int
    prompt_tokens: int  # our count of what was sent
    rates: tuple[float, float] | None
    day: str


class Budget:
    """The spend meter the model routers call around each attempt (`reserve`, `settle`), and the caps
    (`state`, `paused`)."""

    def __init__(
        self,
        store: Store | Transaction,  # a Transaction: the caps read synchronously (`Recorder.spend_paused`)
        config: BudgetConfig,
        counter: TokenCounter | None = None,
        clock: Clock | None = None,
        *,
        ttl: float = 45.0,
    ):
        self.store = store
        self.config = config
        self.counter = counter or TokenCounter()
        self.clock = clock or utc_now
        self.ttl = ttl + SETTLE_GRACE_SECONDS

    def _caps(self) -> dict[str, float]:
        return {
            key: float(value)
            for key, value in (
                ("daily_usd", self.config.daily_usd),
                ("daily_tokens", self.config.daily_tokens),
                ("monthly_usd", self.config.monthly_usd),
                ("monthly_tokens", self.config.monthly_tokens),
            )
            if value is not None
        }

    async def state(self) -> BudgetState:
        period = Period.of(self.clock())
        first = period.first_day_of_month
        rows = await self.store.spend_since(first)
        held = await self.store.open_reservations(first)
        today = Spend.total([r for r in rows if r.day == period.day], [r for r in held if r[0] == period.day])
        month = Spend.total(rows, held)
        state = judge(self.config, period, today, month)
        if state.reason is not None:
            return state
        # A call refused for its estimate (by any process): wait while it still would not fit.
        for cap, limit in sorted(self._caps().items(), key=lambda item: item[0].startswith("daily")):
            spend = today if cap.startswith("daily") else month
            asked = spend.refused(cap)
            if asked and spend.spent(cap) + asked > limit:
                why = _refusal(cap, asked, limit, max(0.0, limit - spend.spent(cap)), period)
                resumes = period.next_day if cap.startswith("daily") else period.next_month
                return BudgetState(today, month, state.caps, cap, why, resumes)
        return state

    async def paused(self) -> str | None:
        """Why no cycle may start now, or None (no cap set: no read at all)."""
        if not self.config.any:
            return None
        return (await self.state()).reason

    # -- the meter (models.base.Meter) -------------------------------------------------------

    def estimate(self, messages: list[dict[str, Any]], settings: ModelSettings) -> tuple[int, int, int]:
        """(our count of the prompt, the input estimate, the output allowance) of one call."""
        ours = prompt_tokens(self.counter, messages)
        allowed = settings.max_output_tokens or OUTPUT_UNBOUNDED
        if self.config.any:
            allowed = min(allowed, max(OUTPUT_FLOOR, ours))
        return ours, math.ceil(ours * INPUT_MARGIN), allowed

    async def reserve(
        self, messages: list[dict[str, Any]], target: ModelTarget, settings: ModelSettings
    ) -> tuple[Any, ModelSettings]:
        """Hold the call's estimate against the caps (all processes in turn); CapReached when it does not fit.
        Under a cap the call may write only the output reserved for it."""
        ours, input_tokens, output_tokens = self.estimate(messages, settings)
        price = rates(self.config, target.model)
        usd = input_tokens * price[0] + output_tokens * price[1] if price else None
        period = Period.of(self.clock())
        ticket = Ticket(uuid.uuid4().hex, target.model, input_tokens, output_tokens, ours, price, period.day)
        reservation = Reservation(ticket.id, period.day, target.model, input_tokens, output_tokens, usd, self.ttl)
        outcome = await self.store.reserve_spend(reservation, self._caps(), period.month_days)
        if not outcome.made:
            cap = outcome.refused_by or ""
            asked = (usd or 0.0) if cap.endswith("usd") else float(input_tokens + output_tokens)
            limit = self._caps()[cap]
            left = max(0.0, limit - outcome.totals.spent(cap))
            raise CapReached(_refusal(cap, asked, limit, left, period), model=target.model)
        if self.config.any and settings.max_output_tokens != output_tokens:
            settings = settings.model_copy(update={"max_output_tokens": output_tokens})
        return ticket, settings

    async def settle(self, ticket: Any, completion: Completion | None, error: BaseException | None) -> None:
        """Replace the reservation by what the call used. A failed write is logged, never the call's failure."""
        assert isinstance(ticket, Ticket)
        try:
            if completion is not None:
                usage = completion.usage
                spent_in = max(usage.input_tokens, ticket.prompt_tokens)
                spent_out = max(usage.output_tokens, self.counter.count_text(completion.text))
                usd = _larger(usage.cost, _priced(ticket.rates, spent_in, spent_out))
                await self.store.settle_spend(ticket.id, spent_in, spent_out, usd, model=completion.model)
            elif _abandoned(error):
                await self.store.settle_spend(ticket.id, 0, 0, None, abandoned=True)
            elif isinstance(error, UnusableAnswer):  # it answered: what it read was spent
                usd = _priced(ticket.rates, ticket.prompt_tokens, 0)
                await self.store.settle_spend(ticket.id, ticket.prompt_tokens, 0, usd)
            elif isinstance(error, ModelError) and error.reached:  # answered with an error: a call, nothing used
                await self.store.settle_spend(ticket.id, 0, 0, 0.0)
            else:  # it never reached a model (no connection, no client): no call
                await self.store.settle_spend(ticket.id, 0, 0, None, released=True)
        except Exception as problem:  # noqa: BLE001 - unsettled, it counts at its estimate when its time is up
            log.warning("could not record a model call's spend: %s", one_line(problem))


def _abandoned(error: BaseException | None) -> bool:
    """Did we stop waiting for the call (our timeout, a cancellation, a crash of the client), so that the
    provider may have done the work all the same?"""
    if error is None or isinstance(error, TimeoutError | anyio.get_cancelled_exc_class()):
        return True
    if isinstance(error, ModelError):
        return error.timed_out
    return True  # not a failure a client reports: the call may have been made


def _priced(price: tuple[float, float] | None, input_tokens: int, output_tokens: int) -> float | None:
    return input_tokens * price[0] + output_tokens * price[1] if price else None


def _larger(first: float | None, second: float | None) -> float | None:
    known = [v for v in (first, second) if v is not None]
    return max(known) if known else None


def _refusal(cap: str, asked: float, limit: float, left: float, period: Period) -> str:
    """Why a call was not made, and what lifts it (one line)."""
    label = "daily" if cap.startswith("daily") else "monthly"

    def amount(value: float) -> str:
        return money(value) if cap.endswith("usd") else f"{int(value):,} tokens"

    if cap.startswith("daily"):
        when = "at 00:00 UTC"
    else:
        when = f"on {period.next_month.date().isoformat()} at 00:00 UTC"
    if asked > limit:
        option = "observation.message_tokens" if not cap.endswith("usd") else "observation.message_tokens or the model"
        return (
            f"a call's estimate ({amount(asked)}) is more than the whole {label} budget of {amount(limit)}: raise"
            f" observational_memory.budget.{cap}, or lower {option}"
        )
    return (
        f"{label} budget of {amount(limit)} nearly reached: the next call's estimate ({amount(asked)}) is more than"
        f" what is left ({amount(left)}); resumes {when}"
    )
