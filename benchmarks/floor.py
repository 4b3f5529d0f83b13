"""om-mcp over stdio beside its floor, in one interleaved run: the ratios issue 35 holds.

    python benchmarks/floor.py [--sizes 1000,10000,100000] [--calls 100] [--queries 40]
        [--thread-queries 10] [--ingest 5000] [--checkout PATH] [--only get_context,store,...]

For each size N, one thread of N messages (LoCoMo's dev turns cycled, CC BY-NC 4.0; synthetic text
without it) is stored through om-mcp's own engine, in a child that runs the checkout under test
(`--checkout`, default this one: a "before" figure runs the same script against an older tree).
Then two servers are spawned on copies of that file and spoken to over raw pipes (no client SDK):
  * om-mcp: `python -m om_mcp serve`, its model configured but never due (the tool path alone);
  * bare:   `benchmarks/bare_server.py`, the SDK's `MCPServer` doing the same storage work.
Every figure alternates the two servers call by call, so the machine's load falls on both; each row
prints the medians of the wall time per call (as the client waits for it) and of the server's CPU time
per call (its threads' run time from /proc: what a loaded machine inflates least), their ratios, and
the goal, judged by the CPU ratio:
  * get_context: om-mcp's default get_context against the bare server returning the same number of
    newest messages (goal <= 1.5x);
  * store: append_messages of one message (goal <= 1.3x);
  * search: `recall` mode=search (resource scope) against a ranked bm25 floor: the bare server's best 10
    of a plain FTS5 table, in its process, plus its one MCP round trip (goal <= 2x; at 1k and 10k);
  * thread search: the same questions with scope="thread" against resource scope, both om-mcp (goal
    <= 2x; at 10k and 100k);
  * first store: a fresh server's first append_messages after the handshake against its steady one
    (goal <= 1.5x), a fresh spawn per run (`--first-runs`);
  * ingest over MCP: `--ingest` messages in batches of 100 into an empty thread, messages per second
    (goal >= 0.5x of the bare server's: the ratio is the bare server's time over om-mcp's).
The last lines, `RATIO <row> <value> <goal> met|missed`, are what the CI benchmark job keeps.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from stdio_client import StdioServer, compiled

REPO = Path(__file__).resolve().parent.parent
BARE = Path(__file__).resolve().parent / "bare_server.py"
THREAD, RESOURCE = "t", "r"
STOP = set(
    "a an and are as at be but by did do does for from had has have he her his how i in is it its me my of on or she"
    " so that the their them they this to was we were what when where which who why will with would you your".split()
)
GOALS = {  # row -> (goal, "<=" or ">=")
    "get_context": (1.5, "<="),
    "store": (1.3, "<="),
    "search": (2.0, "<="),
    "thread search": (2.0, "<="),
    "first store": (1.5, "<="),
    "ingest over MCP": (0.5, ">="),
}

BUILD = """
import asyncio, json, sys
from om_mcp.config import load_config
from om_mcp.engine import Memory

async def main(db, n, turns):
    memory = await Memory.open(load_config(env=json.loads(sys.argv[4])), db)
    async with memory:
        for start in range(0, n, 1000):
            batch = [
                {"id": f"m{i}", "role": "user" if i % 2 == 0 else "assistant", "content": turns[i % len(turns)]}
                for i in range(start, min(start + 1000, n))
            ]
            await memory.append_messages("t", batch, "r")
        if n == 0:
            await memory.store.tokenizer_id(memory.counter.cache_key)

asyncio.run(main(sys.argv[1], int(sys.argv[2]), json.load(open(sys.argv[3]))))
"""


def texts() -> tuple[list[str], list[str]]:
    """LoCoMo's turns and questions, or synthetic ones."""
    data = next(
        (p / "shared/data/locomo/locomo_dev.json" for p in REPO.parents if (p / "shared/data/locomo").exists()), None
    )
    if data is None:
        words = "we talked about the trip the budget the museum and the rollback plan for the release".split()
        turns = [" ".join(words[(i * 7 + j) % len(words)] for j in range(8 + i % 30)) for i in range(2000)]
        return turns, [" ".join(words[i % len(words)] for i in range(k, k + 4)) for k in range(100)]
    turns, questions = [], []
    for sample in json.loads(data.read_text()):
        conv = sample["conversation"]
        for key in sorted((k for k in conv if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k[8:])):
            turns += [t["text"] for t in conv[key] if t.get("text")]
        questions += [q["question"] for q in sample["qa"]]
    return turns, questions


