"""What the status page's reads cost on a large memory, through the engine (no HTTP, no browser).

    python benchmarks/status_page.py [--threads 1000] [--messages 40] [--repeat 30] [--dir DIR]

One SQLite memory, observation off (a memory the hooks recorded with no model): `--threads` threads of one
resource with `--messages` messages each, appended through `Memory.append_messages`. Each read runs
`--repeat` times; medians are printed beside their reference:
- the thread list (`MemorySource.threads`: the 200 newest with their windows, last cycle and first prompt)
  against the store's plain `list_threads` of the same 200 (what the first prompt and windows add);
- a page of 20 messages, newest first, and the same page from the middle of a thread (`before=` an id)
  against `Memory.messages` (the engine's plain read of the newest 20);
- a search of one thread (`q=`, the engine's search, best 20) against the same search over the whole
  resource (`Memory.search`), which recall runs;
- the first prompt alone: the 200 threads' statement with its subquery against the same statement
  without it (sqlite3 on the file, the statement as `store/overview.py` adds it).
The machine is shared: read the ratios, not the milliseconds.
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from om_mcp.config import Config  # noqa: E402
from om_mcp.engine import Memory  # noqa: E402
from om_mcp.server.http.ui.source import MemorySource  # noqa: E402

WORDS = (
    "deploy index migration cookie session checkout locale currency login test failing branch prompt "
    "schema table column query cache token retry timeout docker build release review commit merge"
).split()


async def median_ms(repeat: int, call) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        await call()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


async def main(threads: int, messages: int, repeat: int, folder: Path) -> None:
    rng = random.Random(3)
    config = Config.model_validate({"db_path": str(folder / "memory.db"), "observational_memory": {"enabled": False}})
    memory = await Memory.open(config)
    try:
        started = time.perf_counter()
        for t in range(threads):
            batch = [
                {
                    "id": f"t{t}-m{n}",
                    "role": "user" if n % 2 == 0 else "assistant",
                    "content": " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 40))),
                }
                for n in range(messages)
            ]
            await memory.append_messages(f"thread-{t:05d}", batch, "project")
        print(f"{threads:,} threads x {messages} messages appended in {time.perf_counter() - started:.1f} s")
        source = MemorySource(lambda: memory)
        middle = f"t{threads - 1}-m{messages // 2}"
        newest = f"thread-{threads - 1:05d}"

        async def plain_list():
            await memory.store.list_threads("project", limit=200)

        rows = [
            ("thread list, 200 newest", lambda: source.threads("project"), "store list_threads(200)", plain_list),
            (
                "20 newest messages",
                lambda: source.messages(newest, limit=20),
                "Memory.messages(20)",
                lambda: memory.messages(newest, 20),
            ),
            (
                "20 messages before the middle one",
                lambda: source.messages(newest, limit=20, before=middle),
                "Memory.messages(20)",
                lambda: memory.messages(newest, 20),
            ),
            (
                "search one thread (q=deploy cookie)",
                lambda: source.messages(newest, limit=20, query="deploy cookie"),
                "Memory.search, whole resource",
                lambda: memory.search(newest, "deploy cookie", "project", limit=20),
            ),
        ]
        print(f"\n{'read':38} {'median':>9}   {'reference':32} {'median':>9}  ratio")
        for name, call, reference, baseline in rows:
            ours, theirs = await median_ms(repeat, call), await median_ms(repeat, baseline)
            print(f"{name:38} {ours:7.2f} ms   {reference:32} {theirs:7.2f} ms  {ours / theirs:5.2f}")
        db = sqlite3.connect(folder / "memory.db")
        listed = " FROM threads t WHERE t.resource_id = 'project' ORDER BY t.updated_at DESC, t.id LIMIT 200"
        prompt = (
            ", (SELECT SUBSTR(m.body, 1, 300) FROM messages m WHERE m.thread_id = t.id AND m.role = 'user'"
            " ORDER BY m.seq LIMIT 1)"
        )

        async def run(sql: str) -> None:
            db.execute(sql).fetchall()

        ours = await median_ms(repeat, lambda: run(f"SELECT t.id{prompt}{listed}"))
        theirs = await median_ms(repeat, lambda: run(f"SELECT t.id{listed}"))
        name, reference = "200 threads with their first prompt", "the same without it"
        print(f"{name:38} {ours:7.2f} ms   {reference:32} {theirs:7.2f} ms  {ours / theirs:5.2f}")
        db.close()
    finally:
        await memory.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1000)
    parser.add_argument("--messages", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--dir", type=Path, help="where the database goes (default: a temporary folder)")
    args = parser.parse_args()
    if args.dir:
        args.dir.mkdir(parents=True, exist_ok=True)
        anyio.run(main, args.threads, args.messages, args.repeat, args.dir)
    else:
        with tempfile.TemporaryDirectory(prefix="om-status-bench-") as folder:
            anyio.run(main, args.threads, args.messages, args.repeat, Path(folder))
