"""`om-mcp ingest` throughput, and the share of it the secret scan takes.

    .venv/bin/python benchmarks/ingest.py [--turns 600] [--runs 5] [--compare /tmp/om-base]

Writes a Claude Code transcript of `--turns` turns as a coding session makes them: a prompt, a
`Read` of one of this repository's source files (its output cut to 2,000 characters as ingest
cuts it), a `Bash` call with its output, and a reply. Then runs `python -m om_mcp ingest FILE
--no-worker` on a new database, `--runs` times, and reports the median wall time, messages per
second and MB of transcript per second, of the child's CPU time (steadier than its wall time on
a loaded machine; both are shown). `--compare PATH` runs another checkout's code the same way
(PYTHONPATH=PATH), interleaved with this one so the machine's load falls on both alike, and
prints the ratios. Each checkout is also run once under cProfile: the share of the command's time
spent in `Redactor.message` (the secret scan of every message), the figure issue 27 started from;
and the scan is timed alone, over the same messages, and from a cold start as the host hook pays it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

_PROFILE = """
import cProfile, pstats, sys
from om_mcp.cli import main
profile = cProfile.Profile()
try:
    profile.runcall(main, sys.argv[1:])
except SystemExit:
    pass
stats = pstats.Stats(profile)
total = max(row[3] for row in stats.stats.values())
scan = sum(row[3] for (path, _, name), row in stats.stats.items() if name == "message" and "privacy" in path)
print(f"SHARE {scan / total:.4f}", file=sys.stderr)
"""


# The scan alone, in a child on a checkout's code: every message of the transcript through the
# redactor the hook and ingest use (CPU, best of 5), and a cold start as the hook has it on each
# prompt (import, build, one turn; CPU, best of 7 processes).
_SCAN = """
import sys, time
from om_mcp.engine.intake import normalise_parts
from om_mcp.hosts.claude_code import read_messages
from om_mcp.privacy import redactor_for
messages, _ = read_messages(sys.argv[1])
items = [(m["role"], normalise_parts(m["content"]), m.get("metadata")) for m in messages]
redactor = redactor_for(None)
best = 9e9
for _ in range(5):
    start = time.process_time()
    for role, parts, metadata in items:
        redactor.message(role, parts, metadata)
    best = min(best, time.process_time() - start)
