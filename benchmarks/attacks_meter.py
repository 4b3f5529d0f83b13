"""Attack row "meter": the requests a model's side received against the calls the spend table counts.

- The review's attack replayed: an Observer that answers every request with a looping log, so each
  observation is asked twice (the first answer is unusable), threads observed one after another under a
  15,000-token daily cap. Provider tokens (the usage the scripted OpenAI-compatible server reported for
  every request it received) against the tokens recorded in `om_spend`. The review saw 22,020 provider
  tokens against 10,906 recorded: the second request went around the meter.
- Every way the engine asks a model again (tests/support/meter.py's cases, which tests/test_meter.py
  holds equal one by one): requests received, requests metered, in total and per case.

    .venv/bin/python benchmarks/attacks.py meter
"""

from __future__ import annotations

import json
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio

from om_mcp.config import load_config
from om_mcp.engine import Memory
from om_mcp.testing.fake_server import FakeLLMServer, FakeReply, request_text, rough_tokens

REPO = Path(__file__).resolve().parent.parent
CAP = 15_000


def recorded(db: Path) -> tuple[int, int, int]:
    """(tokens recorded, calls recorded, calls the cap refused) in the spend table."""
    conn = sqlite3.connect(db)
    try:
        return conn.execute(
            "SELECT COALESCE(SUM(input_tokens + output_tokens), 0), COALESCE(SUM(calls), 0),"
            " COALESCE(SUM(refused_calls), 0) FROM om_spend"
        ).fetchone()
    finally:
        conn.close()


async def replay(root: Path, looping: str, threads: int = 16) -> dict[str, int]:
    provider = {"tokens": 0}

    def responder(request: dict[str, Any]) -> FakeReply:
        prompt, completion = rough_tokens(request_text(request)), rough_tokens(looping)
        provider["tokens"] += prompt + completion
        return FakeReply(looping, usage={"prompt_tokens": prompt, "completion_tokens": completion})

    with FakeLLMServer(responder) as server:
        env = {
            "OM_OBSERVATIONAL_MEMORY__MODEL": json.dumps({"model": "openai/fake", "api_base": server.base_url}),
            "OM_OBSERVATIONAL_MEMORY__SCOPE": "thread",
            "OM_OBSERVATIONAL_MEMORY__OBSERVATION__MESSAGE_TOKENS": "100000",  # observed when asked
            "OM_OBSERVATIONAL_MEMORY__OBSERVATION__BUFFER_TOKENS": "false",
            "OM_OBSERVATIONAL_MEMORY__BUDGET__DAILY_TOKENS": str(CAP),
        }
        db = root / "memory.db"
        memory = await Memory.open(load_config(env=env), db_path=str(db))
        try:
            for t in range(threads):
                thread = f"t{t}"
                messages = [
                    {"id": f"{thread}-{n}", "role": "user" if n % 2 == 0 else "assistant"}
                    | {"content": f"[id:{thread}-{n}] message {n} " + "words " * 60}
                    for n in range(6)
                ]
                await memory.append_messages(thread, messages)
                await memory.observe(thread)
        finally:
            await memory.close()
        tokens, calls, refused = recorded(db)
        return {"provider": provider["tokens"], "requests": len(server.requests)} | {
            "recorded": tokens,
            "calls": calls,
            "refused": refused,
        }


async def every_case(root: Path) -> list[tuple[str, int, int]]:
    sys.path.insert(0, str(REPO / "tests"))
    from support import meter  # the cases tests/test_meter.py runs

    rows = []
    with FakeLLMServer() as server:
        for n, name in enumerate(meter.CASES):
            folder = root / f"case-{n}"
            folder.mkdir()
            made, counted = await meter.run(name, server, folder)
            rows.append((name, made, counted))
    return rows


def meter_row() -> None:
    sys.path.insert(0, str(REPO / "tests"))
    from support.meter import LOOPING

    print("\nthe review's attack: every Observer answer loops, so each observation is asked twice")
    with tempfile.TemporaryDirectory(prefix="om-attacks-meter-") as tmp:
        (Path(tmp) / "replay").mkdir()
        out = anyio.run(replay, Path(tmp) / "replay", LOOPING)
        print(
            f"  cap {CAP:,} tokens: provider {out['provider']:,} tokens in {out['requests']} requests;"
            f" recorded {out['recorded']:,} tokens in {out['calls']} calls ({out['refused']} refused by the cap);"
            f" over the cap {max(0, out['recorded'] - CAP):,}"
        )
        print("  (the review: 22,020 provider tokens against 10,906 recorded, the retry unmetered)")
        rows = anyio.run(every_case, Path(tmp))
    print("\nrequests received / requests metered, every way the engine asks a model (tests/support/meter.py)")
    width = max(len(name) for name, _, _ in rows)
    for name, made, counted in rows:
        print(f"  {name:<{width}} {made:>3} / {counted:<3}{'' if made == counted else '  DIFFERENT'}")
    made, counted = sum(r[1] for r in rows), sum(r[2] for r in rows)
    differ = sum(1 for r in rows if r[1] != r[2])
    print(f"  {'all ' + str(len(rows)) + ' cases':<{width}} {made:>3} / {counted:<3} ({differ} cases differ)")


if __name__ == "__main__":
    meter_row()
