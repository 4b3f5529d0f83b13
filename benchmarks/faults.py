"""The model-fault table: what a slow or failing model costs the turn, the provider and the log.

For each scenario, starts the scripted OpenAI-compatible model as its own process
(counting the requests it receives), then a real `python -m om_mcp serve --db <temp>`
over stdio pointed at it, and plays paced turns (append_messages of one message, then
get_context, every --pace seconds) on one thread: --warm-up seconds first (the server's
first model call imports litellm, seconds of CPU that slow the turns around it; shown
apart as the cold start), then --seconds measured. Thresholds are low
(message_tokens 3000, buffering every 600 tokens, block_after at 3600) so a run crosses
several; the call policy and turn_wait_seconds are the defaults (20 s per attempt,
45 s per call, at most 10 s of waiting for a turn past block_after).

Scenarios: a healthy model answering in 2 s, a model taking 120 s, HTTP 500 on every
request, an api_base where nothing listens, and a model whose key is not set.

Prints, per scenario: turn latency p50 / p99 / max and the turns over 1 s (measured
phase), the slowest turn and the turns over 1 s of the warm-up; provider calls
per minute (requests the fake model received; for the unreachable api_base, attempts
counted from the failure events); the server's stderr lines per minute; what the status
says at the end. No assertions: figures only.

With --appends N, instead: N unpaced turns, then --idle seconds, for a model that answers
200 OK with nothing usable (a refusal) and for an HTTP 500 model; prints the model calls
and the prompt tokens (o200k) each cost, and their ratio (the goal: at most 2x).

    .venv/bin/python benchmarks/faults.py [--quick] [--warm-up 15] [--seconds 45] [--pace 0.25]
        [--scenarios healthy,slow,http500,unreachable,nokey]
    .venv/bin/python benchmarks/faults.py --appends 2000 [--idle 30] [--scenarios refusing,http500]

With --import-bomb, instead: the peak memory (max RSS) of `om-mcp import` of a Claude
export zip of about 1 MB whose conversations.json expands to 1 GiB (one conversation
holding a 1 GiB message between two small ones), beside the same command on a small
export (the process's own base: interpreter, tokenizer); the goal is under 200 MB.

    .venv/bin/python benchmarks/faults.py --import-bomb [--runs 3]

With --hook-line, instead: the peak memory and seconds of one `om-mcp hook claude-code`
UserPromptSubmit (--no-worker) whose transcript holds one message and then a 1 GiB line with no
newline (a sparse file of zeros), beside the same hook on the one message alone.

    .venv/bin/python benchmarks/faults.py --hook-line [--runs 3]
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
import zipfile
from pathlib import Path
from typing import Any

from stdio_client import StdioServer

REPO = Path(__file__).resolve().parent.parent
THREAD = "bench"
UNREACHABLE = "http://127.0.0.1:9/v1"  # the discard port: nothing listens

# The fake model as a process: every request counted (one line in a file), answered
# after a delay with the default Observer reply, or with an error status.
FAKE_LLM = """
import sys, threading, signal
from om_mcp.engine.tokens import TokenCounter
from om_mcp.testing.fake_server import FakeLLMServer, FakeReply, default_responder, request_text
delay, status, seen = float(sys.argv[1]), int(sys.argv[2]), open(sys.argv[3], "a", buffering=1)
refusal = sys.argv[4] if len(sys.argv) > 4 else ""
counter = TokenCounter()
def responder(request):
    seen.write(f"request {counter.count_text(request_text(request))}\\n")
    if status != 200:
        return FakeReply("scripted failure", status=status)
    return refusal or default_responder(request)
