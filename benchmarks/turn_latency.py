"""Added latency per turn: async buffering versus synchronous observation, and the first
turns after start.

Starts the fake OpenAI-compatible model (`om_mcp.testing.fake_server`) as its own process
(answering every request after a fixed delay, 2 s by default), then, for each mode, starts
`python -m om_mcp serve --db <temp file>` over stdio pointed at it and drives a long scripted
conversation: N turns (default 2000) of alternating user / assistant messages taken from the
LoCoMo dev conversations (evaluation data, CC BY-NC 4.0, used here only as realistic text).
Each turn is `append_messages` (one message) followed by `get_context`, and the round trip of
the pair is timed.

Modes:
  * off:      observational memory disabled: the cost of storing a message and
    returning the context, the baseline the other modes are compared with;
  * buffered: observation.message_tokens = 10000 (so the run crosses several
    thresholds), buffer_tokens / block_after / activation at their defaults;
  * sync:     the same with observation.buffer_tokens = false;
  * start:    a fresh server per run, no warm-up: the first turn is sent right after the
    handshake (--start-gap), turns paced --start-pace s apart, a 1.5 s model,
    message_tokens 4000 and buffer_tokens 150, so a buffering cycle is due from about turn 5
    (while the tokenizer and the model client load) and block_after is never reached (no
    turn waits for a cycle by design). Prints turn 1, the p99 of turns 1-20 and 2-20,
    and the steady p99 (turns 41 on), pooled over --start-runs runs. Target: the first
    20 turns' p99 within 2x the steady p99;
  * start-off: the same with observation off (the control: what a fresh server costs
    without any model client or cycle).

For off/buffered/sync a warm-up thread runs one manual `observe` before timing, so the
server has imported litellm (seconds) before the first timed threshold.

Prints p50 / p90 / p99 / max per mode, the model calls the fake server saw, the OM events
the server recorded, and the p99 ratio (sync / buffered). No assertions: figures only.

    .venv/bin/python benchmarks/turn_latency.py [--turns 2000] [--delay 2]
        [--message-tokens 10000] [--modes off,buffered,sync,start] [--start-runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from stdio_client import StdioServer

REPO = Path(__file__).resolve().parent.parent
LOCOMO = next(
    (
        p / "shared/data/locomo/locomo_dev.json"
        for p in REPO.parents
        if (p / "shared/data/locomo/locomo_dev.json").exists()
    ),
    REPO / "missing",
)
THREAD, RESOURCE = "bench", "bench-user"

# The fake model as a process: FakeLLMServer with its default Observer reply,
# counting every chat request it receives (one line per request in a file).
FAKE_LLM = """
import sys, threading, signal
from om_mcp.testing.fake_server import FakeLLMServer, default_responder
seen = open(sys.argv[2], "a", buffering=1)
def responder(request):
    seen.write("request\\n")
    return default_responder(request)
