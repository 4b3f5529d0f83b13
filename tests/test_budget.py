"""Spend caps: observation and reflection pause when a day's or a month's spend reaches its cap,
with a calm status saying when they resume; nothing is lost, and the backlog is observed once
the period is over. The spend is kept in the database, so every process on it stops at the same
cap. Time is an injected clock: no test waits for midnight."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from support.engine import config, msg, observer_reply
from support.mcp import connect, ok
from support.processes import PYTHON, clean_env
from support.timeouts import scaled

from om_mcp.config import BudgetConfig, Config, ConfigError, load_config
from om_mcp.engine import Memory
from om_mcp.engine.budget import Period, Spend, judge
from om_mcp.models.base import Completion, Usage
from om_mcp.server import build_server
from om_mcp.testing import ScriptedModel
from om_mcp.testing.fake_server import FakeLLMServer, FakeReply

LATE = datetime(2026, 3, 31, 23, 30, tzinfo=UTC)  # half an hour before a new day and a new month


class Clock:
    def __init__(self, now: datetime):
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def priced(tokens: int = 100, cost: float | None = None) -> ScriptedModel:
    """An Observer whose every call uses `tokens` (in + out) and costs `cost` dollars."""

    def reply(messages, target):
        return Completion(
            text=observer_reply(["a fact"]),
            model=target.model,
            usage=Usage(input_tokens=tokens - 10, output_tokens=10, cost=cost),
        )

    return ScriptedModel(reply)


def capped(db: Path, **budget) -> Config:
    made = config(observation__message_tokens=150, **{f"budget__{k}": v for k, v in budget.items()})
    return made.model_copy(update={"db_path": db})


def test_periods_and_what_the_status_says():
    period = Period.of(datetime(2026, 12, 31, 22, 0, tzinfo=UTC))
    assert (period.day, period.month) == ("2026-12-31", "2026-12")
    assert period.next_day == datetime(2027, 1, 1, tzinfo=UTC) == period.next_month
    caps = BudgetConfig(daily_usd=0.5, monthly_tokens=1_000_000)
    assert judge(caps, period, Spend(usd=0.49), Spend(usd=0.49)).reason is None
    state = judge(caps, period, Spend(usd=0.5), Spend(usd=0.5, tokens=10))
    assert (state.reached, state.reason) == ("daily_usd", "daily budget of $0.50 reached; resumes at 00:00 UTC")
    state = judge(caps, Period.of(LATE), Spend(usd=0.6), Spend(tokens=1_000_000))
    assert state.reason == "monthly budget of 1,000,000 tokens reached; resumes on 2026-04-01 at 00:00 UTC"
    assert state.resumes_at == datetime(2026, 4, 1, tzinfo=UTC)  # the month's cap outlasts the day's


def test_a_budget_that_is_not_a_positive_number_is_refused_at_start_naming_the_key(tmp_path: Path):
    for key, value in (
        ("daily_usd", "0"),
        ("monthly_usd", "-1"),
        ("daily_tokens", "1.5"),
        ("monthly_tokens", '"lots"'),
    ):
        with pytest.raises(ConfigError, match=rf"observational_memory\.budget\.{key}: must be a positive"):
            load_config(env={f"OM_OBSERVATIONAL_MEMORY__BUDGET__{key.upper()}": value})
    done = subprocess.run(
        [PYTHON, "-m", "om_mcp", "serve"],
        env={**clean_env(tmp_path), "OM_OBSERVATIONAL_MEMORY__BUDGET__DAILY_USD": "0"},
        capture_output=True,
        timeout=scaled(60),
    )
    assert done.returncode == 2 and b"observational_memory.budget.daily_usd" in done.stderr


@pytest.mark.anyio
async def test_a_cap_reached_mid_backlog_pauses_both_processes_and_the_backlog_waits_for_the_next_day(tmp_path):
    """Two memories on one database (two processes, as far as the database can tell), each
    with its own clock: what one spends, the other counts."""
    db = tmp_path / "om.db"
    first_clock, second_clock = Clock(LATE - timedelta(days=1)), Clock(LATE - timedelta(days=1))
    first = await Memory.open(capped(db, daily_tokens=250), client=priced(100), clock=first_clock)
    second = await Memory.open(capped(db, daily_tokens=250), client=priced(100), clock=second_clock)
    try:
        for n in range(0, 16, 2):  # each turn past the threshold observes, until the cap stops it
            await first.append_messages("t", [msg(n, words=60), msg(n + 1, words=60)])
        assert not (await first.observe("t")).ran
        status = await first.status("t")
        assert status.observation.reason == "daily budget of 250 tokens reached; resumes at 00:00 UTC"
        assert status.observation.budget_paused and status.spend["today"] == {
            "calls": 3,
            "tokens": 300,
            "usd": 0.0,
            "unpriced_calls": 3,
        }
        waiting = status.unobserved_messages
        assert waiting > 0  # nothing lost: the rest of the backlog is still there, unobserved
        elsewhere = await second.observe("t")
        assert not elsewhere.ran and elsewhere.reason == status.observation.reason
        assert (await second.status("t")).unobserved_messages == waiting
        second_clock.now = first_clock.now = LATE  # the next day: the cap is counted afresh
        assert (await second.status("t")).observation.reason is None
        resumed = await second.observe("t")
        assert resumed.ran and (await second.status("t")).unobserved_messages < waiting
    finally:
        await first.close()
        await second.close()


@pytest.mark.anyio
async def test_dollars_are_counted_where_a_price_is_known(tmp_path):
    db = tmp_path / "om.db"
    clock = Clock(LATE)
    memory = await Memory.open(capped(db, daily_usd=0.5), client=priced(100, cost=0.3), clock=clock)
    try:
        async with connect(build_server(memory.config, memory)) as client:
            for n in range(0, 12, 2):
                await ok(client, "append_messages", thread_id="t", messages=[msg(n, words=60), msg(n + 1, words=60)])
            await ok(client, "observe", thread_id="t")
            context = await ok(client, "get_context", thread_id="t", include_status=True)
        status = context["status"]
        assert status["reason"] == "daily budget of $0.50 reached; resumes at 00:00 UTC"
        assert status["spend"] == {
            "today": {"usd": 0.6, "tokens": 200},
            "month": {"usd": 0.6, "tokens": 200},
            "caps": {"daily_usd": 0.5},
        }
    finally:
        await memory.close()


@pytest.mark.slow
def test_a_cap_holds_for_processes_that_share_the_database(tmp_path: Path):
    """`om-mcp observe` in its own process, through litellm to the scripted server, spends the
    month's tokens; the status another process reads says observation is paused, and why."""
    db = tmp_path / "om.db"
    env = clean_env(
        tmp_path,
        OM_DB_PATH=str(db),
        OM_OBSERVATIONAL_MEMORY__SCOPE="thread",
        OM_OBSERVATIONAL_MEMORY__OBSERVATION__MESSAGE_TOKENS="150",
        OM_OBSERVATIONAL_MEMORY__BUDGET__MONTHLY_TOKENS="1000",
    )
    append = (
        "import anyio, sys\nfrom om_mcp.config import load_config\nfrom om_mcp.engine import Memory\n"
        "async def main():\n    async with await Memory.open(load_config()) as m:\n"
        "        for n in range(10):\n"
        "            await m.append_messages('t', [{'id': f'm{n}', 'role': 'user' if n % 2 == 0 else 'assistant',"
        " 'content': f'message {n} ' + 'words ' * 80}])\nanyio.run(main)\n"
    )
    assert subprocess.run([PYTHON, "-c", append], env=env, capture_output=True, timeout=scaled(120)).returncode == 0
    with FakeLLMServer() as server:
        server.responder = lambda request: FakeReply(
            observer_reply(["a fact"]), usage={"prompt_tokens": 590, "completion_tokens": 10}
        )
        model = json.dumps({"model": "openai/fake", "api_base": server.base_url})
        observed = subprocess.run(
            [PYTHON, "-m", "om_mcp", "observe", "t", "--json"],
            env={**env, "OM_MODEL": model},
            capture_output=True,
            text=True,
            timeout=scaled(180),
        )
        assert observed.returncode == 0, observed.stderr
        assert len(server.requests) == 2  # 600 tokens, then 1,200: the third call is never made
        status = json.loads(
            subprocess.run(
                [PYTHON, "-m", "om_mcp", "status", "--json"],
                env={**env, "OM_MODEL": model},
                capture_output=True,
                timeout=scaled(60),
            ).stdout
        )
    spend = status["spend"]
    assert spend["this_month"]["tokens"] == 1200 and spend["caps"] == {"monthly_tokens": 1000}
    assert spend["reason"].startswith("monthly budget of 1,000 tokens reached; resumes on ")
    assert status["model"]["reason"] == spend["reason"]
