"""The engine at 1k to 1M messages: latency per operation beside raw SQLite, statements,
thread handoffs, bytes per message, RSS, and ingest over stdio.

One thread of N messages in one resource, for N in --sizes (1k, 10k, 100k by default;
--million adds 1M). The text is the LoCoMo dev turns (/work/shared/data/locomo, CC BY-NC 4.0,
evaluation only), cycled; the search queries are its questions. Databases are built once,
growing from one size to the next, through the engine's own store append (`intake.prepare`
counting with the real tokenizer, then `store.append_messages` in batches of 5,000 rows), and
copied per configuration. Each copy is opened in process with `om_mcp.engine.Memory`, inside
`memory.running()` and with the start-up heap frozen (`om_mcp.heap`) as the server runs it, in
two configurations:
  * off:     observational_memory.enabled = false;
  * no key:  the defaults with every *_API_KEY removed from the environment and the model forced
             to gemini/gemini-2.5-flash ("auto" could pick a `claude` command on PATH or sampling):
             a cycle is due the whole time (N unobserved messages) and no model can run.
Operations: get_context (default budget), append_messages with 1 message, recall search (the
tool's mode "search", rendered text), and the same search in the thread's scope. Beside each,
measured in the same run on the same file through a second plain sqlite3 connection: the tail
window (the newest `k` observable messages, k = what get_context returned), a 1-row insert into
messages and the FTS index in one transaction, a plain FTS5 bm25 top-20 for the same MATCH
expression (the thread's: the MATCH first, then its messages joined and filtered by thread).
Statements per operation come from `set_trace_callback` on the store's connection (split: ours /
run inside FTS5 on its shadow tables); trips = calls of database.py's `Database._run`; threads = all
`anyio.to_thread.run_sync` calls.

Ingest: batches of 100 messages through `python -m om_mcp serve` over stdio (raw JSON-RPC on
pipes), against a raw executemany of the same rows into the same schema.

    .venv/bin/python benchmarks/scale.py [--sizes 1000,10000,100000] [--million] [--samples 200]
        [--ingest 10000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))
for _name in [k for k in os.environ if k.endswith("_API_KEY") or k.startswith("OM_")]:
    del os.environ[_name]  # before anything reads them: the "no key" state is real

import anyio  # noqa: E402
from scale_process import ingest_table, rss_table  # noqa: E402

from om_mcp import heap  # noqa: E402
from om_mcp.config import load_config  # noqa: E402
from om_mcp.engine import Memory, intake  # noqa: E402
from om_mcp.engine.recall import RecallQuery  # noqa: E402
from om_mcp.engine.search.query import parse_query  # noqa: E402
from om_mcp.store.sqlite.database import Database  # noqa: E402

LOCOMO = next(
    (
        p / "shared/data/locomo/locomo_dev.json"
        for p in REPO.parents
        if (p / "shared/data/locomo/locomo_dev.json").exists()
    ),
    None,
)
THREAD, RESOURCE = "t", "r"
BUILD_BATCH = 5000
CONFIGS = {
    "off": {"OM_OBSERVATIONAL_MEMORY__ENABLED": "false"},
    "no key": {"OM_OBSERVATIONAL_MEMORY__MODEL": "gemini/gemini-2.5-flash"},
}
FTS_SHADOW = re.compile(r"\w+_fts_(data|idx|docsize|config|content)\b|^PRAGMA 'main'\.data_version", re.I)


def locomo() -> tuple[list[str], list[str]]:
    """LoCoMo turns and questions; varied synthetic text when the data set is absent."""
    if LOCOMO is None:
        words = "we talked about the trip the budget the museum and the rollback plan for the release".split()
        turns = [" ".join(words[(i * 7 + j) % len(words)] for j in range(8 + i % 30)) for i in range(2000)]
        return turns, [" ".join(words[i % len(words)] for i in range(k, k + 4)) for k in range(100)]
    data = json.loads(LOCOMO.read_text())
    turns, questions = [], []
    for sample in data:
        conv = sample["conversation"]
        for key in sorted((k for k in conv if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k[8:])):
            turns += [t["text"] for t in conv[key] if t.get("text")]
        questions += [q["question"] for q in sample["qa"]]
    return turns, questions


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def config_for(name: str):
    return load_config(env=dict(CONFIGS[name]))


def message(i: int, turns: list[str]) -> dict:
    return {"id": f"m{i}", "role": "user" if i % 2 == 0 else "assistant", "content": turns[i % len(turns)]}


# -- building ------------------------------------------------------------------------------


async def build(sizes: list[int], turns: list[str], workdir: Path) -> dict[int, dict]:
    """One database grown to each size in turn; a backup copy taken at each size."""
    memory = await Memory.open(config_for("no key"), str(workdir / "build.db"))
    await memory.counter.ready()
    counted_by = await memory.store.tokenizer_id(memory.counter.cache_key)
    key = memory.record_key(THREAD, RESOURCE)
    out, done, text_bytes, started = {}, 0, 0, time.perf_counter()
    for size in sizes:
        while done < size:
            count = min(BUILD_BATCH, size - done)
            rows = []
            for start in range(done, done + count, 1000):
                batch = [message(i, turns) for i in range(start, min(start + 1000, done + count))]
                rows += intake.prepare(memory.config, memory.counter, batch)
            text_bytes += sum(len(r.body.encode()) for r in rows)
            await memory.store.append_messages(THREAD, RESOURCE, key, rows, counted_by=counted_by)
            done += count
        elapsed = time.perf_counter() - started
        path = workdir / f"n{size}.db"
        await memory.store.backup(str(path))
        out[size] = {"path": path, "seconds": elapsed, "text_bytes": text_bytes}
        print(f"built {size:,} messages in {elapsed:.1f} s from empty ({size / elapsed:,.0f} msg/s)", flush=True)
    await memory.close()
    return out


def body_only_fts(path: Path) -> int:
    """Reference: bytes of a contentless FTS5 index over the bodies alone (same tokenizer)."""
    with tempfile.TemporaryDirectory() as tmp:
        conn = sqlite3.connect(Path(tmp) / "ref.db", isolation_level=None)
        conn.execute("ATTACH ? AS src", (str(path),))
        conn.execute(
            "CREATE VIRTUAL TABLE ref USING fts5(body, content = '', tokenize = 'porter unicode61 remove_diacritics 2')"
        )
        conn.execute("BEGIN")
        conn.execute("INSERT INTO ref (rowid, body) SELECT seq, body FROM src.messages")
        conn.execute("COMMIT")
        size = conn.execute("SELECT SUM(pgsize) FROM dbstat('main') WHERE name LIKE 'ref%'").fetchone()[0]
        conn.close()
    return size


def disk_table(built: dict[int, dict]) -> None:
    print(
        "\nDatabase bytes per message (file after backup, WAL checkpointed; text = UTF-8 bytes of the bodies;"
        " parts from dbstat; ref = a contentless FTS5 on the bodies alone, same tokenizer)"
    )
    print(
        f"{'messages':>10} {'file MiB':>9} {'bytes/msg':>10} {'text/msg':>9} {'ratio':>6} {'rows+idx':>9}"
        f" {'fts':>6} {'other':>6} {'ref fts':>8} {'ratio w/ ref':>13}"
    )
    for size, info in built.items():
        conn = sqlite3.connect(info["path"])
        parts = dict(conn.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name").fetchall())
        conn.close()
        total = info["path"].stat().st_size
        rows = sum(
            v for k, v in parts.items() if k in ("messages", "sqlite_autoindex_messages_1", "messages_by_thread")
        )
        fts = sum(v for k, v in parts.items() if k.startswith("messages_fts"))
        ref = body_only_fts(info["path"])
        text = info["text_bytes"]
        print(
            f"{size:>10,} {total / 2**20:>9.1f} {total / size:>10.0f} {text / size:>9.0f} {total / text:>5.1f}x"
            f" {rows / size:>9.0f} {fts / size:>6.0f} {(total - rows - fts) / size:>6.0f} {ref / size:>8.0f}"
            f" {(total - fts + ref) / text:>12.1f}x"
        )


# -- instruments -----------------------------------------------------------------------------


class Counters:
    """Statements on the store's connection, trips to its thread, all thread handoffs."""

    def __init__(self, memory: Memory):
        self.ours = self.fts = self.trips = self.threads = 0
        db: Database = memory.store.db
        self.conn = db.conn
        inner_run = db._run
        inner_thread = anyio.to_thread.run_sync

        async def run(*args, **kwargs):
            self.trips += 1
            return await inner_run(*args, **kwargs)

        async def run_sync(*args, **kwargs):
            self.threads += 1
            return await inner_thread(*args, **kwargs)

        db._run = run
        self._thread_pair = (inner_thread, run_sync)

    def _trace(self, sql: str) -> None:
        if sql.startswith("--") or FTS_SHADOW.search(sql):  # FTS5's own statements on its shadow tables
            self.fts += 1
        else:
            self.ours += 1

    def __enter__(self) -> Counters:
        self.ours = self.fts = self.trips = self.threads = 0
        self.conn.set_trace_callback(self._trace)
        anyio.to_thread.run_sync = self._thread_pair[1]
        return self

    def __exit__(self, *exc) -> None:
        self.conn.set_trace_callback(None)
        anyio.to_thread.run_sync = self._thread_pair[0]