def match_of(question: str) -> str:
    words = [w for w in dict.fromkeys(re.findall(r"[^\W_]+", question.lower())) if w not in STOP]
    return " OR ".join(f'"{w}"' for w in words)


def server_env(checkout: Path, home: Path) -> dict[str, str]:
    """om-mcp with a model configured but never due: no cycle, no client load, the tool path alone."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OM_") and not k.endswith("_API_KEY")}
    env.update(
        PYTHONPATH=str(checkout),
        HOME=str(home),
        XDG_DATA_HOME=str(home / "data"),
        XDG_CONFIG_HOME=str(home / "config"),
        XDG_CACHE_HOME=str(home / "cache"),
        OM_OBSERVATIONAL_MEMORY__MODEL=json.dumps({"model": "openai/unused", "api_base": "http://127.0.0.1:9/v1"}),
        OM_OBSERVATIONAL_MEMORY__OBSERVATION__MESSAGE_TOKENS="1000000000",
    )
    return compiled(env)


def config_env(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith("OM_")}


def build(env: dict[str, str], db: Path, n: int, turns_file: Path) -> None:
    subprocess.run(
        [sys.executable, "-c", BUILD, str(db), str(n), str(turns_file), json.dumps(config_env(env))],
        env=env,
        check=True,
        cwd=env["PYTHONPATH"],  # `python -c` runs the om_mcp of its working folder first
    )


def copy_db(source: Path, target: Path) -> Path:
    for suffix in ("", "-wal", "-shm"):
        if Path(f"{source}{suffix}").exists():
            shutil.copy(f"{source}{suffix}", f"{target}{suffix}")
    return target


class Servers:
    def __init__(self, db: Path, env: dict[str, str], folder: Path, tag: str):
        home = Path(env["PYTHONPATH"])  # `python -m` runs the om_mcp of its working folder first
        self.om = StdioServer(copy_db(db, folder / f"om-{tag}.db"), env, name="floor", cwd=home)
        self.bare = StdioServer(
            None, env, name="floor", command=[sys.executable, str(BARE), str(copy_db(db, folder / f"bare-{tag}.db"))]
        )
        self.om.request("tools/list", {})
        self.bare.request("tools/list", {})

    def stop(self) -> None:
        self.om.stop()
        self.bare.stop()


def timed(call: Callable[[], Any]) -> float:
    start = time.perf_counter()
    call()
    return (time.perf_counter() - start) * 1000


def cpu_ms(pid: int) -> float:
    """The CPU time a process's threads have run, in ms (the scheduler's own count, to the nanosecond)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass  # a thread that just ended
    return total / 1e6


class Clock:
    """Wall time per call (as the client waits) and the server's CPU time per call (what a loaded
    machine inflates least: the CPU the server spent, not the time it waited for one)."""

    def __init__(self, pid: int):
        self.pid = pid
        self.wall: list[float] = []
        self.cpu: list[float] = []

    def __call__(self, call: Callable[[], Any]) -> None:
        cpu = cpu_ms(self.pid)
        self.wall.append(timed(call))
        self.cpu.append(cpu_ms(self.pid) - cpu)

    def medians(self) -> tuple[float, float]:
        return statistics.median(self.wall), statistics.median(self.cpu)


def pair(
    om: Callable[[int], Any], bare: Callable[[int], Any], calls: int, pids: tuple[int, int], warm: int = 3
) -> tuple[Clock, Clock]:
    """`calls` calls each, alternating (and alternating which goes first)."""
    for i in range(warm):
        om(-1 - i)
        bare(-1 - i)
    a, b = Clock(pids[0]), Clock(pids[1])
    for i in range(calls):
        order = [(a, om), (b, bare)]
        for clock, call in order if i % 2 == 0 else reversed(order):
            clock(lambda: call(i))  # noqa: B023 - called at once
    return a, b


