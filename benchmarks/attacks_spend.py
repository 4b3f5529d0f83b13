"""Attack row "spend": recorded spend over a cap (goal: at most one call's estimate).

- 3 processes x 3 concurrent observations against a 10,000-token daily cap (the review saw 36,900
  recorded, 3.7x): three `python` processes on one SQLite file, each observing three threads at once
  through litellm to the scripted OpenAI-compatible server (it answers after a second, so the calls
  overlap, and reports the usage it counts itself);
- one call over 40 messages against a 1,000-token cap (the review saw 23x);
- a provider that reports zero usage, against a 10,000-token cap, one process.

Prints the spend recorded in the database, the cap, what passed it, and the estimate of the call the
cap refused (`om_spend.refused_tokens`), which bounds what a call may add.

    .venv/bin/python benchmarks/attacks.py spend
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from om_mcp.testing.fake_server import FakeLLMServer, FakeReply, default_responder

WORKER = """
import anyio, json, sys, time
from pathlib import Path
from om_mcp.config import load_config
from om_mcp.engine import Memory

async def main():
    threads, ready, go = json.loads(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    async with await Memory.open(load_config()) as memory:
        for thread in threads:
            await memory.append_messages(thread, [
                {"id": f"{thread}-{n}", "role": "user" if n % 2 == 0 else "assistant",
                 "content": f"[id:{thread}-{n}] message {n} " + "words " * int(sys.argv[4])}
                for n in range(int(sys.argv[5]))
            ])
        await memory.observation.observer.router.warm_up()  # litellm loaded before the start line
        ready.touch()
        while not go.exists():
            time.sleep(0.02)
        async with anyio.create_task_group() as group:
            for thread in threads:
                group.start_soon(memory.observe, thread)

anyio.run(main)
"""


def environment(root: Path, server: FakeLLMServer, **budget: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OM_") and not k.endswith("_API_KEY")}
    env.update(
        HOME=str(root),
        XDG_DATA_HOME=str(root / "data"),
        OM_DB_PATH=str(root / "memory.db"),
        OM_MODEL=json.dumps({"model": "openai/fake", "api_base": server.base_url}),
        OM_OBSERVATIONAL_MEMORY__SCOPE="thread",  # one observation per thread: nine calls
        OM_OBSERVATIONAL_MEMORY__OBSERVATION__MESSAGE_TOKENS="100000",  # observed when asked, not on append
        OM_OBSERVATIONAL_MEMORY__OBSERVATION__BUFFER_TOKENS="false",
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        LITELLM_OFFLINE_MODE="true",
    )
    env.update({f"OM_OBSERVATIONAL_MEMORY__BUDGET__{k.upper()}": v for k, v in budget.items()})
    return env


def run(root: Path, server: FakeLLMServer, processes: int, threads: int, words: int, messages: int, cap: int) -> dict:
    root.mkdir(parents=True)
    env = environment(root, server, daily_tokens=str(cap))
    go = root / "go"
    workers = []
    for p in range(processes):
        names = [f"p{p}-t{t}" for t in range(threads)]
        ready = root / f"ready-{p}"
        command = [sys.executable, "-c", WORKER, json.dumps(names), str(ready), str(go), str(words), str(messages)]
        workers.append((ready, subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)))
    deadline = time.monotonic() + 600
    while not all(r.exists() for r, _ in workers):
        if time.monotonic() > deadline or any(w.poll() is not None for _, w in workers):
            raise SystemExit("a worker did not start: " + "".join(w.stderr.read() for _, w in workers if w.stderr))
        time.sleep(0.05)
    go.touch()  # every process observes its threads at once
    for _, worker in workers:
        worker.wait(timeout=600)
    conn = sqlite3.connect(root / "memory.db")
    try:
        calls, tokens, refused, estimate, abandoned = conn.execute(
            "SELECT COALESCE(SUM(calls), 0), COALESCE(SUM(input_tokens + output_tokens), 0),"
            " COALESCE(SUM(refused_calls), 0), COALESCE(MAX(refused_tokens), 0), COALESCE(SUM(abandoned_calls), 0)"
            " FROM om_spend"
        ).fetchone()
        held = conn.execute("SELECT COUNT(*) FROM om_spend_reservations").fetchone()[0]
    finally:
        conn.close()
    return {
        "cap": cap,
        "recorded": tokens,
        "over": max(0, tokens - cap),
        "calls": calls,
        "refused": refused,
        "abandoned": abandoned,
        "open": held,
        "estimate": estimate,
    }


def spend_over_cap() -> None:
    print("\nrecorded spend against a cap (goal: over the cap by at most one call's estimate)")
    header = f"{'scenario':<44} {'cap':>7} {'recorded':>9} {'x cap':>6} {'over':>6} {'calls':>5} {'refused':>7}"
    print(header)
    print("-" * len(header))
    cases = [
        (
            "3 processes x 3 observations, 10,000 cap",
            dict(processes=3, threads=3, words=60, messages=6, cap=10_000),
            "usage",
        ),
        ("1 call over 40 messages, 1,000 cap", dict(processes=1, threads=1, words=60, messages=40, cap=1_000), "usage"),
        (
            "provider reports 0 usage, 10,000 cap",
            dict(processes=1, threads=3, words=60, messages=6, cap=10_000),
            "zero",
        ),
    ]
    with tempfile.TemporaryDirectory(prefix="om-attacks-spend-") as tmp:
        for n, (label, shape, usage) in enumerate(cases):

            def responder(request, usage=usage):
                text = default_responder(request)
                if usage == "zero":
                    return FakeReply(text, usage={"prompt_tokens": 0, "completion_tokens": 0})
                return text  # the server's own rough count of what it was sent

            with FakeLLMServer(responder, delay=1.0) as server:
                out = run(Path(tmp) / f"case-{n}", server, **shape)
            ratio = out["recorded"] / out["cap"]
            print(
                f"{label:<44} {out['cap']:>7,} {out['recorded']:>9,} {ratio:>6.2f} {out['over']:>6,}"
                f" {out['calls']:>5} {out['refused']:>7}"
            )
            if out["over"] or out["abandoned"] or out["open"]:
                print(f"  {out['abandoned']} abandoned, {out['open']} reservations open")
            if out["estimate"]:
                print(f"  estimate of the call the cap refused last: {out['estimate']:,} tokens")
    print("  (the review's figures before reservations: 36,900 recorded against 10,000, 3.7x; 23x on 1,000)")


if __name__ == "__main__":
    spend_over_cap()
