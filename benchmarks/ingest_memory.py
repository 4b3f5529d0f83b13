"""`om-mcp ingest` of a long transcript: the peak memory (RSS) of the command, which reads the file a
bounded piece at a time (issue 35's goal: at most 200 MiB for 1M messages).

    .venv/bin/python benchmarks/ingest_memory.py [--messages 1000000] [--format claude-code|openai-messages]
        [--other /path/to/checkout/.venv/bin/python]

Writes a transcript of `--messages` messages (a Claude Code session of prompts and replies of 20 to
60 words, or one OpenAI-style message a line), then runs `python -m om_mcp ingest FILE --no-worker`
on a new database and samples the child's VmHWM (its peak resident set, from /proc) until it exits;
prints the peak in MiB, the time, and the messages stored. `--other` runs another checkout's
interpreter on the same file the same way, after this one (its own new database).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORDS = (
    "the build uses sqlite wal mode with a busy timeout so hooks never block the agent while servers write "
    "we decided to keep the cache in redis and the queue in postgres after the load test last week"
).split()


def write_transcript(path: Path, count: int, fmt: str) -> None:
    rng = random.Random(7)
    session = "bench-ingest-session"
    with path.open("w", encoding="utf-8") as out:
        parent = None
        for n in range(count):
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 60)))
            role = "user" if n % 2 == 0 else "assistant"
            when = f"2026-01-05T10:{(n // 60) % 60:02d}:{n % 60:02d}.000Z"
            if fmt == "openai-messages":
                out.write(json.dumps({"id": f"m{n}", "role": role, "content": text, "created_at": when}) + "\n")
                continue
            uuid = f"00000000-0000-4000-8000-{n:012d}"
            content: object = text if role == "user" else [{"type": "text", "text": text}]
            entry = {
                "parentUuid": parent,
                "isSidechain": False,
                "userType": "external",
                "cwd": "/home/user/project",
                "sessionId": session,
                "version": "2.1.197",
                "gitBranch": "main",
                "type": role,
                "message": {"role": role, "content": content},
                "uuid": uuid,
                "timestamp": when,
            }
            out.write(json.dumps(entry) + "\n")
            parent = uuid


def peak_of(python: str, transcript: Path, folder: Path, fmt: str) -> tuple[float, float, int]:
    """(peak RSS in MiB, seconds, messages stored) of one `om-mcp ingest` in a fresh database."""
    db = folder / f"ingest-{time.monotonic_ns()}.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith("OM_") and not k.endswith("_API_KEY")}
    env.update(HOME=str(folder), XDG_DATA_HOME=str(folder / "data"), XDG_CACHE_HOME=str(folder / "cache"))
    env["XDG_CONFIG_HOME"] = str(folder / "config")
    argv = [python, "-m", "om_mcp", "ingest", str(transcript), "--format", fmt, "--no-worker", "--db", str(db)]
    started = time.monotonic()
    child = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    peak = 0
    status = Path(f"/proc/{child.pid}/status")
    while child.poll() is None:
        try:
            for line in status.read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peak = max(peak, int(line.split()[1]))
        except OSError:
            break
        time.sleep(0.2)
    out, err = child.communicate()
    took = time.monotonic() - started
    if child.returncode != 0:
        raise SystemExit(f"ingest failed ({child.returncode}): {err.decode()[-2000:]}")
    conn = sqlite3.connect(db)
    stored = conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0]
    conn.close()
    return peak / 1024, took, stored


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--format", choices=("claude-code", "openai-messages"), default="claude-code")
    parser.add_argument("--other", help="another checkout's python (its .venv/bin/python)")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="om-ingest-memory-"))
    try:
        transcript = folder / "session.jsonl"
        started = time.monotonic()
        write_transcript(transcript, args.messages, args.format)
        size = transcript.stat().st_size
        print(
            f"{args.format} transcript: {args.messages:,} messages, {size / 2**20:,.0f} MiB, written in "
            f"{time.monotonic() - started:.0f} s"
        )
        sides = [("this", sys.executable)] + ([("other", args.other)] if args.other else [])
        for name, python in sides:
            peak, took, stored = peak_of(python, transcript, folder, args.format)
            print(f"{name:<6} peak RSS {peak:,.0f} MiB, {took:,.0f} s, {stored:,} messages stored ({python})")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