server = FakeLLMServer(responder, delay=delay).start()
print(f"fake LLM server listening on {server.base_url}", flush=True)
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
stop.wait()
server.close()
"""

SCENARIOS: dict[str, dict[str, Any]] = {
    "healthy": {"label": "healthy, 2 s", "delay": 2.0, "status": 200},
    "slow": {"label": "slow, 120 s", "delay": 120.0, "status": 200},
    "http500": {"label": "HTTP 500", "delay": 0.0, "status": 500},
    "unreachable": {"label": "unreachable api_base", "delay": 0.0, "status": 200, "api_base": UNREACHABLE},
    "nokey": {"label": "no key", "model": "openai/gpt-4o-mini"},
    # 200 OK with nothing usable: a refusal, a content filter, a model that ignores the format.
    "refusing": {
        "label": "refusing (200 OK)",
        "delay": 0.0,
        "status": 200,
        "reply": "I'm sorry, but I can't help with summarising this conversation.",
    },
}
BURST_SCENARIOS = "refusing,http500"


def start_fake_llm(delay: float, status: int, seen: Path, reply: str = "") -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, "-u", "-c", FAKE_LLM, str(delay), str(status), str(seen), reply],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=REPO,
    )
    line = proc.stdout.readline().decode()
    match = re.search(r"(http://\S+/v1)", line)
    if not match:
        proc.kill()
        raise SystemExit(f"the fake LLM server did not start: {line!r}")
    return proc, match.group(1)


def server_env(workdir: Path, model: Any) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OM_") and not k.endswith("_API_KEY")}
    home = workdir / "home"
    home.mkdir(exist_ok=True)
    env.update(
        HOME=str(home),
        XDG_DATA_HOME=str(home),
        PYTHONUNBUFFERED="1",
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        LITELLM_OFFLINE_MODE="true",
        OM_OBSERVATIONAL_MEMORY__SCOPE="thread",
        OM_OBSERVATIONAL_MEMORY__MODEL=model if isinstance(model, str) else json.dumps(model),
        OM_OBSERVATIONAL_MEMORY__OBSERVATION__MESSAGE_TOKENS="3000",
    )
    return env


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def attempts_from_events(db: Path) -> int:
    """Model attempts of failed cycles, read from their events ("failed after N attempt(s)")."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT payload FROM om_events WHERE type LIKE '%failed'").fetchall()
    conn.close()
    return sum(int(m.group(1)) for (p,) in rows for m in [re.search(r"after (\d+) attempt", p)] if m)


