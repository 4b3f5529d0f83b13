"""Moving memories with the shell commands, timed end to end (process start included).

Usage: python benchmarks/import_export.py [--messages 10000] [--per-thread 20] [--runs 3]

1. A Claude export of `--messages` messages (about 600 characters each, `--per-thread`
   per conversation, written by benchmarks/import_parse.py) is imported with
   `om-mcp import` into a fresh database: the median wall time of the runs, and the
   time to import it again (everything already there).
2. That database is moved with the two commands of docs/commands.md, `om-mcp export` and
   `om-mcp import` into an empty database: the median time of each, the file size,
   and a check that every thread's `show --json` and a few searches match.
Nothing is observed (no model is configured): this measures storing, counting and indexing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from import_parse import make_claude  # noqa: E402
from stdio_client import compiled  # noqa: E402

ENV_DROP = ("OM_", "GEMINI_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY")


def om(*args: str, out: Path | None = None) -> tuple[float, subprocess.CompletedProcess]:
    import os

    env = compiled({k: v for k, v in os.environ.items() if not k.startswith(ENV_DROP)})
    started = time.perf_counter()
    with open(out, "w") if out else open(os.devnull, "w") as sink:
        done = subprocess.run(
            [sys.executable, "-m", "om_mcp", *args],
            stdout=sink if out else subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
    took = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"om-mcp {' '.join(args)} failed: {done.stderr}")
    return took, done


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--per-thread", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="om-bench-") as folder:
        root = Path(folder)
        export = root / "conversations.json"
        make_claude(export, args.messages, args.per_thread)
        first, again = [], []
        for run in range(args.runs):
            db = root / f"claude{run}.db"
            first.append(om("import", str(export), "--db", str(db))[0])
            again.append(om("import", str(export), "--db", str(db))[0])
        print(
            f"Claude export, {args.messages:,} messages in {args.messages // args.per_thread:,} conversations"
            f" ({export.stat().st_size / 1e6:.1f} MB): import {statistics.median(first):.2f} s"
            f" (runs {', '.join(f'{t:.2f}' for t in first)}), again {statistics.median(again):.2f} s"
        )

        source = root / "claude0.db"
        dump = root / "memory.jsonl"
        exports, imports = [], []
        for run in range(args.runs):
            exports.append(om("export", "--db", str(source), out=dump)[0])
            imports.append(om("import", str(dump), "--db", str(root / f"moved{run}.db"))[0])
        moved = root / "moved0.db"
        threads = json.loads(om("threads", "--json", "--limit", "100000", "--db", str(source))[1].stdout)
        same = all(
            json.loads(om("show", t["thread"], "--json", "--db", str(source))[1].stdout)
            == {**json.loads(om("show", t["thread"], "--json", "--db", str(moved))[1].stdout), "last_cycle": None}
            for t in threads[:20]
        )
        searches = all(
            om("search", q, "--json", "--db", str(source))[1].stdout
            == om("search", q, "--json", "--db", str(moved))[1].stdout
            for q in ("memory observation", "token budget window", "schema retry")
        )
        print(
            f"move: export {statistics.median(exports):.2f} s ({dump.stat().st_size / 1e6:.1f} MB JSONL),"
            f" import into an empty database {statistics.median(imports):.2f} s;"
            f" 20 threads' show and 3 searches identical: {same and searches}"
        )


if __name__ == "__main__":
    main()
