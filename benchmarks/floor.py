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
prints the medians (ms of wall time per call, as the client waits for it) and their ratio, against the
issue's goal:
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
    (goal >= 0.5x of the bare server's).
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
        cwd=REPO,
    )


def copy_db(source: Path, target: Path) -> Path:
    for suffix in ("", "-wal", "-shm"):
        if Path(f"{source}{suffix}").exists():
            shutil.copy(f"{source}{suffix}", f"{target}{suffix}")
    return target


class Servers:
    def __init__(self, db: Path, env: dict[str, str], folder: Path, tag: str):
        self.om = StdioServer(copy_db(db, folder / f"om-{tag}.db"), env, name="floor")
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


def pair(om: Callable[[int], Any], bare: Callable[[int], Any], calls: int, warm: int = 3) -> tuple[float, float]:
    """Medians (ms) of `calls` calls each, alternating (and alternating which goes first)."""
    for i in range(warm):
        om(-1 - i)
        bare(-1 - i)
    a, b = [], []
    for i in range(calls):
        if i % 2:
            b.append(timed(lambda: bare(i)))  # noqa: B023 - called at once
            a.append(timed(lambda: om(i)))  # noqa: B023
        else:
            a.append(timed(lambda: om(i)))  # noqa: B023
            b.append(timed(lambda: bare(i)))  # noqa: B023
    return statistics.median(a), statistics.median(b)


def report(results: list[tuple], row: str, size: int | None, om_ms: float, floor_ms: float, note: str = "") -> None:
    ratio = om_ms / floor_ms
    results.append((row, size, ratio))
    where = f"{size:>7,}" if size else f"{'':>7}"
    print(f"{row:<16} {where}  om-mcp {om_ms:8.2f}  floor {floor_ms:8.2f}  {ratio:6.2f}x  {note}", flush=True)


def measure_size(args, size: int, env: dict[str, str], db: Path, folder: Path, questions: list[str], results: list):
    servers = Servers(db, env, folder, str(size))
    om, bare = servers.om, servers.bare
    try:
        if "get_context" in args.only:
            k = len(om.tool("get_context", thread_id=THREAD, resource_id=RESOURCE)["messages"])
            om_ms, bare_ms = pair(
                lambda i: om.tool("get_context", thread_id=THREAD, resource_id=RESOURCE),
                lambda i: bare.tool("get_context", thread_id=THREAD, limit=k),
                args.calls,
            )
            report(results, "get_context", size, om_ms, bare_ms, f"({k} messages)")
        if "store" in args.only:
            om_ms, bare_ms = pair(
                lambda i: om.tool("append_messages", thread_id="s", resource_id=RESOURCE, user=f"note {i}: {size}"),
                lambda i: bare.tool(
                    "append_messages",
                    thread_id="s",
                    resource_id=RESOURCE,
                    messages=[{"role": "user", "content": f"note {i}: {size}"}],
                ),
                args.calls,
            )
            report(results, "store", size, om_ms, bare_ms, "(one message)")
        asked = [q for q in questions if match_of(q)]
        if "search" in args.only and size <= 10_000:
            bare.request("tools/call", {"name": "prepare_search", "arguments": {}}, timeout=600)
            om_ms, bare_ms = pair(
                lambda i: om.tool(
                    "recall", thread_id=THREAD, resource_id=RESOURCE, mode="search", query=asked[i % len(asked)]
                ),
                lambda i: bare.tool("search", match=match_of(asked[i % len(asked)]), limit=10),
                min(args.queries, len(asked)),
            )
            report(results, "search", size, om_ms, bare_ms, "(recall search vs bm25 in process + a round trip)")
        if "thread search" in args.only and size >= 10_000:
            n = min(args.thread_queries, len(asked))
            om_ms, res_ms = pair(
                lambda i: om.tool(
                    "recall", thread_id=THREAD, resource_id=RESOURCE, mode="search", scope="thread", query=asked[i % n]
                ),
                lambda i: om.tool("recall", thread_id=THREAD, resource_id=RESOURCE, mode="search", query=asked[i % n]),
                n,
                warm=1,
            )
            report(results, "thread search", size, om_ms, res_ms, "(scope=thread vs scope=resource, both om-mcp)")
    finally:
        servers.stop()


def first_store(args, env: dict[str, str], empty: Path, folder: Path, results: list) -> None:
    firsts, steadies, bare_firsts = [], [], []
    for run in range(args.first_runs):
        servers = Servers(empty, env, folder, f"first{run}")
        try:
            firsts.append(
                timed(lambda: servers.om.tool("append_messages", thread_id="f", user="the first note"))  # noqa: B023
            )
            bare_firsts.append(
                timed(
                    lambda: servers.bare.tool(  # noqa: B023
                        "append_messages", thread_id="f", messages=[{"role": "user", "content": "the first note"}]
                    )
                )
            )
            for i in range(20):
                steadies.append(
                    timed(lambda: servers.om.tool("append_messages", thread_id="f", user=f"note {i}"))  # noqa: B023
                )
        finally:
            servers.stop()
    first, steady = statistics.median(firsts), statistics.median(steadies)
    report(
        results,
        "first store",
        None,
        first,
        steady,
        f"(fresh server's first store vs its steady store; the bare server's first {statistics.median(bare_firsts):.2f}"
        f" ms, {first / statistics.median(bare_firsts):.1f}x)",
    )


def ingest(args, env: dict[str, str], empty: Path, folder: Path, turns: list[str], results: list) -> None:
    servers = Servers(empty, env, folder, "ingest")
    rows = [
        {"id": f"i{i}", "role": "user" if i % 2 == 0 else "assistant", "content": turns[i % len(turns)]}
        for i in range(args.ingest)
    ]
    batches = [rows[i : i + 100] for i in range(0, len(rows), 100)]
    om_s = bare_s = 0.0
    try:
        for i, batch in enumerate(batches):
            calls = [
                ("om", lambda: servers.om.tool("append_messages", thread_id="in", messages=batch)),  # noqa: B023
                ("bare", lambda: servers.bare.tool("append_messages", thread_id="in", messages=batch)),  # noqa: B023
            ]
            for name, call in calls if i % 2 == 0 else reversed(calls):
                took = timed(call) / 1000
                if name == "om":
                    om_s += took
                else:
                    bare_s += took
    finally:
        servers.stop()
    om_rate, bare_rate = len(rows) / om_s, len(rows) / bare_s
    report(results, "ingest over MCP", None, om_rate, bare_rate, f"(messages/s, {len(rows):,} in batches of 100)")


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
    for row, size, ratio in results:
        goal, sense = GOALS[row]
        met = ratio <= goal if sense == "<=" else ratio >= goal
        name = row.replace(" ", "_") + (f"@{size}" if size else "")
        print(f"RATIO {name} {ratio:.2f} {sense}{goal} {'met' if met else 'missed'}")


if __name__ == "__main__":
    main()