def raw_connection(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA busy_timeout = 5000")
    conn.execute("PRAGMA synchronous = NORMAL")  # as the store's connection
    return conn


def raw_window(conn: sqlite3.Connection, k: int) -> None:
    conn.execute(
        "SELECT seq, id, role, body, parts, created_at, metadata, tokens FROM messages"
        " WHERE thread_id = ? AND observable ORDER BY seq DESC LIMIT ?",
        (THREAD, k),
    ).fetchall()


def raw_append(conn: sqlite3.Connection, i: int, text: str, fts_columns: list[str]) -> None:
    conn.execute("BEGIN IMMEDIATE")
    cursor = conn.execute(
        "INSERT INTO messages (id, thread_id, resource_id, role, body, created_at, tokens, counted_by, observable)"
        " VALUES (?, 'raw', ?, 'user', ?, '2026-01-01T00:00:00+00:00', 30, 0, 1)",
        (f"raw{i}", RESOURCE, text),
    )
    values = [text] + [""] * (len(fts_columns) - 1)
    conn.execute(
        f"INSERT INTO messages_fts (rowid, {', '.join(fts_columns)}) VALUES (?{', ?' * len(values)})",
        (cursor.lastrowid, *values),
    )
    conn.execute("COMMIT")


def raw_search(conn: sqlite3.Connection, match: str, thread_id: str | None = None) -> None:
    if match and thread_id is None:
        conn.execute(
            "SELECT rowid, rank FROM messages_fts WHERE messages_fts MATCH ? ORDER BY rank LIMIT 20", (match,)
        ).fetchall()
    elif match:
        # One thread's: match first, filter second (a filter inside the MATCH, `rowid IN (SELECT seq FROM
        # messages WHERE thread_id = ?)`, looks the index up once per row of the thread).
        conn.execute(
            "SELECT f.rowid, f.rank FROM messages_fts f CROSS JOIN messages m ON m.seq = f.rowid"
            " WHERE messages_fts MATCH ? AND m.thread_id = ? ORDER BY f.rank LIMIT 20",
            (match, thread_id),
        ).fetchall()


# -- measuring ---------------------------------------------------------------------------------


async def timed(op, samples: int) -> None:
    for i in range(samples):
        await op(i)


class Clock:
    """Wall and process-CPU ms per call (CPU counts every thread of this process, and is
    disturbed less than the wall clock by the other loads of a shared machine)."""

    def __init__(self) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []

    def __enter__(self) -> Clock:
        self._c, self._t = time.process_time(), time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        self.wall.append((time.perf_counter() - self._t) * 1000)
        self.cpu.append((time.process_time() - self._c) * 1000)


async def interleaved(op, ref, samples: int) -> tuple[Clock, Clock]:
    """The engine's call and the raw reference alternate, so a change in the machine's load hits both."""
    engine, raw = Clock(), Clock()
    for i in range(samples):
        with engine:
            await op(i)
        with raw:
            ref(i)
    return engine, raw


async def measure(
    path: Path, config_name: str, size: int, turns: list[str], questions: list[str], samples: int
) -> list[tuple]:
    memory = await Memory.open(config_for(config_name), str(path))
    heap.settle()  # as `om-mcp serve` does once the engine is open
    rows, state = [], {"next": size}
    async with memory.running():
        await memory.counter.ready()
        read = {"k": 0}

        async def get_context(_):
            out = await memory.get_context(THREAD, RESOURCE)
            read["k"] = len(out.messages)

        async def append(_):
            i = state["next"]
            state["next"] += 1
            await memory.append_messages(THREAD, [message(i, turns)], RESOURCE)

        async def search(i):
            await memory.recall(RecallQuery(thread_id=THREAD, mode="search", query=questions[i % len(questions)]))

        async def thread_search(i):
            query = questions[i % len(questions)]
            await memory.recall(RecallQuery(thread_id=THREAD, mode="search", scope="thread", query=query))

        counters = Counters(memory)
        raw = raw_connection(path)
        fts_columns = [r[1] for r in raw.execute("PRAGMA table_info(messages_fts)")]
        matches = [parse_query(q).match for q in questions]
        refs = {
            "get_context": lambda i: raw_window(raw, read["k"]),
            "append 1": lambda i: raw_append(raw, i, turns[i % len(turns)], fts_columns),
            "recall search": lambda i: raw_search(raw, matches[i % len(matches)]),
            "thread search": lambda i: raw_search(raw, matches[i % len(matches)], THREAD),
        }
        ops = (("get_context", get_context), ("append 1", append), ("recall search", search))
        for name, op in (*ops, ("thread search", thread_search)):
            n = samples if name in ("get_context", "append 1") else max(20, samples // 2)
            await timed(op, 5)  # warm caches and the code path
            engine, ref = await interleaved(op, refs[name], n)
            with counters:
                await timed(op, 20)
            rows.append(
                (
                    size,
                    config_name,
                    name,
                    pct(engine.wall, 0.5),
                    pct(engine.wall, 0.9),
                    pct(engine.wall, 0.99),
                    pct(engine.cpu, 0.5),
                    pct(engine.cpu, 0.99),
                    pct(ref.wall, 0.5),
                    pct(ref.cpu, 0.5),
                    counters.ours / 20,
                    counters.fts / 20,
                    counters.trips / 20,
                    counters.threads / 20,
                    read["k"] if name == "get_context" else None,
                )
            )
        raw.close()
    await memory.close()
    return rows


def ops_table(rows: list[tuple]) -> None:
    print(
        "\nLatency per operation, in process (ms: wall p50/p90/p99, process CPU p50/p99; raw = plain sqlite3 on the"
        " same file, calls alternating with the engine's; x raw = CPU p50 / raw CPU p50)"
    )
    print(
        f"{'messages':>10} {'config':<7} {'operation':<14} {'p50':>7} {'p90':>7} {'p99':>7} {'cpu50':>7} {'cpu99':>7}"
        f" {'raw':>7} {'rawcpu':>7} {'x raw':>6} {'stmts':>6} {'+fts5':>7} {'trips':>5} {'threads':>7}"
    )
    for size, config, name, p50, p90, p99, cpu, cpu99, ref, ref_cpu, ours, fts, trips, threads, k in rows:
        ratio = f"{cpu / ref_cpu:.1f}" if ref_cpu > 0 else "-"
        print(
            f"{size:>10,} {config:<7} {name:<14} {p50:>7.2f} {p90:>7.2f} {p99:>7.2f} {cpu:>7.2f} {cpu99:>7.2f}"
            f" {ref:>7.3f} {ref_cpu:>7.3f} {ratio:>6} {ours:>6.1f} {fts:>7.1f} {trips:>5.1f} {threads:>7.1f}"
            + (f"  (window {k} msgs)" if k else "")
        )


async def main_async(args) -> None:
    heap.enable()  # this process stands in for the server
    sizes = [int(s) for s in args.sizes.split(",")] + ([1_000_000] if args.million else [])
    turns, questions = locomo()
    source = "LoCoMo dev" if LOCOMO else "synthetic (no LoCoMo file found)"
    print(
        f"text: {source}, {len(turns):,} turns cycled; {len(questions)} questions as search queries;"
        f" sizes {', '.join(f'{s:,}' for s in sizes)}; {args.samples} samples per op (search: half)"
    )
    keep = Path(args.keep) if args.keep else None
    with tempfile.TemporaryDirectory(prefix="om-scale-", dir=keep) as tmp:
        workdir = Path(tmp)
        built = await build(sizes, turns, workdir)
        disk_table(built)
        rss_table(built[sizes[-1]]["path"], CONFIGS, workdir)
        rows = []
        for size in sizes:
            for config_name in CONFIGS:
                copy = workdir / f"n{size}-{config_name.replace(' ', '')}.db"
                shutil.copy(built[size]["path"], copy)
                rows += await measure(copy, config_name, size, turns, questions, args.samples)
                copy.unlink()
                print(f"measured {size:,} / {config_name}", file=sys.stderr, flush=True)
        ops_table(rows)
        if args.ingest:
            await ingest_table(workdir, turns, args.ingest, CONFIGS)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--million", action="store_true", help="add 1,000,000 messages (several minutes)")
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--ingest", type=int, default=10000, help="messages ingested over stdio (0: skip)")
    parser.add_argument("--keep", help="build the databases under this directory (default: the temp dir)")
    asyncio.run(main_async(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