def run(name: str, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    spec = SCENARIOS[name]
    seen = workdir / f"{name}.requests"
    llm = None
    if "model" in spec:
        model: Any = spec["model"]
    else:
        llm, base = start_fake_llm(spec["delay"], spec["status"], seen, spec.get("reply", ""))
        model = {"model": "openai/fake", "api_base": spec.get("api_base", base)}
    db = workdir / f"{name}.db"
    server = StdioServer(db, server_env(workdir, model), name="faults-benchmark", timeout=300.0)
    try:
        turns = Turns(server, args.pace)
        cold = turns.play(args.warm_up)
        calls_before = count_lines(seen)
        attempts_before = attempts_from_events(db) if name == "unreachable" else 0
        logs_before = len(server.log_times)
        started = time.monotonic()
        latencies = turns.play(args.seconds)
        minutes = (time.monotonic() - started) / 60
        logs = len(server.log_times) - logs_before
        status = server.resource(f"om://threads/{THREAD}/status")
    finally:
        server.stop()
        if llm is not None:
            llm.terminate()
            llm.wait(10)
    calls = count_lines(seen) - calls_before
    if name == "unreachable":
        calls = attempts_from_events(db) - attempts_before
    return {
        "name": name,
        "label": spec["label"],
        "latencies": latencies,
        "cold": cold,
        "minutes": minutes,
        "calls": calls,
        "logs": logs,
        "status": status,
        "tail": server.log_tail,
    }


class Turns:
    """Paced turns on one thread, numbered across phases."""

    def __init__(self, server: StdioServer, pace: float):
        self.server, self.pace, self.n = server, pace, 0

    def play(self, seconds: float) -> list[float]:
        latencies: list[float] = []
        started = time.monotonic()
        while time.monotonic() - started < seconds:
            t0 = time.monotonic()
            self.turn()
            latencies.append(time.monotonic() - t0)
            time.sleep(max(0.0, self.pace - (time.monotonic() - t0)))
        return latencies

    def turn(self) -> None:
        self.server.tool(
            "append_messages",
            thread_id=THREAD,
            messages=[
                {
                    "role": "user" if self.n % 2 == 0 else "assistant",
                    "content": f"turn {self.n}: we compared train fares to Lisbon and Porto"
                    " and kept the cheaper one " * 3,
                }
            ],
        )
        self.server.tool("get_context", thread_id=THREAD)
        self.n += 1


def count_lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def prompt_tokens(path: Path) -> int:
    """The o200k tokens of every request the fake model received."""
    lines = path.read_text().splitlines() if path.exists() else []
    return sum(int(line.split()[1]) for line in lines if len(line.split()) > 1)


def burst(name: str, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """--appends N as fast as the server takes them (append_messages + get_context), then
    --idle seconds of nothing: what a model that never gives usable output costs."""
    spec = SCENARIOS[name]
    seen = workdir / f"burst-{name}.requests"
    llm, base = start_fake_llm(spec["delay"], spec["status"], seen, spec.get("reply", ""))
    db = workdir / f"burst-{name}.db"
    env = server_env(workdir, {"model": "openai/fake", "api_base": base})
    server = StdioServer(db, env, name="faults-benchmark", timeout=300.0)
    try:
        turns = Turns(server, 0.0)
        started = time.monotonic()
        for _ in range(args.appends):
            turns.turn()
        seconds = time.monotonic() - started
        calls_busy = count_lines(seen)
        time.sleep(args.idle)
        status = server.resource(f"om://threads/{THREAD}/status")
    finally:
        server.stop()
        llm.terminate()
        llm.wait(10)
    with sqlite3.connect(db) as conn:
        tokens = conn.execute("SELECT COALESCE(SUM(tokens), 0) FROM messages").fetchone()[0]
    conn.close()
    return {
        "label": spec["label"],
        "appends": args.appends,
        "message_tokens": tokens,
        "seconds": seconds,
        "calls": count_lines(seen),
        "idle_calls": count_lines(seen) - calls_busy,
        "prompt_tokens": prompt_tokens(seen),
        "status": status,
    }


def small_conversation(i: int) -> dict[str, Any]:
    return {
        "uuid": f"conv-{i}",
        "name": f"Chat {i}",
        "created_at": "2025-01-01T10:00:00Z",
        "chat_messages": [
            {"uuid": f"m{i}-{j}", "sender": "human" if j % 2 == 0 else "assistant", "text": f"message {j} of {i}"}
            for j in range(3)
        ],
    }


def write_bomb(path: Path, gib: float = 1.0) -> None:
    """A Claude export zip: a small conversation, one whose message is `gib` GiB of "a", another small one."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        with archive.open("conversations.json", "w", force_zip64=True) as member:
            member.write(("[" + json.dumps(small_conversation(0)) + ",").encode())
            head = {"uuid": "conv-big", "name": "The huge one", "chat_messages": [{"uuid": "h1", "sender": "human"}]}
            member.write(json.dumps(head)[:-3].encode() + b', "text": "')
            block = b"a" * (1 << 20)
            for _ in range(int(gib * 1024)):
                member.write(block)
            member.write(b'"}]},' + json.dumps(small_conversation(2)).encode() + b"]")


def peak_import(path: Path, workdir: Path) -> tuple[float, float, dict[str, Any]]:
    """(max RSS in MB, seconds, the --json report) of one `om-mcp import` in a fresh database."""
    db = workdir / f"import-{time.monotonic_ns()}.db"
    env = server_env(workdir, "openai/unused")
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "om_mcp", "import", str(path), "--json", "--db", str(db)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    out = proc.stdout.read()  # type: ignore[union-attr]
    _, _, usage = os.wait4(proc.pid, 0)
    seconds = time.monotonic() - started
    try:
        report = json.loads(out)
    except ValueError:
        report = {}
    return usage.ru_maxrss / 1024, seconds, report


def import_bomb(args: argparse.Namespace, workdir: Path) -> None:
    bomb, small = workdir / "bomb.zip", workdir / "small.json"
    write_bomb(bomb)
    small.write_text(json.dumps([small_conversation(i) for i in range(3)]))
    expanded = zipfile.ZipFile(bomb).infolist()[0].file_size
    rows = []
    for label, path in (("small export (base)", small), ("1 MB zip -> 1 GiB", bomb)):
        runs = [peak_import(path, workdir) for _ in range(args.runs)]
        rows.append((label, path, runs))
    print(
        f"\nom-mcp import, peak memory (max RSS), median of {args.runs};"
        f" the zip is {bomb.stat().st_size / 1e6:.2f} MB, its conversations.json {expanded / 2**30:.2f} GiB\n"
    )
    header = f"{'input':<22} {'peak MB':>8} {'seconds':>8}  imported / left out"
    print(header)
    print("-" * len(header))
    for label, _path, runs in rows:
        report = runs[-1][2]
        left = ", ".join(f"{p['title']}: {p['why'][:60]}" for p in report.get("problems", []))
        print(
            f"{label:<22} {statistics.median(r[0] for r in runs):>8.0f} {statistics.median(r[1] for r in runs):>8.1f}"
            f"  {report.get('added')} / {left or 'nothing'}"
        )
    print("\ngoal: the 1 GiB import under 200 MB")


def peak_hook(transcript: Path, workdir: Path) -> tuple[float, float, int]:
    """(max RSS in MB, seconds, exit code) of one UserPromptSubmit hook on `transcript`."""
    project = workdir / "project"
    (project / ".git").mkdir(parents=True, exist_ok=True)
    env = server_env(workdir, "openai/unused")
    env["OM_DB_PATH"] = str(workdir / f"hook-{time.monotonic_ns()}.db")
    event = {
        "session_id": "bench-session",
        "transcript_path": str(transcript),
        "cwd": str(project),
        "hook_event_name": "UserPromptSubmit",
    }
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "om_mcp", "hook", "claude-code", "--no-worker"],
        cwd=REPO,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    proc.stdin.write(json.dumps(event).encode())  # type: ignore[union-attr]
    proc.stdin.close()  # type: ignore[union-attr]
    _, status, usage = os.wait4(proc.pid, 0)
    return usage.ru_maxrss / 1024, time.monotonic() - started, os.waitstatus_to_exitcode(status)


def hook_line(args: argparse.Namespace, workdir: Path) -> None:
    entry = {
        "type": "user",
        "uuid": "u1",
        "sessionId": "bench-session",
        "timestamp": "2026-03-02T09:00:00Z",
        "message": {"role": "user", "content": "before the flood"},
    }
    small, huge = workdir / "small.jsonl", workdir / "huge.jsonl"
    for path in (small, huge):
        path.write_text(json.dumps(entry) + "\n")
    with open(huge, "ab") as f:
        f.truncate(huge.stat().st_size + (1 << 30))  # zeros, no newline: sparse, so cheap to make
    print(f"\nom-mcp hook claude-code UserPromptSubmit, peak memory (max RSS) and seconds, median of {args.runs}\n")
    header = f"{'transcript':<34} {'peak MB':>8} {'seconds':>8} {'exit':>5}"
    print(header)
    print("-" * len(header))
    for label, path in (("one message (base)", small), ("one message + 1 GiB unended line", huge)):
        runs = [peak_hook(path, workdir) for _ in range(args.runs)]
        print(
            f"{label:<34} {statistics.median(r[0] for r in runs):>8.0f} {statistics.median(r[1] for r in runs):>8.2f}"
            f" {runs[-1][2]:>5}"
        )


def report_burst(results: list[dict[str, Any]], args: argparse.Namespace) -> None:
    print(f"\n{args.appends} appends (append_messages + get_context, unpaced), then {args.idle:.0f} s idle\n")
    header = (
        f"{'scenario':<20} {'msg tokens':>10} {'seconds':>8} {'model calls':>11} {'idle calls':>10}"
        f" {'prompt tokens':>13}  status at the end"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        observation = r["status"].get("observation", {})
        state = (observation.get("reason") or "")[:90]
        print(
            f"{r['label']:<20} {r['message_tokens']:>10,} {r['seconds']:>8.1f} {r['calls']:>11}"
            f" {r['idle_calls']:>10} {r['prompt_tokens']:>13,}  {state}"
        )
    if len(results) == 2 and results[1]["calls"]:
        a, b = results
        print(
            f"\n{a['label']} / {b['label']}: {a['calls'] / b['calls']:.2f}x the model calls,"
            f" {a['prompt_tokens'] / max(1, b['prompt_tokens']):.2f}x the prompt tokens (goal: at most 2x)"
        )


def report(results: list[dict[str, Any]], args: argparse.Namespace) -> None:
    print(
        f"\n{args.warm_up:.0f} s of warm-up then {args.seconds:.0f} s measured per scenario,"
        f" a turn every {args.pace} s;"
        " latency of append_messages + get_context\n"
    )
    header = (
        f"{'scenario':<22} {'turns':>5} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'>1 s':>5} {'cold max':>9}"
        f" {'cold >1 s':>9} {'calls/min':>9} {'log lines/min':>13}  status at the end"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        ms = [x * 1000 for x in r["latencies"]]
        observation = r["status"].get("observation", {})
        state = f"{r['status'].get('unobserved_messages')} unobserved, gen {r['status'].get('generation_count')}"
        if observation.get("reason"):
            state += f"; {observation['reason'][:60]}"
        cold = [x * 1000 for x in r["cold"]] or [0.0]
        print(
            f"{r['label']:<22} {len(ms):>5} {percentile(ms, 0.5):>8.1f} {percentile(ms, 0.99):>8.1f} {max(ms):>8.1f}"
            f" {sum(1 for x in ms if x > 1000):>5} {max(cold):>9.1f} {sum(1 for x in cold if x > 1000):>9}"
            f" {r['calls'] / r['minutes']:>9.1f} {r['logs'] / r['minutes']:>13.1f}  {state}"
        )
    print("\ncalls/min: requests the fake model received (unreachable: attempts named by the failure events)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--warm-up", type=float, default=15.0, help="paced turns before measuring, in seconds")
    parser.add_argument("--seconds", type=float, default=45.0, help="measured paced turns per scenario, in seconds")
    parser.add_argument("--pace", type=float, default=0.25, help="seconds from one turn's start to the next")
    parser.add_argument("--scenarios", help=f"default: all but refusing; with --appends: {BURST_SCENARIOS}")
    parser.add_argument("--quick", action="store_true", help="10 s of warm-up and 20 s measured per scenario")
    parser.add_argument(
        "--appends", type=int, default=0, help="instead of paced turns: this many unpaced turns, then --idle"
    )
    parser.add_argument("--idle", type=float, default=30.0, help="seconds of nothing after --appends")
    parser.add_argument("--import-bomb", action="store_true", help="instead: peak memory of a zip-bomb import")
    parser.add_argument("--hook-line", action="store_true", help="instead: a hook on a transcript's 1 GiB line")
    parser.add_argument("--runs", type=int, default=3, help="with --import-bomb or --hook-line: runs of each")
    args = parser.parse_args(argv)
    if args.quick:
        args.warm_up, args.seconds = 10.0, 20.0
    with tempfile.TemporaryDirectory(prefix="om-faults-") as tmp:
        if args.import_bomb:
            import_bomb(args, Path(tmp))
            return
        if args.hook_line:
            hook_line(args, Path(tmp))
            return
        if args.appends:
            names = (args.scenarios or BURST_SCENARIOS).split(",")
            bursts = []
            for name in names:
                print(f"running {args.appends} appends, {SCENARIOS[name]['label']} ...", file=sys.stderr, flush=True)
                bursts.append(burst(name, args, Path(tmp)))
            report_burst(bursts, args)
            return
        results = []
        for name in (args.scenarios or ",".join(n for n in SCENARIOS if n != "refusing")).split(","):
            print(f"running {SCENARIOS[name]['label']} ...", file=sys.stderr, flush=True)
            results.append(run(name, args, Path(tmp)))
        report(results, args)


if __name__ == "__main__":
    main()