def report(results: list[tuple], row: str, size: int | None, om: Clock, floor: Clock, note: str = "") -> None:
    (om_wall, om_cpu), (floor_wall, floor_cpu) = om.medians(), floor.medians()
    wall, cpu = om_wall / floor_wall, om_cpu / floor_cpu
    results.append((row, size, wall, cpu))
    where = f"{size:>7,}" if size else f"{'':>7}"
    print(
        f"{row:<16} {where}  wall {om_wall:8.2f} / {floor_wall:8.2f} = {wall:5.2f}x"
        f"  server CPU {om_cpu:7.2f} / {floor_cpu:7.2f} = {cpu:5.2f}x  {note}",
        flush=True,
    )


def measure_size(args, size: int, env: dict[str, str], db: Path, folder: Path, questions: list[str], results: list):
    servers = Servers(db, env, folder, str(size))
    om, bare = servers.om, servers.bare
    pids = (om.proc.pid, bare.proc.pid)
    try:
        if "get_context" in args.only:
            k = len(om.tool("get_context", thread_id=THREAD, resource_id=RESOURCE)["messages"])
            a, b = pair(
                lambda i: om.tool("get_context", thread_id=THREAD, resource_id=RESOURCE),
                lambda i: bare.tool("get_context", thread_id=THREAD, limit=k),
                args.calls,
                pids,
            )
            report(results, "get_context", size, a, b, f"({k} messages)")
        if "store" in args.only:
            a, b = pair(
                lambda i: om.tool("append_messages", thread_id="s", resource_id=RESOURCE, user=f"note {i}: {size}"),
                lambda i: bare.tool(
                    "append_messages",
                    thread_id="s",
                    resource_id=RESOURCE,
                    messages=[{"role": "user", "content": f"note {i}: {size}"}],
                ),
                args.calls,
                pids,
            )
            report(results, "store", size, a, b, "(one message)")
        asked = [q for q in questions if match_of(q)]
        if "search" in args.only and size <= 10_000:
            bare.request("tools/call", {"name": "prepare_search", "arguments": {}}, timeout=600)
            a, b = pair(
                lambda i: om.tool(
                    "recall", thread_id=THREAD, resource_id=RESOURCE, mode="search", query=asked[i % len(asked)]
                ),
                lambda i: bare.tool("search", match=match_of(asked[i % len(asked)]), limit=10),
                min(args.queries, len(asked)),
                pids,
            )
            report(results, "search", size, a, b, "(recall search vs bm25 in process + a round trip)")
        if "thread search" in args.only and size >= 10_000:
            n = min(args.thread_queries, len(asked))
            a, b = pair(
                lambda i: om.tool(
                    "recall", thread_id=THREAD, resource_id=RESOURCE, mode="search", scope="thread", query=asked[i % n]
                ),
                lambda i: om.tool("recall", thread_id=THREAD, resource_id=RESOURCE, mode="search", query=asked[i % n]),
                n,
                (om.proc.pid, om.proc.pid),
                warm=1,
            )
            report(results, "thread search", size, a, b, "(scope=thread vs scope=resource, both om-mcp)")
    finally:
        servers.stop()


def first_store(args, env: dict[str, str], empty: Path, folder: Path, results: list) -> None:
    """A fresh server's first store after the handshake, against its steady store (and the bare server's first)."""
    first, steady, bare_first = Clock(0), Clock(0), Clock(0)
    for run in range(args.first_runs):
        servers = Servers(empty, env, folder, f"first{run}")
        first.pid = steady.pid = servers.om.proc.pid
        bare_first.pid = servers.bare.proc.pid
        try:
            first(lambda: servers.om.tool("append_messages", thread_id="f", user="the first note"))  # noqa: B023
            bare_first(
                lambda: servers.bare.tool(  # noqa: B023
                    "append_messages", thread_id="f", messages=[{"role": "user", "content": "the first note"}]
                )
            )
            for i in range(20):
                steady(lambda: servers.om.tool("append_messages", thread_id="f", user=f"note {i}"))  # noqa: B023
        finally:
            servers.stop()
    wall, cpu = first.medians()
    bare_wall, bare_cpu = bare_first.medians()
    report(
        results,
        "first store",
        None,
        first,
        steady,
        f"(a fresh server's first store vs its steady one; vs the bare server's first: {wall / bare_wall:.1f}x wall,"
        f" {cpu / bare_cpu:.1f}x CPU)",
    )


