"""Ingest in batches of 100 messages (over stdio, in process, raw SQLite on the same schema), and RSS.

Part of benchmarks/scale.py (run that): the figures that need their own process. Also prints the
stdio server's RSS: after the handshake, idle; after the first append (tokenizer loaded); after
the ingest. A tiny JSON-RPC client on raw pipes keeps the client's own cost out of the figure.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from stdio_client import StdioServer

REPO = Path(__file__).resolve().parent.parent
BATCH = 100


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int | str = "self") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Stdio(StdioServer):
    """The server, on one thread of one resource."""

    def __init__(self, db: Path, env: dict[str, str]):
        super().__init__(db, env, name="scale-benchmark")
        self.request("tools/list", {})

    def tool(self, name: str, **arguments: Any) -> Any:
        return super().tool(name, **{"thread_id": "t", "resource_id": "r", **arguments})

    def append(self, messages: list[dict]) -> dict:
        return self.tool("append_messages", messages=messages)


def batches(turns: list[str], total: int, offset: int = 0) -> list[list[dict]]:
    rows = [
        {"id": f"m{i}", "role": "user" if i % 2 == 0 else "assistant", "content": turns[i % len(turns)]}
        for i in range(offset, offset + total)
    ]
    return [rows[i : i + BATCH] for i in range(0, total, BATCH)]


def server_env(home: Path, config_env: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OM_") and not k.endswith("_API_KEY")}
    env.update(HOME=str(home), XDG_DATA_HOME=str(home), **config_env)
    return env


def timed_ms(call, samples: int = 50) -> list[float]:
    out = []
    for i in range(samples):
        t0 = time.perf_counter()
        call(i)
        out.append((time.perf_counter() - t0) * 1000)
    return sorted(out)


def over_stdio(workdir: Path, turns: list[str], total: int, config_env: dict[str, str]) -> tuple[float, list, dict]:
    home = workdir / "home"
    home.mkdir(exist_ok=True)
    db = workdir / "stdio.db"
    server = Stdio(db, server_env(home, config_env))
    try:
        rss = [("after handshake + tools/list", rss_mib(server.proc.pid))]
        time.sleep(2.0)  # the engine opens in the background; let it settle
        rss.append(("idle 2 s later", rss_mib(server.proc.pid)))
        server.append(batches(turns, 1, offset=10**7)[0])  # the first append waits for the tokenizer
        rss.append(("after the first append (tokenizer loaded)", rss_mib(server.proc.pid)))
        work = batches(turns, total)
        t0, c0 = time.perf_counter(), cpu_seconds(server.proc.pid)
        for batch in work:
            out = server.append(batch)
            assert out.get("stored") == len(batch), out
        elapsed, cpu = time.perf_counter() - t0, cpu_seconds(server.proc.pid) - c0
        rss.append((f"after ingesting {total:,}", rss_mib(server.proc.pid)))
        ops = {
            "get_context": timed_ms(lambda i: server.tool("get_context")),
            "append 1": timed_ms(lambda i: server.append(batches(turns, 1, offset=2 * 10**7 + i)[0])),
        }
    finally:
        server.stop()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    return (total / elapsed, total / cpu), rss, ops


async def in_process(workdir: Path, turns: list[str], total: int, config_env: dict[str, str]) -> float:
    from om_mcp.config import load_config
    from om_mcp.engine import Memory

    db = workdir / "inproc.db"
    memory = await Memory.open(load_config(env=dict(config_env)), str(db))
    async with memory.running():
        await memory.counter.ready()
        await memory.append_messages("t", batches(turns, 1, offset=10**7)[0], "r")
        t0, c0 = time.perf_counter(), time.process_time()
        for batch in batches(turns, total):
            await memory.append_messages("t", batch, "r")
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    await memory.close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    return total / elapsed, total / cpu


def raw(workdir: Path, turns: list[str], total: int) -> float:
    """The same rows into the same schema (made by the store's migrations): one transaction per
    batch, an executemany into messages and one into the FTS index (body; context columns empty)."""
    from om_mcp.store.sqlite.database import connect

    db = workdir / "raw.db"
    connect(db).close()
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA synchronous = NORMAL")
    fts_columns = [r[1] for r in conn.execute("PRAGMA table_info(messages_fts)")]
    fts_sql = f"INSERT INTO messages_fts (rowid, {', '.join(fts_columns)}) VALUES (?{', ?' * len(fts_columns)})"
    conn.execute("INSERT INTO resources (id, created_at, updated_at) VALUES ('r', '', '')")
    conn.execute(
        "INSERT INTO threads (id, resource_id, metadata, created_at, updated_at) VALUES ('t', 'r', '{}', '', '')"
    )
    t0, c0 = time.perf_counter(), time.process_time()
    for batch in batches(turns, total):
        conn.execute("BEGIN IMMEDIATE")
        first = conn.execute("SELECT COALESCE(MAX(seq), 0) FROM messages").fetchone()[0] + 1
        conn.executemany(
            "INSERT INTO messages (id, thread_id, resource_id, role, body, created_at, tokens, counted_by, observable)"
            " VALUES (?, 't', 'r', ?, ?, '2026-01-01T00:00:00+00:00', ?, 0, 1)",
            [(m["id"], m["role"], m["content"], len(m["content"]) // 4) for m in batch],
        )
        conn.executemany(
            fts_sql, [(first + i, m["content"], *[""] * (len(fts_columns) - 1)) for i, m in enumerate(batch)]
        )
        conn.execute("COMMIT")
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    conn.close()
    return total / elapsed, total / cpu


async def ingest_table(workdir: Path, turns: list[str], total: int, configs: dict[str, dict[str, str]]) -> None:
    raw_rate, raw_cpu = raw(workdir, turns, total)
    rows, rss_rows, op_rows = [], [], []
    for name, config_env in configs.items():
        stdio_rate, rss, ops = over_stdio(workdir, turns, total, config_env)
        inproc_rate = await in_process(workdir, turns, total, config_env)
        rows.append((name, stdio_rate, inproc_rate))
        rss_rows += [(name, moment, mib) for moment, mib in rss]
        op_rows += [(name, op, times) for op, times in ops.items()]
    print(
        f"\nIngest of {total:,} messages in batches of {BATCH} into one thread, msg/s by the wall clock and per"
        f" CPU second (stdio: the server's CPU; raw = executemany on the same schema, {raw_rate:,.0f} msg/s wall,"
        f" {raw_cpu:,.0f} per CPU s)"
    )
    print(
        f"{'config':<7} {'stdio':>8} {'% raw':>6} {'per cpu':>8} {'% raw':>6} {'in proc':>8} {'% raw':>6}"
        f" {'per cpu':>8} {'% raw':>6}"
    )
    for name, (stdio, stdio_cpu), (inproc, inproc_cpu) in rows:
        print(
            f"{name:<7} {stdio:>8,.0f} {stdio / raw_rate:>6.0%} {stdio_cpu:>8,.0f} {stdio_cpu / raw_cpu:>6.0%}"
            f" {inproc:>8,.0f} {inproc / raw_rate:>6.0%} {inproc_cpu:>8,.0f} {inproc_cpu / raw_cpu:>6.0%}"
        )
    print(f"\nOne tool call over stdio after the ingest ({total:,} messages in the thread; 50 calls, ms)")
    print(f"{'config':<7} {'tool':<12} {'p50':>7} {'p90':>7} {'p99':>7}")
    for name, op, times in op_rows:
        print(
            f"{name:<7} {op:<12} {times[len(times) // 2]:>7.2f} {times[int(len(times) * 0.9)]:>7.2f}"
            f" {times[min(len(times) - 1, int(len(times) * 0.99))]:>7.2f}"
        )
    print("\nRSS of the stdio server (MiB)")
    print(f"{'config':<7} {'moment':<44} {'RSS MiB':>8}")
    for name, moment, mib in rss_rows:
        print(f"{name:<7} {moment:<44} {mib:>8.1f}")


# One fresh process per configuration: RSS at each step, and whether litellm got imported.
PROBE = """
import json, os, sys, time
def rss():
    for line in open('/proc/self/status'):
        if line.startswith('VmRSS:'):
            return int(line.split()[1]) / 1024
out = [('python started', rss(), False)]
import anyio
from om_mcp.config import load_config
from om_mcp.engine import Memory
from om_mcp.engine.recall import RecallQuery
out.append(('engine imported', rss(), 'litellm' in sys.modules))
async def main():
    memory = await Memory.open(load_config(env=json.loads(sys.argv[2])), sys.argv[1])
    async with memory.running():
        await anyio.sleep(0.5)
        out.append(('idle after Memory.open', rss(), 'litellm' in sys.modules))
        await memory.counter.ready()
        out.append(('after the tokenizer loaded', rss(), 'litellm' in sys.modules))
        for i in range(20):
            await memory.append_messages('t', [{'role': 'user', 'content': f'probe {i}'}], 'r')
            await memory.get_context('t', 'r')
            await memory.recall(RecallQuery(thread_id='t', mode='search', query='what did they say about the museum'))
        await anyio.sleep(1.0)
        out.append(('after 20 turns + searches, 1 s idle', rss(), 'litellm' in sys.modules))
    await memory.close()
anyio.run(main)
print(json.dumps(out))
"""


def rss_table(db: Path, configs: dict[str, dict[str, str]], workdir: Path) -> None:
    print(f"\nRSS in process (MiB), a fresh interpreter per configuration, on a copy of {db.name}")
    print(f"{'config':<7} {'moment':<40} {'RSS MiB':>8} {'litellm imported':>17}")
    for name, config_env in configs.items():
        copy = workdir / "probe.db"
        shutil.copy(db, copy)
        env = server_env(workdir, {})
        result = subprocess.run(
            [sys.executable, "-c", PROBE, str(copy), json.dumps(config_env)],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        for moment, mib, litellm in json.loads(result.stdout.strip().splitlines()[-1]):
            print(f"{name:<7} {moment:<40} {mib:>8.1f} {str(litellm):>17}")
        copy.unlink()
