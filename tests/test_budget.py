"""Spend caps that cap: every call's estimate is reserved in the database before it is made and
settled after with the larger of the provider's count and ours, so the recorded spend never
passes a cap by more than one call's estimate, whichever processes make the calls. A call whose
own estimate does not fit is never made; a provider reporting no usage and MCP sampling are
counted by our count; a call we stopped waiting for, or whose process died, counts at its
estimate; a dollar cap on a model with no price refuses to start. Observation pauses with a calm
status saying why and until when; nothing is lost. Time is an injected clock: no test waits for
midnight."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
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
from om_mcp.server.sampling import SamplingBroker
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


def test_a_configured_price_has_both_sides():
    with pytest.raises(ConfigError, match=r"budget: .*price_per_million_output must be set too"):
        load_config(env={"OM_OBSERVATIONAL_MEMORY__BUDGET__PRICE_PER_MILLION_INPUT": "0.1"})
    with pytest.raises(ConfigError, match=r"budget\.price_per_million_input: must be a number of dollars"):
        load_config(env={"OM_OBSERVATIONAL_MEMORY__BUDGET__PRICE_PER_MILLION_INPUT": "-1"})


def test_a_dollar_cap_on_a_model_litellm_cannot_price_refuses_to_start_unless_a_price_is_set(tmp_path: Path):
    env = clean_env(
        tmp_path,
        OM_DB_PATH=str(tmp_path / "om.db"),
        OM_MODEL="openai/my-local-model",
        OM_OBSERVATIONAL_MEMORY__BUDGET__DAILY_USD="0.5",
    )
    for command in (["serve"], ["observe", "t"]):
        done = subprocess.run([PYTHON, "-m", "om_mcp", *command], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 2, done.stderr
        (line,) = [line for line in done.stderr.splitlines() if line.startswith("om-mcp:")]
        assert "observational_memory.budget.daily_usd is set" in line and "'openai/my-local-model'" in line
        assert "price_per_million_input and price_per_million_output" in line
    priced = {
        **env,
        "OM_OBSERVATIONAL_MEMORY__BUDGET__PRICE_PER_MILLION_INPUT": "0.1",
        "OM_OBSERVATIONAL_MEMORY__BUDGET__PRICE_PER_MILLION_OUTPUT": "0.4",
    }
    done = subprocess.run([PYTHON, "-m", "om_mcp", "status", "--json"], env=priced, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    tokens = {k: v for k, v in env.items() if k != "OM_OBSERVATIONAL_MEMORY__BUDGET__DAILY_USD"}
    tokens["OM_OBSERVATIONAL_MEMORY__BUDGET__DAILY_TOKENS"] = "9"
    done = subprocess.run([PYTHON, "-m", "om_mcp", "status", "--json"], env=tokens, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr  # a token cap needs no price


@pytest.mark.anyio
async def test_a_cap_reached_mid_backlog_pauses_both_processes_and_the_backlog_waits_for_the_next_day(tmp_path):
    """Two memories on one database (two processes, as far as the database can tell), each with its
    own clock: what one spends, the other counts. The provider says 100 tokens a call; our count of
    what was sent is larger, and that is what is recorded."""
    db = tmp_path / "om.db"
    first_clock, second_clock = Clock(LATE - timedelta(days=1)), Clock(LATE - timedelta(days=1))
    first = await Memory.open(capped(db, daily_tokens=6000), client=priced(100), clock=first_clock)
    second = await Memory.open(capped(db, daily_tokens=6000), client=priced(100), clock=second_clock)
    try:
        for n in range(0, 16, 2):  # each turn past the threshold observes, until the cap stops it
            await first.append_messages("t", [msg(n, words=60), msg(n + 1, words=60)])
        assert not (await first.observe("t")).ran
        status = await first.status("t")
        assert status.observation.budget_paused
        assert status.observation.reason.startswith("daily budget of 6,000 tokens nearly reached: the next call")
        assert status.observation.reason.endswith("; resumes at 00:00 UTC")
        today = status.spend["today"]
        assert today["calls"] >= 1 and today["tokens"] > 100 * today["calls"]  # our count, not the provider's
        assert today["tokens"] <= 6000 and today["refused_calls"] >= 1 and "reserved_tokens" not in today
        waiting = status.unobserved_messages
        assert waiting > 0  # nothing lost: the rest of the backlog is still there, unobserved
        elsewhere = await second.observe("t")
        assert not elsewhere.ran and elsewhere.reason == status.observation.reason  # read from the database
        assert (await second.status("t")).unobserved_messages == waiting
        assert (await second.status("t")).spend["today"]["tokens"] <= 6000
        second_clock.now = first_clock.now = LATE  # the next day: the cap is counted afresh
        assert (await second.status("t")).observation.reason is None
        resumed = await second.observe("t")
        assert resumed.ran and (await second.status("t")).unobserved_messages < waiting
    finally:
        await first.close()
        await second.close()


@pytest.mark.anyio
async def test_one_call_whose_own_estimate_exceeds_the_cap_is_never_made(tmp_path):
    """40 messages in one window against a 1,000-token cap: the call would cost many times the cap."""
    db = tmp_path / "om.db"
    model = priced(100)
    made = config(observation__message_tokens=100_000, budget__daily_tokens=1000).model_copy(update={"db_path": db})
    memory = await Memory.open(made, client=model, clock=Clock(LATE))
    try:
        await memory.append_messages("t", [msg(n, words=60) for n in range(40)])
        outcome = await memory.observe("t")
        assert not outcome.ran and model.calls == []
        status = await memory.status("t")
        reason = status.observation.reason or ""
        assert re.match(r"a call's estimate \(([\d,]+) tokens\) is more than the whole daily budget of 1,000", reason)
        assert "raise observational_memory.budget.daily_tokens" in reason
        assert status.spend["today"]["tokens"] == 0 and status.spend["today"]["refused_calls"] == 1
        assert status.unobserved_messages == 40
    finally:
        await memory.close()


@pytest.mark.anyio
async def test_three_processes_with_three_observations_each_stay_under_the_cap(tmp_path):
    """Three memories on one file (as three processes), three threads each observed at once: the
    reservations are taken in turn in the database, so what is recorded stays under the cap."""
    db = tmp_path / "om.db"
    cap = 10_000
    memories = [
        await Memory.open(capped(db, daily_tokens=cap), client=priced(100), clock=Clock(LATE)) for _ in range(3)
    ]
    try:
        for i, memory in enumerate(memories):
            for t in range(3):
                thread = f"p{i}-t{t}"
                await memory.append_messages(thread, [msg(n, words=60) for n in range(6)])
        outcomes: list = []

        async def observe(memory: Memory, thread: str) -> None:
            outcomes.append(await memory.observe(thread))

        async with anyio.create_task_group() as group:
            for i, memory in enumerate(memories):
                for t in range(3):
                    group.start_soon(observe, memory, f"p{i}-t{t}")
        today = (await memories[0].status("p0-t0")).spend["today"]
        assert today["tokens"] <= cap, today
        assert today["calls"] >= 1 and today["refused_calls"] >= 1  # some observed, the rest waited
        assert len(outcomes) == 9 and not all(o.ran for o in outcomes)
    finally:
        for memory in memories:
            await memory.close()


@pytest.mark.anyio
async def test_dollars_are_counted_where_a_price_is_known(tmp_path):
    """The provider's figure when it is the larger: $0.30 a call, more than litellm's price of what was sent."""
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
        spend = status["spend"]
        assert spend["today"]["usd"] == spend["month"]["usd"] == 0.6 and spend["caps"] == {"daily_usd": 0.5}
        assert spend["today"]["tokens"] > 200  # our count of what was sent, not the provider's 100 a call
    finally:
        await memory.close()


@pytest.mark.slow
def test_a_cap_holds_for_processes_that_share_the_database_and_a_provider_reporting_no_usage(tmp_path: Path):
    """`om-mcp observe` in its own process, through litellm to the scripted server, which reports
    zero usage: the calls are counted by our own count, the cap binds, and the status another
    process reads says observation is paused, and why."""
    db = tmp_path / "om.db"
    cap = 12_000
    env = clean_env(
        tmp_path,
        OM_DB_PATH=str(db),
        OM_OBSERVATIONAL_MEMORY__SCOPE="thread",
        OM_OBSERVATIONAL_MEMORY__OBSERVATION__MESSAGE_TOKENS="150",
        OM_OBSERVATIONAL_MEMORY__BUDGET__MONTHLY_TOKENS=str(cap),
    )
    append = (
        "import anyio, sys\nfrom om_mcp.config import load_config\nfrom om_mcp.engine import Memory\n"
        "async def main():\n    async with await Memory.open(load_config()) as m:\n"
        "        for n in range(30):\n"
        "            await m.append_messages('t', [{'id': f'm{n}', 'role': 'user' if n % 2 == 0 else 'assistant',"
        " 'content': f'message {n} ' + 'words ' * 80}])\nanyio.run(main)\n"
    )
    assert subprocess.run([PYTHON, "-c", append], env=env, capture_output=True, timeout=scaled(120)).returncode == 0
    with FakeLLMServer() as server:
        server.responder = lambda request: FakeReply(
            observer_reply(["a fact"]), usage={"prompt_tokens": 0, "completion_tokens": 0}
        )
        model = json.dumps({"model": "openai/fake", "api_base": server.base_url})
        observed = subprocess.run(
            [PYTHON, "-m", "om_mcp", "observe", "t", "--json"],
            env={**env, "OM_MODEL": model},
            capture_output=True,
            text=True,
            timeout=scaled(180),
        )
        assert observed.returncode in (0, 1), observed.stderr
        status = json.loads(
            subprocess.run(
                [PYTHON, "-m", "om_mcp", "status", "--json"],
                env={**env, "OM_MODEL": model},
                capture_output=True,
                timeout=scaled(60),
            ).stdout
        )
        requests = len(server.requests)
    spend = status["spend"]
    month = spend["this_month"]
    assert requests >= 1 and month["calls"] == requests
    assert month["tokens"] > 1000 * requests  # every call counted by what we sent, the provider said 0
    assert month["tokens"] <= cap and month["refused_calls"] >= 1
    assert spend["reason"].startswith(f"monthly budget of {cap:,} tokens nearly reached: the next call's estimate")
    assert status["model"]["reason"] == spend["reason"]


@pytest.mark.anyio
async def test_a_call_that_times_out_on_our_side_counts_at_its_estimate(tmp_path):
    """The provider may have done (and billed) the work: the call we stopped waiting for is abandoned,
    counted at its reservation."""
    never = anyio.Event()

    async def hangs(messages, target):
        await never.wait()

    db = tmp_path / "om.db"
    made = config(
        observation__message_tokens=150, budget__daily_tokens=50_000, call_policy__timeout_seconds=0.2
    ).model_copy(update={"db_path": db})
    memory = await Memory.open(made, client=ScriptedModel(hangs), clock=Clock(LATE))
    try:
        await memory.append_messages("t", [msg(0, words=60), msg(1, words=60)])
        outcome = await memory.observe("t")
        assert not outcome.ran
        today = (await memory.status("t")).spend["today"]
        # a manual observe tries again: each attempt is its own call, each counted at its estimate
        assert today["calls"] == today["abandoned_calls"] >= 1 and today["tokens"] > 1000 * today["calls"]
        assert "reserved_tokens" not in today  # settled, at the estimate
    finally:
        never.set()
        await memory.close()


def test_a_call_whose_process_dies_counts_at_its_estimate(tmp_path: Path):
    """`om-mcp observe` killed while the provider is still answering: its reservation stays, and
    every process counts it against the caps (the status shows it reserved)."""
    db = tmp_path / "om.db"
    env = clean_env(
        tmp_path,
        OM_DB_PATH=str(db),
        OM_OBSERVATIONAL_MEMORY__OBSERVATION__MESSAGE_TOKENS="150",
        OM_OBSERVATIONAL_MEMORY__BUDGET__DAILY_TOKENS="100000",
    )
    append = (
        "import anyio\nfrom om_mcp.config import load_config\nfrom om_mcp.engine import Memory\n"
        "async def main():\n    async with await Memory.open(load_config()) as m:\n"
        "        await m.append_messages('t', [{'id': f'm{n}', 'role': 'user', 'content': 'words ' * 80}"
        " for n in range(4)])\nanyio.run(main)\n"
    )
    assert subprocess.run([PYTHON, "-c", append], env=env, capture_output=True, timeout=120).returncode == 0
    arrived, release = threading.Event(), threading.Event()

    def held(request):
        arrived.set()
        release.wait(120)
        return observer_reply(["a fact"])

    with FakeLLMServer(held) as server:
        model = json.dumps({"model": "openai/fake", "api_base": server.base_url})
        observing = subprocess.Popen(
            [PYTHON, "-m", "om_mcp", "observe", "t"],
            env={**env, "OM_MODEL": model},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            assert arrived.wait(120)  # the call is in flight: reserved
            observing.send_signal(signal.SIGKILL)  # the process this test started, by its id
            observing.wait(timeout=60)
        finally:
            release.set()
        status = json.loads(
            subprocess.run(
                [PYTHON, "-m", "om_mcp", "status", "--json"],
                env={**env, "OM_MODEL": model},
                capture_output=True,
                timeout=60,
            ).stdout
        )
    today = status["spend"]["today"]
    assert today["calls"] == 0 and today["reserved_tokens"] > 1000 and today["tokens"] == today["reserved_tokens"]


@pytest.mark.anyio
async def test_mcp_sampling_is_counted_by_our_own_count_and_capped(tmp_path):
    """The host's model reports no usage: what was sent and answered is counted by us, and the
    cap binds sampling as any other backend."""
    db = tmp_path / "om.db"
    made = config(model="sampling", observation__message_tokens=150, budget__daily_tokens=8000).model_copy(
        update={"db_path": db}
    )
    broker = SamplingBroker()
    memory = await Memory.open(made, sampling=broker, clock=Clock(LATE))
    answered = 0

    async def sampler(context, params):
        from mcp.types import CreateMessageResult, TextContent

        nonlocal answered
        answered += 1
        return CreateMessageResult(
            role="assistant", model="host-model", content=TextContent(type="text", text=observer_reply(["a fact"]))
        )

    try:
        async with connect(build_server(made, memory), mode="legacy", sampling_callback=sampler) as client:
            for n in range(0, 16, 2):
                await ok(client, "append_messages", thread_id="t", messages=[msg(n, words=60), msg(n + 1, words=60)])
            await ok(client, "observe", thread_id="t")
        today = (await memory.status("t")).spend["today"]
        assert answered >= 1 and today["calls"] == answered and today["unpriced_calls"] == answered
        assert today["tokens"] > 1000 * answered and today["tokens"] <= 8000 and today["refused_calls"] >= 1
    finally:
        await memory.close()