def ingest(args, env: dict[str, str], empty: Path, folder: Path, turns: list[str], results: list) -> None:
    """Batches of 100 into an empty thread, alternating; the floor's time over om-mcp's (a rate's ratio)."""
    servers = Servers(empty, env, folder, "ingest")
    rows = [
        {"id": f"i{i}", "role": "user" if i % 2 == 0 else "assistant", "content": turns[i % len(turns)]}
        for i in range(args.ingest)
    ]
    batches = [rows[i : i + 100] for i in range(0, len(rows), 100)]
    om, bare = Clock(servers.om.proc.pid), Clock(servers.bare.proc.pid)
    try:
        for i, batch in enumerate(batches):
            calls = [
                (om, lambda: servers.om.tool("append_messages", thread_id="in", messages=batch)),  # noqa: B023
                (bare, lambda: servers.bare.tool("append_messages", thread_id="in", messages=batch)),  # noqa: B023
            ]
            for clock, call in calls if i % 2 == 0 else reversed(calls):
                clock(call)
    finally:
        servers.stop()
    # As rates (messages per second), the ratio is the floor's time over om-mcp's.
    report(results, "ingest over MCP", None, bare, om, f"(messages per second; {len(rows):,} in batches of 100)")
    wall, cpu = sum(om.wall) / 1000, sum(om.cpu) / 1000
    print(f"{'':>25}om-mcp {len(rows) / wall:,.0f} messages/s, {len(rows) / cpu:,.0f} per CPU second", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--thread-queries", type=int, default=10)
    parser.add_argument("--first-runs", type=int, default=5)
    parser.add_argument("--ingest", type=int, default=5000)
    parser.add_argument("--checkout", type=Path, default=REPO, help="the om-mcp tree to run (default: this one)")
    parser.add_argument("--only", default=",".join(GOALS), help="rows to run, by name")
    args = parser.parse_args()
    args.only = set(args.only.split(","))
    checkout = args.checkout.resolve()
    turns, questions = texts()
    questions = questions[:: max(1, len(questions) // max(args.queries, args.thread_queries, 1))]
    results: list[tuple] = []
    print(
        f"om-mcp at {checkout} beside the bare SDK server; load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}"
    )
    print(f"{'row':<16} {'size':>7}  medians in ms (ingest: messages/s)", flush=True)
    with tempfile.TemporaryDirectory(prefix="om-floor-") as tmp:
        folder = Path(tmp)
        (folder / "home").mkdir()
        env = server_env(checkout, folder / "home")
        turns_file = folder / "turns.json"
        turns_file.write_text(json.dumps(turns))
        empty = folder / "empty.db"
        build(env, empty, 0, turns_file)
        db, have = folder / "grown.db", 0
        for size in sorted(int(s) for s in args.sizes.split(",")):
            db = folder / f"n{size}.db"
            build(env, db, size, turns_file)
            have = size
            measure_size(args, have, env, db, folder, questions, results)
            for path in folder.glob(f"*-{size}.db*"):
                path.unlink()
        if "first store" in args.only:
            first_store(args, env, empty, folder, results)
        if "ingest over MCP" in args.only and args.ingest:
            ingest(args, env, empty, folder, turns, results)
    print(f"load average at the end {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    for row, size, wall, cpu in results:
        goal, sense = GOALS[row]
        met = cpu <= goal if sense == "<=" else cpu >= goal
        name = row.replace(" ", "_") + (f"@{size}" if size else "")
        print(f"RATIO {name} cpu {cpu:.2f} wall {wall:.2f} goal {sense}{goal} {'met' if met else 'missed'} (by CPU)")


if __name__ == "__main__":
    main()
