"""How long the Claude Code hook's pure work takes: reading and converting a
transcript (first read of a long session, then one new turn), and rendering
the SessionStart context from a large observation log.

    python benchmarks/hook_ingest.py [--mb 20] [--repeat 5]

The transcript is the real fixture session repeated with fresh uuids until it
reaches the size asked for. Medians of `--repeat` runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from om_mcp.engine.recorder.text import render_session_context
from om_mcp.hosts.claude_code import TranscriptState, read_messages

FIXTURE = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "claude_code" / "session.jsonl"


def build(path: Path, megabytes: float) -> int:
    entries = [json.loads(line) for line in FIXTURE.read_text().splitlines()]
    size, count = 0, 0
    with path.open("w") as out:
        while size < megabytes * 1_000_000:
            for entry in entries:
                if "uuid" in entry:
                    entry = {**entry, "uuid": str(uuid.uuid4())}
                line = json.dumps(entry, separators=(",", ":")) + "\n"
                out.write(line)
                size += len(line)
                count += 1
    return count


def median_seconds(run, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=float, default=20.0)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "session.jsonl"
        lines = build(path, args.mb)
        size = path.stat().st_size
        messages, state = read_messages(path)
        full = median_seconds(lambda: read_messages(path), args.repeat)
        print(f"transcript: {size / 1e6:.1f} MB, {lines} lines, {len(messages)} messages")
        print(f"first read + convert: {full * 1000:.0f} ms median ({size / 1e6 / full:.1f} MB/s)")

        turn = FIXTURE.read_text().splitlines(keepends=True)[4:12]  # one user turn with a tool call

        def one_turn() -> None:
            nonlocal state
            with path.open("a") as out:
                for line in turn:
                    entry = json.loads(line)
                    entry["uuid"] = str(uuid.uuid4())
                    out.write(json.dumps(entry) + "\n")
            _, state = read_messages(path, TranscriptState.from_dict(state.to_dict()))

        inc = median_seconds(one_turn, args.repeat)
        print(f"incremental read of one new turn on that file: {inc * 1000:.2f} ms median")

    day = "\n".join(
        f"* {'🔴' if i % 7 == 0 else '🟡'} (10:{i % 60:02d}) observation {i} " + "x" * 80 for i in range(40)
    )
    log = "\n".join(f"Date: Dec {d}, 2025\n{day}" for d in range(1, 29))
    render = median_seconds(lambda: render_session_context(log, "wm " * 500, "task", "reply", 8000), args.repeat)
    print(f"SessionStart context from a {len(log) / 1000:.0f} KB log cut to 8,000 chars: {render * 1000:.1f} ms median")


if __name__ == "__main__":
    main()