server = FakeLLMServer(responder, delay=float(sys.argv[1]), port=int(sys.argv[3])).start()
print(f"fake LLM server listening on {server.base_url}", flush=True)
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
stop.wait()
server.close()
"""


def conversation(turns: int) -> list[dict[str, str]]:
    """Alternating user / assistant messages from the LoCoMo dev sessions, cycling if needed."""
    lines: list[str] = []
    if LOCOMO.exists():
        for sample in json.loads(LOCOMO.read_text()):
            conv = sample["conversation"]
            for key in sorted((k for k in conv if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k[8:])):
                lines += [t["text"] for t in conv[key] if t.get("text")]
    if not lines:  # no data set: varied synthetic text
        lines = [("we talked about the trip, the budget and the museum. " * (1 + i % 7)).strip() for i in range(97)]
    out = []
    for i in range(turns):
        out.append({"id": f"msg-{i}", "role": "user" if i % 2 == 0 else "assistant", "content": lines[i % len(lines)]})
    return out


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def start_fake_llm(delay: float, seen: Path, log: Path) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen(
        [sys.executable, "-u", "-c", FAKE_LLM, str(delay), str(seen), "0"],
        stdout=subprocess.PIPE,
        stderr=open(log, "wb"),
        cwd=REPO,
    )
    line = proc.stdout.readline().decode()
    match = re.search(r":(\d+)/v1", line)
    if not match:
        proc.kill()
        raise SystemExit(f"the fake LLM server did not start: {line!r} (see {log})")
    return proc, int(match.group(1))


def seen_count(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def server_env(workdir: Path, port: int, message_tokens: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OM_") and not k.endswith("_API_KEY")}
    home = workdir / "home"
    home.mkdir(exist_ok=True)
    env.update(
        HOME=str(home),
        XDG_DATA_HOME=str(home),
        PYTHONUNBUFFERED="1",
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        LITELLM_OFFLINE_MODE="true",
        OM_OBSERVATIONAL_MEMORY__MODEL=json.dumps({"model": "openai/fake", "api_base": f"http://127.0.0.1:{port}/v1"}),
        OM_OBSERVATIONAL_MEMORY__OBSERVATION__MESSAGE_TOKENS=str(message_tokens),
    )
    return env


def turn(server: StdioServer, message: dict[str, str], **extra: Any) -> tuple[float, dict]:
    t0 = time.perf_counter()
    server.tool("append_messages", thread_id=THREAD, resource_id=RESOURCE, messages=[message])
    context = server.tool("get_context", thread_id=THREAD, resource_id=RESOURCE, **extra)
    return time.perf_counter() - t0, context


def events_of(db: Path) -> dict[str, int]:
    with sqlite3.connect(db) as conn:
        return dict(Counter(r[0] for r in conn.execute("SELECT type FROM om_events WHERE thread_id = ?", (THREAD,))))


def run_mode(mode: str, args, workdir: Path, port: int, seen: Path) -> dict[str, Any]:
    env = server_env(workdir, port, args.message_tokens)
    if mode == "sync":
        env["OM_OBSERVATIONAL_MEMORY__OBSERVATION__BUFFER_TOKENS"] = "false"
    if mode == "off":  # the baseline: storing and returning context with no observation at all
        env["OM_OBSERVATIONAL_MEMORY__ENABLED"] = "false"
    db = workdir / f"{mode}.db"
    server = StdioServer(db, env, name="turn-latency-benchmark", stderr=workdir / f"{mode}.stderr.log")
    try:
        # Warm-up on another thread: the first model call imports litellm.
        server.tool(
            "append_messages",
            thread_id="warm-up",
            resource_id="warm-up",
            messages=[{"role": "user", "content": "warming up"}],
        )
        if mode != "off":
            server.tool("observe", thread_id="warm-up", resource_id="warm-up")
        calls_before = seen_count(seen)
        latencies: list[float] = []
        slow: list[tuple[int, float]] = []
        started = time.perf_counter()
        for index, message in enumerate(conversation(args.turns)):
            elapsed, _ = turn(server, message)
            latencies.append(elapsed)
            if elapsed > 0.5:
                slow.append((index, elapsed))
            if args.progress and (index + 1) % args.progress == 0:
                print(f"  {mode}: {index + 1} turns, last {elapsed * 1000:.1f} ms", file=sys.stderr)
        wall = time.perf_counter() - started
        status = server.tool("get_context", thread_id=THREAD, resource_id=RESOURCE, include_status=True).get("status")
    finally:
        server.stop()
    return {
        "mode": mode,
        "latencies": latencies,
        "wall": wall,
        "calls": seen_count(seen) - calls_before,
        "events": events_of(db),
        "slow": slow,
        "status": status or {},
    }


def report(result: dict[str, Any]) -> None:
    ms = [x * 1000 for x in result["latencies"]]
    print(f"\n{result['mode']}: {len(ms)} turns in {result['wall']:.1f} s")
    print(
        f"  append_messages + get_context round trip (ms): p50 {percentile(ms, 0.5):.1f}  p90 {percentile(ms, 0.9):.1f}"
        f"  p99 {percentile(ms, 0.99):.1f}  p99.9 {percentile(ms, 0.999):.1f}  max {max(ms):.1f}"
        f"  mean {statistics.fmean(ms):.1f}"
    )
    first, last = ms[: len(ms) // 10], ms[-(len(ms) // 10) :]
    print(f"  p50 of the first / last 10% of turns: {percentile(first, 0.5):.1f} / {percentile(last, 0.5):.1f} ms")
    print(f"  model calls seen by the fake server: {result['calls']}")
    print(
        f"  turns over 500 ms (a model call waited on): {len(result['slow'])}"
        + (f" (first: {', '.join(f'#{i} {s:.2f}s' for i, s in result['slow'][:8])})" if result["slow"] else "")
    )
    print(f"  events: {result['events']}")
    print(f"  final status: {json.dumps(result['status'])}")


def run_start(args, workdir: Path, observation: bool = True) -> dict[str, Any]:
    """Fresh servers, no warm-up: per run, every paced turn's latency from the first one on.
    Without observation (the control), nothing but the server itself warms up."""
    seen = workdir / "start-requests.txt"
    llm, port = start_fake_llm(args.start_delay, seen, workdir / "start-llm.log")
    runs, events = [], Counter()
    try:
        for run in range(args.start_runs):
            db = workdir / f"start{run}{'' if observation else '-off'}.db"
            env = server_env(workdir, port, args.start_message_tokens)
            env["OM_OBSERVATIONAL_MEMORY__OBSERVATION__BUFFER_TOKENS"] = str(args.start_buffer_tokens)
            if not observation:
                env["OM_OBSERVATIONAL_MEMORY__ENABLED"] = "false"
            server = StdioServer(db, env, name="turn-latency-benchmark", stderr=workdir / f"{db.stem}.stderr.log")
            try:
                time.sleep(args.start_gap)
                latencies = []
                for message in conversation(args.start_turns):
                    t0 = time.perf_counter()
                    elapsed, _ = turn(server, message)
                    latencies.append(elapsed * 1000)
                    time.sleep(max(0.0, args.start_pace - (time.perf_counter() - t0)))
            finally:
                server.stop()
            runs.append(latencies)
            events.update(events_of(db))
    finally:
        llm.terminate()
        llm.wait(10)
    return {
        "runs": runs,
        "calls": seen_count(seen),
        "events": dict(events),
        "name": "start" if observation else "start-off (control: observation off)",
    }


def report_start(result: dict[str, Any], args) -> None:
    runs = result["runs"]
    first = [ms for run in runs for ms in run[:20]]
    after_one = [ms for run in runs for ms in run[1:20]]
    steady = [ms for run in runs for ms in run[40:]]
    print(
        f"\n{result['name']}: {len(runs)} fresh servers x {args.start_turns} turns, {args.start_pace} s apart,"
        " first turn"
        f" {args.start_gap} s after the handshake; model delay {args.start_delay} s,"
        f" message_tokens {args.start_message_tokens}, buffer_tokens {args.start_buffer_tokens}"
    )
    print(f"  {'turns':<22} {'n':>4} {'p50':>7} {'p90':>7} {'p99':>7} {'max':>7}  (ms)")
    for name, values in (
        ("turn 1", [run[0] for run in runs]),
        ("turns 1-20", first),
        ("turns 2-20", after_one),
        ("steady (turns 41+)", steady),
    ):
        print(
            f"  {name:<22} {len(values):>4} {percentile(values, 0.5):>7.1f} {percentile(values, 0.9):>7.1f}"
            f" {percentile(values, 0.99):>7.1f} {max(values):>7.1f}"
        )
    base = percentile(steady, 0.99)
    for name, values in (("turns 1-20", first), ("turns 2-20", after_one)):
        ratio = percentile(values, 0.99) / base
        print(f"  p99 {name} / steady p99: {ratio:.2f}x (target <= 2x: {'met' if ratio <= 2 else 'NOT met'})")
    slowest = sorted(((ms, r, i + 1) for r, run in enumerate(runs) for i, ms in enumerate(run[:20])), reverse=True)[:6]
    print("  slowest early turns: " + ", ".join(f"run {r + 1} turn {i} {ms:.0f} ms" for ms, r, i in slowest))
    print(f"  model calls: {result['calls']}; events: {result['events']}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--delay", type=float, default=2.0, help="seconds the fake model takes per reply")
    parser.add_argument("--message-tokens", type=int, default=10000)
    parser.add_argument("--modes", default="off,buffered,sync,start-off,start")
    parser.add_argument("--progress", type=int, default=0, help="print a line every N turns (stderr)")
    parser.add_argument("--start-runs", type=int, default=3, help="fresh servers in mode start")
    parser.add_argument("--start-turns", type=int, default=120)
    parser.add_argument("--start-pace", type=float, default=0.25, help="seconds from one turn's start to the next")
    parser.add_argument("--start-gap", type=float, default=0.0, help="seconds from the handshake to turn 1")
    parser.add_argument("--start-delay", type=float, default=1.5, help="the model's delay in mode start")
    parser.add_argument(
        "--start-message-tokens",
        type=int,
        default=4000,
        help="high enough that block_after (1.2x) is not reached: no turn waits by design",
    )
    parser.add_argument(
        "--start-buffer-tokens", type=int, default=150, help="absolute: a buffering cycle is due from about turn 5"
    )
    args = parser.parse_args(argv)
    modes = args.modes.split(",")

    with tempfile.TemporaryDirectory(prefix="om-turn-latency-") as tmp:
        workdir = Path(tmp)
        seen = workdir / "llm-requests.txt"
        llm, port = start_fake_llm(args.delay, seen, workdir / "llm.log")
        print(
            f"fake model on port {port}, delay {args.delay} s; {args.turns} turns per mode;"
            f" message_tokens {args.message_tokens}"
        )
        results = {}
        try:
            for mode in [m for m in modes if not m.startswith("start")]:
                results[mode] = run_mode(mode, args, workdir, port, seen)
                report(results[mode])
        finally:
            llm.terminate()
            try:
                llm.wait(10)
            except subprocess.TimeoutExpired:
                llm.kill()
        if "buffered" in results and "sync" in results:
            b = percentile([x * 1000 for x in results["buffered"]["latencies"]], 0.99)
            s = percentile([x * 1000 for x in results["sync"]["latencies"]], 0.99)
            print(
                f"\np99 ratio sync / buffered: {s / b:.1f}x  (buffered p99 {b:.1f} ms; target < 50 ms:"
                f" {'met' if b < 50 else 'NOT met'})"
            )
            if "off" in results:
                for name in ("buffered", "sync"):
                    added = [
                        percentile([x * 1000 for x in results[name]["latencies"]], q)
                        - percentile([x * 1000 for x in results["off"]["latencies"]], q)
                        for q in (0.5, 0.99)
                    ]
                    print(
                        f"added by observational memory ({name} - off): p50 {added[0]:+.1f} ms, p99 {added[1]:+.1f} ms"
                    )
            slow_b, slow_s = len(results["buffered"]["slow"]), len(results["sync"]["slow"])
            print(
                f"turns that waited on the model: buffered {slow_b}, sync {slow_s}"
                " (when thresholds are under 1% of turns, p99 does not show them: see p99.9 and max)"
            )
        for mode in ("start-off", "start"):
            if mode in modes:
                report_start(run_start(args, workdir, observation=mode == "start"), args)


if __name__ == "__main__":
    main()
