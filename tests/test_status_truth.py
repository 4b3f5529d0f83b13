"""A status that tells the truth: a reached spend cap reads as a pause (which cap, until when) in
`om-mcp status`, `om-mcp threads` and `om-mcp ingest`'s summary, never "model ready" or "observing in
the background"; each cycle's cost is there whenever the spend meter could price it (the status page's
cost per cycle); a cycle whose result came after another worker's is a skip, not a failure.

The commands run as a user runs them, over a database whose day's spend is at the cap; the cost and
the skip through the engine and the status page's data, with the scripted model."""

from __future__ import annotations

import json
import shutil
import sqlite3
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from support.engine import Memory, Script, config, msg, tracing_observer
from support.processes import run_om

from om_mcp.commands._view import cycle_text
from om_mcp.models.base import Completion, Usage
from om_mcp.server.http.ui.source import MemorySource

pytestmark = pytest.mark.anyio

FIXTURES = Path(__file__).parent / "fixtures"
SESSION_ID = json.loads((FIXTURES / "claude_code" / "session.jsonl").read_text().splitlines()[0])["sessionId"]
CAPPED = {
    "OM_MODEL": "openai/gpt-4o-mini",
    "OPENAI_API_KEY": "sk-not-a-real-key",  # a model that is ready: only the cap holds observation back
    "OM_OBSERVATIONAL_MEMORY__BUDGET__DAILY_TOKENS": "1000",
    "OM_OBSERVATIONAL_MEMORY__OBSERVATION__MESSAGE_TOKENS": "100",  # work is due
}


@pytest.mark.slow
async def test_a_reached_cap_reads_as_a_pause_in_status_threads_and_ingest(tmp_path: Path):
    db = tmp_path / "memory.db"
    mem = await Memory.open(config(), db_path=str(db), client=Script().model)
    await mem.append_messages("t", [msg(n) for n in range(4)])
    await mem.store.add_spend(datetime.now(UTC).date().isoformat(), "openai/gpt-4o-mini", 900, 200, None)
    await mem.close()
    said = "observation PAUSED by a spend cap (observational_memory.budget.daily_tokens): daily budget of 1,000"

    status = run_om("status", "--db", str(db), home=tmp_path, **CAPPED)
    assert status.returncode == 0, status.stderr
    (model,) = [line for line in status.stdout.splitlines() if line.startswith("model ")]
    assert said in model and "tokens reached; resumes at 00:00 UTC" in model and "ready" not in model, model
    as_json = json.loads(run_om("status", "--json", "--db", str(db), home=tmp_path, **CAPPED).stdout)
    assert as_json["model"]["budget_paused"] and as_json["spend"]["reached"] == "daily_tokens"

    threads = run_om("threads", "--db", str(db), home=tmp_path, **CAPPED)
    assert threads.returncode == 0 and threads.stdout.startswith(said), threads.stdout

    transcript = tmp_path / "session.jsonl"
    shutil.copy(FIXTURES / "claude_code" / "session.jsonl", transcript)
    ingested = run_om("ingest", str(transcript), "--db", str(db), home=tmp_path, **CAPPED)
    assert ingested.returncode == 0, ingested.stderr
    assert "observing in the background" not in ingested.stdout
    assert "; not observed now: daily budget of 1,000 tokens reached; resumes at 00:00 UTC" in ingested.stdout
    rows = run_om("threads", "--db", str(db), home=tmp_path, **CAPPED).stdout.splitlines()
    session = next(row.split("\t") for row in rows if row.startswith(SESSION_ID))
    assert session[2] == "please run ls for me", rows  # untitled: its first prompt, as the status page names it
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("SELECT COUNT(*) FROM om_leases").fetchone() == (0,)  # no worker was started
    finally:
        conn.close()


def answer(model: str):
    def reply(messages: list[dict]) -> Completion:
        return Completion(
            text=tracing_observer(messages), model=model, usage=Usage(input_tokens=2000, output_tokens=300)
        )

    return reply


@pytest.mark.parametrize(("model", "priced"), [("openai/gpt-4o-mini", True), ("local/unpriced-model", False)])
async def test_each_cycle_costs_what_the_meter_prices_it_at(tmp_path: Path, model: str, priced: bool):
    """The provider said no cost: the cycle's event (and the page's cost per cycle) has the meter's price."""
    mem = await Memory.open(config(), db_path=str(tmp_path / "om.db"), client=Script(observer=answer(model)).model)
    await mem.append_messages("t", [msg(n) for n in range(4)])
    assert (await mem.observe("t")).ran
    series = await MemorySource(lambda: mem).series("t")
    assert series is not None
    (cycle,) = [c for c in series.cycles if c.kind == "observation"]
    if priced:
        from om_mcp.models import prices

        rate_in, rate_out = prices.per_token(model)
        assert cycle.cost == pytest.approx(2000 * rate_in + 300 * rate_out) and cycle.cost > 0
    else:
        assert cycle.cost is None and cycle.tokens_in  # no price known: the page says so, not "no calls"
    await mem.close()


def test_a_skipped_cycle_reads_as_a_skip():
    from om_mcp.store import Event

    skip = Event(
        1,
        "data-om-observation-skipped",
        "c1",
        "thread:t",
        "default",
        "t",
        None,
        {"discarded": "another cycle observed these messages first", "duration_ms": 1200},
        "2026-03-02T10:00:00+00:00",
    )
    said = cycle_text(skip)
    assert said.startswith("skipped 2026-03-02 10:00 (1.2 s): another cycle observed") and "failed" not in said
    assert cycle_text(replace(skip, type="data-om-buffering-skipped")).startswith("buffering skipped")