print(best)
"""
_COLD = """
import time
start = time.process_time()
from om_mcp.privacy import redactor_for
redactor = redactor_for({})
text = {"type": "text", "text": "run the tests and fix the failing one; the token is in .env"}
redactor.message("user", [text], None)
call = {"type": "tool-call", "tool_name": "Bash", "args": {"command": "pytest -q tests"}, "tool_call_id": "toolu_01"}
redactor.message("assistant", [call], None)
print(time.process_time() - start)
"""


def child_seconds(checkout: Path, folder: Path, code: str, *args: str) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OM_") and k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPATH=str(checkout), PYTHONPYCACHEPREFIX=str(folder / "pycache" / checkout.name))
    done = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, check=True)
    return float(done.stdout.strip())


def write_transcript(path: Path, turns: int) -> None:
    sys.path.insert(0, str(REPO))
    from om_mcp.testing.transcripts import ClaudeTranscript

    sources = sorted((REPO / "om_mcp").rglob("*.py"))
    prose = (REPO / "README.md").read_text(encoding="utf-8").split("\n\n")
    transcript = ClaudeTranscript(path, "bench-session", "/home/user/project")
    for i in range(turns):
        source = sources[i % len(sources)]
        text = source.read_text(encoding="utf-8")
        transcript.user(f"{prose[i % len(prose)][:400]}\n\nWhat does {source.name} do?")
        call = transcript.tool_call("Read", {"file_path": f"/home/user/project/{source.relative_to(REPO)}"})
        transcript.tool_result(call, text[:2000])
        call = transcript.tool_call("Bash", {"command": f"grep -n 'def ' {source.name} | head -20"})
        defs = "\n".join(f"{n}:{line}" for n, line in enumerate(text.splitlines()) if "def " in line)
        transcript.tool_result(call, defs[:2000])
        transcript.assistant(prose[(i * 7) % len(prose)][:800])


def ingest(checkout: Path, transcript: Path, folder: Path, profile: bool = False) -> tuple[float, float, float | None]:
    """(wall seconds, CPU seconds of the child, the scan's share of its time when profiled)."""
    db = folder / f"om-{time.monotonic_ns()}.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith("OM_") and k != "PYTHONDONTWRITEBYTECODE"}
    # Bytecode cached as an installed package has it (each checkout apart), so neither pays for compiling
    env.update(PYTHONPATH=str(checkout), HOME=str(folder), OM_DB_PATH=str(db))
    env["PYTHONPYCACHEPREFIX"] = str(folder / "pycache" / checkout.name)
    head = ["-c", _PROFILE] if profile else ["-m", "om_mcp"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *head, "ingest", str(transcript), "--no-worker", "--json"],
        env=env,
        capture_output=True,
        text=True,
        cwd=folder,
    )
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode != 0:
        raise SystemExit(f"ingest failed in {checkout}: {done.stderr}")
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    share = next((float(line.split()[1]) for line in done.stderr.splitlines() if line.startswith("SHARE ")), None)
    return elapsed, cpu, share


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=600)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--compare", type=Path, help="another checkout of om-mcp (e.g. the base commit)")
    args = parser.parse_args()
    checkouts = {"this": REPO}
    if args.compare:
        checkouts["compare"] = args.compare.resolve()
    with tempfile.TemporaryDirectory(prefix="om-ingest-bench-") as tmp:
        folder = Path(tmp)
        transcript = folder / "session.jsonl"
        write_transcript(transcript, args.turns)
        size = transcript.stat().st_size / 1e6
        messages = sum(
            1 for line in transcript.open() if json.loads(line).get("type") in ("user", "assistant")
        )  # transcript entries that become messages
        walls: dict[str, list[float]] = {name: [] for name in checkouts}
        cpus: dict[str, list[float]] = {name: [] for name in checkouts}
        for checkout in checkouts.values():
            ingest(checkout, transcript, folder)  # writes each checkout's bytecode cache once
        for _ in range(args.runs):
            for name, checkout in checkouts.items():  # interleaved: the load falls on both
                wall, cpu, _ = ingest(checkout, transcript, folder)
                walls[name].append(wall)
                cpus[name].append(cpu)
        shares = {name: ingest(checkout, transcript, folder, profile=True)[2] for name, checkout in checkouts.items()}
        print(f"transcript: {args.turns} turns, {messages} entries, {size:.1f} MB; medians of {args.runs} runs")
        for name, checkout in checkouts.items():
            wall, cpu = statistics.median(walls[name]), statistics.median(cpus[name])
            share = f"{shares[name] * 100:.1f} %" if shares[name] is not None else "?"
            print(
                f"{name:8s} {checkout}: {wall:.2f} s wall, {cpu:.2f} s CPU ({messages / cpu:,.0f} entries/s,"
                f" {size / cpu:.2f} MB/s of CPU); the secret scan {share} of the command's time (cProfile)"
            )
        for name, checkout in checkouts.items():
            scan = child_seconds(checkout, folder, _SCAN, str(transcript))
            cold = min(child_seconds(checkout, folder, _COLD) for _ in range(7))
            print(
                f"{name:8s} the scan alone over the {messages} entries: {scan * 1000:.0f} ms CPU;"
                f" a hook's cold start (import, build, one turn): {cold * 1000:.1f} ms CPU"
            )
        if args.compare:
            for what, runs in (("wall", walls), ("CPU", cpus)):
                ratio = statistics.median(runs["this"]) / statistics.median(runs["compare"])
                print(f"this / compare, {what}: {ratio:.3f} (below 1: this checkout is faster)")


if __name__ == "__main__":
    main()
