"""What a flood of legacy `initialize` calls costs the HTTP server.

Starts `python -m om_mcp serve --transport http` on a free loopback port (default session
settings: at most 100 sessions, idle end after 30 min; observation off so no model library
loads in the background, rate limit off), sends N initialize POSTs (20 at a time) in each
of ROUNDS rounds, and prints the answers by HTTP status and the server's resident memory
after each round: it should stop growing once the cap is reached.
Run with `.venv/bin/python benchmarks/http_sessions.py [N] [max_sessions]` (default 2000, 100).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import anyio
import httpx2

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "flood", "version": "0"}},
}
ROUNDS = 3
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def flood(url: str, count: int) -> Counter:
    statuses: Counter = Counter()
    limiter = anyio.Semaphore(20)
    body = json.dumps(INIT)
    async with httpx2.AsyncClient(timeout=60) as http:

        async def one() -> None:
            async with limiter:
                statuses[(await http.post(url, content=body, headers=HEADERS)).status_code] += 1

        async with anyio.create_task_group() as group:
            for _ in range(count):
                group.start_soon(one)
    return statuses


def main() -> int:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("OM_")}
    env["OM_SERVER__HTTP__RATE_LIMIT_PER_MINUTE"] = "0"  # measure the sessions, not the limiter
    env["OM_OBSERVATIONAL_MEMORY"] = "false"
    if len(sys.argv) > 2:
        env["OM_SERVER__HTTP__MAX_SESSIONS"] = sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "om_mcp",
                "serve",
                "--transport",
                "http",
                "--port",
                str(port),
                "--db",
                str(Path(tmp) / "m.db"),
            ],
            env=env,
            stdin=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
            before = rss_mib(process.pid)
            print(f"server RSS at start: {before:.0f} MiB")
            for round_ in range(1, ROUNDS + 1):
                start = time.perf_counter()
                statuses = anyio.run(flood, f"http://127.0.0.1:{port}/mcp", count)
                elapsed = time.perf_counter() - start
                answers = ", ".join(f"HTTP {k}: {v}" for k, v in sorted(statuses.items()))
                print(
                    f"round {round_}: {count} initialize POSTs in {elapsed:.1f} s ({answers});"
                    f" server RSS {rss_mib(process.pid):.0f} MiB (+{rss_mib(process.pid) - before:.0f})"
                )
        finally:
            process.terminate()
            process.wait(timeout=15)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
