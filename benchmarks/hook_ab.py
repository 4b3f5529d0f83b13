"""The hook's latency in this checkout beside another one, one run of each in turn, so that the
load of a shared machine falls on both alike (a change's cost, where `hook.py`'s figures from
two separate runs differ by more than the change).

    .venv/bin/python benchmarks/hook_ab.py --other /path/to/checkout/.venv/bin/om-mcp [--pairs 100]

Each side gets a copy of one database (`hook.py`'s: --messages messages of 200 sessions, a
2,000-line observation log, a live worker lease so no worker starts) and its own transcript,
data and cache folders. Each pair appends one turn to both transcripts and runs the
UserPromptSubmit hook on both, then SessionStart on both, which side goes first alternating.
Prints, per event and side, the median wall and CPU milliseconds of a run from spawn to exit,
and the ratios this checkout / the other (within 1.10: the change costs under 10 %).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from hook import build_database, command

from om_mcp.store import coordination
from om_mcp.store.sessions import WORKER_LEASE
from om_mcp.store.sqlite import direct
from om_mcp.store.sqlite.driver import run
from om_mcp.testing.transcripts import ClaudeTranscript


def timed(argv: list[str], event: dict, env: dict) -> tuple[float, float]:
    """(wall, CPU) seconds of one hook run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [*argv, "hook", "claude-code"], input=json.dumps(event).encode(), capture_output=True, env=env
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert done.returncode == 0, done.stderr
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--other", required=True, help="the other checkout's om-mcp (its .venv/bin/om-mcp)")
    parser.add_argument("--pairs", type=int, default=100)
    parser.add_argument("--messages", type=int, default=100_000)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="om-hook-ab-"))
    try:
        project = folder / "project"
        (project / ".git").mkdir(parents=True)
        build_database(str(folder / "built.db"), str(project), args.messages, 2000)
        sides = {"this": command(), "other": [args.other]}
        envs, transcripts = {}, {}
        for side in sides:
            shutil.copy(folder / "built.db", folder / f"{side}.db")
            conn = direct.open_database(str(folder / f"{side}.db"))
            direct.write(conn, lambda c: run(c, coordination.acquire_lease, *WORKER_LEASE, "benchmark", 3600.0))
            conn.close()
            (folder / side).mkdir()
            env = {k: v for k, v in os.environ.items() if not k.startswith("OM_") and not k.endswith("_API_KEY")}
            env.update(
                HOME=str(folder / side),
                XDG_DATA_HOME=str(folder / side / "data"),
                XDG_CACHE_HOME=str(folder / side / "cache"),
                OM_DB_PATH=str(folder / f"{side}.db"),
                OM_MODEL="openai/gpt-4o-mini",
            )
            envs[side] = env
            transcripts[side] = ClaudeTranscript(folder / side / "session.jsonl", "bench-session", str(project))
            transcripts[side].turn("set up the project", "Done.")
        base = {"session_id": "bench-session", "cwd": str(project)}
        for side, argv in sides.items():  # the config cache and the first read, untimed
            timed(argv, {**base, "transcript_path": str(transcripts[side].path), "hook_event_name": "Stop"}, envs[side])
        times: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for n in range(args.pairs):
            order = list(sides) if n % 2 == 0 else list(reversed(sides))
            for name, event in (("UserPromptSubmit", {"prompt": "x"}), ("SessionStart", {"source": "startup"})):
                for side in order:
                    if name == "UserPromptSubmit":
                        transcripts[side].turn(
                            f"step {n}: change the retry policy",
                            "Changed it; tests pass.",
                            tool=("Bash", {"command": "pytest -q"}, "12 passed"),
                        )
                    call = {**base, **event, "transcript_path": str(transcripts[side].path), "hook_event_name": name}
                    times.setdefault((name, side), []).append(timed(sides[side], call, envs[side]))
        print(f"{args.pairs} pairs, {args.messages:,} messages; medians in ms")
        heads = ("wall this", "wall other", "ratio", "cpu this", "cpu other", "ratio")
        print(f"{'event':<18} " + " ".join(f"{h:>10}" for h in heads))
        for name in ("UserPromptSubmit", "SessionStart"):
            this, other = times[(name, "this")], times[(name, "other")]
            wall = [statistics.median(t[0] for t in s) * 1000 for s in (this, other)]
            cpu = [statistics.median(t[1] for t in s) * 1000 for s in (this, other)]
            print(
                f"{name:<18} {wall[0]:>10.0f} {wall[1]:>10.0f} {wall[0] / wall[1]:>10.2f}"
                f" {cpu[0]:>10.0f} {cpu[1]:>10.0f} {cpu[0] / cpu[1]:>10.2f}"
            )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
