"""Replicas on one PostgreSQL: throughput, tail latency, model calls per cycle, and a SIGKILL.

For N in 1, 2, 4: N `om-mcp serve --transport http` processes on one fresh PostgreSQL
database, 8 clients per replica doing turns (append a user + an assistant message, then
get_context), each call sent to the next replica in turn (sessionless 2026-07-28
requests: any load balancer, no stickiness). Clients share 8 threads, so with several
replicas every thread is written through all of them and every threshold crossing is
seen by all. The model is the scripted OpenAI-compatible server answering after
--delay seconds (2 by default); observation is synchronous (no buffering), so each
crossing is one observation cycle and should cost exactly one model call.

Then, with N >= 2, the kill: traffic goes on, replica 0 is SIGKILLed while one of its
model calls is in flight, clients retry their turn (same message ids) on the next
replica, and the survivors take over the dead replica's work once its lease expires.
At the end every acknowledged message must be stored exactly once, and the committed
observations must cover disjoint ranges (nothing observed twice, nothing skipped).

Last, the same turns against one process on a SQLite file, for the ratio.

    python benchmarks/replicas.py [--replicas 1,2,4] [--clients 8] [--seconds 20] [--delay 2]

Figures compare only within one run on one machine: here 2 cores shared by replicas,
PostgreSQL and clients, so more replicas add processes, not capacity (see the CPU columns).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import asyncpg
from mcp import Client

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from om_mcp.testing.fake_server import FakeLLMServer, default_responder  # noqa: E402
from om_mcp.testing.postgres_server import PostgresServer  # noqa: E402

THREADS = 8
MESSAGE_TOKENS = 800  # the observation threshold: a crossing every ~8 turns of a thread
LEASE_SECONDS = 6


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Replica:
    name: str
    port: int
    process: subprocess.Popen

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"


def start_replica(name: str, database: dict[str, str], llm: str, workdir: Path) -> Replica:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("OM_")}
    env.update(
        database,
        HOME=str(workdir),
        XDG_DATA_HOME=str(workdir),
        PYTHONUNBUFFERED="1",
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        LITELLM_OFFLINE_MODE="true",
        OM_LOG_LEVEL="warning",
        OM_OBSERVATIONAL_MEMORY__MODEL=json.dumps({"model": f"openai/fake-{name}", "api_base": llm}),
        OM_OBSERVATIONAL_MEMORY__SCOPE="thread",
        OM_OBSERVATIONAL_MEMORY__OBSERVATION__MESSAGE_TOKENS=str(MESSAGE_TOKENS),
        OM_OBSERVATIONAL_MEMORY__OBSERVATION__BUFFER_TOKENS="false",
        OM_OBSERVATIONAL_MEMORY__REFLECTION__OBSERVATION_TOKENS="1000000",
        OM_OBSERVATIONAL_MEMORY__LEASE_SECONDS=str(LEASE_SECONDS),
        OM_SERVER__HTTP__RATE_LIMIT_PER_MINUTE="0",
    )
    log = open(workdir / f"{name}.log", "ab")
    process = subprocess.Popen(
        [sys.executable, "-m", "om_mcp", "serve", "--transport", "http", "--port", str(port)],
        env=env,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"replica {name} exited: see {workdir / f'{name}.log'}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return Replica(name, port, process)
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"replica {name} did not start")


def stop_replica(replica: Replica) -> None:
    if replica.process.poll() is None:
        replica.process.send_signal(signal.SIGINT)
        try:
            replica.process.wait(15)
        except subprocess.TimeoutExpired:
            replica.process.kill()
            replica.process.wait()


@dataclass
class Load:
    turns: int = 0
    latencies: list[float] = field(default_factory=list)
    acked: set[tuple[str, str]] = field(default_factory=set)
    retries: int = 0


class Connection:
    """An MCP client to one replica in a task of its own, so a replica dying ends this
    connection only (an SDK client's failure otherwise cancels everything around it)."""

    def __init__(self, url: str):
        self.url = url
        self._send, self._receive = anyio.create_memory_object_stream(100)
        self.dead = False

    async def serve(self, *, task_status=anyio.TASK_STATUS_IGNORED) -> None:
        try:
            async with Client(self.url) as client:
                task_status.started()
                async for tool, arguments, reply in self._receive:
                    try:
                        reply.append(await client.call_tool(tool, arguments))
                    except Exception as error:  # noqa: BLE001
                        reply.append(error)
                    reply[0].set()
        except Exception:  # noqa: BLE001 - the replica is gone
            self.dead = True

    async def call(self, tool: str, arguments: dict):
        if self.dead:
            raise ConnectionError(f"{self.url} is gone")
        reply: list = [anyio.Event()]
        await self._send.send((tool, arguments, reply))
        with anyio.fail_after(30):
            while not reply[0].is_set():
                if self.dead:
                    raise ConnectionError(f"{self.url} is gone")
                with anyio.move_on_after(0.2):
                    await reply[0].wait()
        if isinstance(reply[1], Exception):
            raise reply[1]
        assert not reply[1].is_error, reply[1].content[0].text
        return reply[1]


async def client_loop(index: int, urls: list[str], load: Load, until: list[float], alive: list[bool]) -> None:
    thread = f"t{index % THREADS}"
    async with anyio.create_task_group() as group:
        clients = [Connection(url) for url in urls]
        for connection in clients:
            await group.start(connection.serve)
        await _turns(index, thread, clients, load, until, alive)
        group.cancel_scope.cancel()


async def _turns(
    index: int, thread: str, clients: list[Connection], load: Load, until: list[float], alive: list[bool]
) -> None:
    turn = index  # spreads the clients' first requests over the replicas
    while time.monotonic() < until[0]:
        ids = [f"c{index}-{uuid.uuid4().hex[:8]}-{role}" for role in ("u", "a")]
        messages = [
            {"id": ids[0], "role": "user", "content": f"turn of client {index}: " + "words " * 40},
            {"id": ids[1], "role": "assistant", "content": "noted, " + "reply " * 40},
        ]
        started = time.monotonic()
        for attempt in range(len(clients) * 2):
            target = (turn + attempt) % len(clients)
            if not alive[target]:
                continue
            try:
                await clients[target].call("append_messages", {"thread_id": thread, "messages": messages})
                load.acked.update((thread, i) for i in ids)
                after = (target + 1) % len(clients)
                await clients[after if alive[after] else target].call("get_context", {"thread_id": thread})
                break
            except Exception:  # noqa: BLE001 - a dead replica: the same turn goes to the next one
                load.retries += 1
                await anyio.sleep(0.05)
        else:
            continue
        load.latencies.append(time.monotonic() - started)
        load.turns += 1
        turn += 1


async def drive(
    urls: list[str], clients: int, seconds: float, alive: list[bool], load: Load, kill: Kill | None = None
) -> float:
    until = [time.monotonic() + seconds]
    started = time.monotonic()
    async with anyio.create_task_group() as group:
        for index in range(clients):
            group.start_soon(client_loop, index, urls, load, until, alive)
        if kill is not None:
            group.start_soon(kill.run, alive)
    return time.monotonic() - started


class Arrivals:
    """The scripted model's answers, and when each request arrived and from which replica."""

    def __init__(self) -> None:
        self.seen: list[tuple[float, str]] = []

    def __call__(self, request: dict) -> str:
        self.seen.append((time.monotonic(), request.get("model", "")))
        return default_responder(request)

    def in_flight(self, replica: str, at: float, delay: float) -> int:
        return sum(1 for t, model in self.seen if model.endswith(replica) and at - delay < t <= at)


@dataclass
class Kill:
    replica: Replica
    arrivals: Arrivals
    delay: float
    index: int = 0
    in_flight_at_kill: int = 0

    async def run(self, alive: list[bool]) -> None:
        """SIGKILL the replica while one of its model calls is in flight (the cycle has not committed)."""
        seen = len(self.arrivals.seen)
        while not any(model.endswith(self.replica.name) for _, model in self.arrivals.seen[seen:]):
            await anyio.sleep(0.05)
        await anyio.sleep(self.delay / 4)
        self.replica.process.send_signal(signal.SIGKILL)
        self.in_flight_at_kill = self.arrivals.in_flight(self.replica.name, time.monotonic(), self.delay)
        alive[self.index] = False
        self.replica.process.wait()


async def settle(url: str, llm: FakeLLMServer, timeout: float = 120) -> None:
    """Wait until every replica is idle: no live lease, no model call for a while."""
    conn = await asyncpg.connect(url)
    try:
        quiet_since, calls = time.monotonic(), len(llm.requests)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            leases = await conn.fetchval(
                # The drain lease is held for as long as a replica runs: only cycle leases mean work.
                "SELECT count(*) FROM om.om_leases WHERE expires_at > extract(epoch FROM clock_timestamp())"
                " AND NOT (key = 'worker' AND op = 'drain')"
            )
            if leases or len(llm.requests) != calls:
                quiet_since, calls = time.monotonic(), len(llm.requests)
            elif time.monotonic() - quiet_since > LEASE_SECONDS + 6:  # a poll (5 s) found nothing more
                return
            await anyio.sleep(0.5)
    finally:
        await conn.close()


async def audit(url: str, load: Load) -> dict:
    """Messages stored once each; observations covering disjoint ranges ending at the cursors."""
    conn = await asyncpg.connect(url)
    try:
        stored = {(r[0], r[1]) for r in await conn.fetch("SELECT thread_id, id FROM om.messages")}
        rows = await conn.fetchval("SELECT count(*) FROM om.messages")
        overlaps = await conn.fetchval(
            "SELECT count(*) FROM om.om_groups a JOIN om.om_groups b ON a.record_key = b.record_key"
            " AND a.generation = b.generation AND a.id < b.id AND a.first_seq <= b.last_seq"
            " AND b.first_seq <= a.last_seq"
        )
        gaps = await conn.fetchval(
            "SELECT count(*) FROM om.om_cursors c WHERE c.seq > 0 AND EXISTS (SELECT 1 FROM om.messages m"
            " WHERE m.thread_id = c.thread_id AND m.seq <= c.seq AND m.observable AND NOT EXISTS ("
            "  SELECT 1 FROM om.om_groups g WHERE g.record_key = c.record_key AND m.seq BETWEEN g.first_seq"
            "  AND g.last_seq))"
        )
        events = dict(await conn.fetch("SELECT type, count(*) FROM om.om_events GROUP BY type"))
        deadlocks = await conn.fetchval("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
        discarded = await conn.fetchval(
            "SELECT count(*) FROM om.om_events WHERE type = 'data-om-observation-failed' AND payload LIKE '%discarded%'"
        )
        failures = [
            json.loads(r[0]).get("error", "")
            for r in await conn.fetch("SELECT payload FROM om.om_events WHERE type = 'data-om-observation-failed'")
        ]
    finally:
        await conn.close()
    return {
        "deadlocks": deadlocks,
        "lost": len(load.acked - stored),
        "duplicated": rows - len(stored),
        "stored": rows,
        "overlapping_groups": overlaps,
        "observed_but_uncovered": gaps,
        "cycles": events.get("data-om-observation-end", 0),
        "failed": events.get("data-om-observation-failed", 0),
        "discarded": discarded,
        "failures": failures,
    }


async def warm_up(urls: list[str]) -> None:
    """Each replica serves a turn and makes a model call first: the model library loads on the first
    call (seconds of CPU), which is start-up, not the work measured."""

    async def one(index: int, url: str) -> None:
        async with Client(url) as client:
            thread = f"warm-up-{index}"
            await client.call_tool("append_messages", {"thread_id": thread, "user": "hello", "assistant": "hi"})
            await client.call_tool("get_context", {"thread_id": thread})
            await client.call_tool("observe", {"thread_id": thread})

    async with anyio.create_task_group() as group:
        for index, url in enumerate(urls):
            group.start_soon(one, index, url)


def cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_cpu(pids: list[int]) -> float:
    """CPU seconds used so far by these processes and their children (PostgreSQL's backends)."""

    def parent(proc: Path) -> int | None:
        try:
            return int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return None

    children = [int(d.name) for d in Path("/proc").iterdir() if d.name.isdigit() and parent(d) in set(pids)]
    return sum(cpu_seconds(pid) for pid in [*pids, *children])


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000 if ordered else float("nan")


async def one_setup(
    label: str,
    database: dict[str, str],
    replicas: int,
    args,
    workdir: Path,
    kill: bool = False,
    audit_url: str | None = None,
    postgres_pid: int | None = None,
) -> dict:
    arrivals = Arrivals()
    with FakeLLMServer(arrivals, delay=args.delay) as llm:
        started = [start_replica(f"r{i}", database, llm.base_url, workdir) for i in range(replicas)]
        try:
            urls = [r.url for r in started]
            alive = [True] * replicas
            await warm_up(urls)
            base = {"cycles": 0}
            if audit_url:
                await settle(audit_url, llm)
                base = await audit(audit_url, Load())
            calls_before = len(llm.requests)
            load = Load()
            servers_cpu = tree_cpu([r.process.pid for r in started])
            database_cpu = tree_cpu([postgres_pid]) if postgres_pid else 0.0
            elapsed = await drive(urls, args.clients * replicas, args.seconds, alive, load)
            servers_cpu = tree_cpu([r.process.pid for r in started]) - servers_cpu
            database_cpu = (tree_cpu([postgres_pid]) - database_cpu) if postgres_pid else 0.0
            row = {
                "setup": label,
                "turns/s": load.turns / elapsed,
                "p50 ms": pct(load.latencies, 0.5),
                "p99 ms": pct(load.latencies, 0.99),
                "turns": load.turns,
                "server cpu ms/turn": 1000 * servers_cpu / max(load.turns, 1),
                "database cpu ms/turn": 1000 * database_cpu / max(load.turns, 1),
            }
            if audit_url:
                await settle(audit_url, llm)
                found = await audit(audit_url, load)
                calls = len(llm.requests) - calls_before
                row.update(
                    model_calls=calls,
                    cycles=found["cycles"] - base["cycles"],
                    lost=found["lost"],
                    duplicated=found["duplicated"],
                    overlaps=found["overlapping_groups"],
                    uncovered=found["observed_but_uncovered"],
                    deadlocks=found["deadlocks"],
                    failed=found["failed"] - base.get("failed", 0),
                )
            if kill and replicas >= 2:
                killer = Kill(started[0], arrivals, args.delay)
                kill_load = Load()
                calls_before, cycles_before = len(llm.requests), found["cycles"]
                failed_before, errors_before = found["failed"], len(found["failures"])
                await drive(urls, args.clients * replicas, args.seconds, alive, kill_load, killer)
                await settle(audit_url, llm)
                found = await audit(audit_url, kill_load)
                row["kill"] = {
                    "acked": len(kill_load.acked),
                    "lost": found["lost"],
                    "duplicated": found["duplicated"],
                    "overlapping_groups": found["overlapping_groups"],
                    "observed_but_uncovered": found["observed_but_uncovered"],
                    "model_calls": len(llm.requests) - calls_before,
                    "cycles": found["cycles"] - cycles_before,
                    "failed": found["failed"] - failed_before,
                    "errors": found["failures"][errors_before:],
                    "in_flight_at_kill": killer.in_flight_at_kill,
                    "client_retries": kill_load.retries,
                }
            return row
        finally:
            for replica in started:
                stop_replica(replica)


async def run(args) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="om-replicas-"))
    rows = []
    with PostgresServer() as pg:
        for n in args.replicas:
            url = pg.create_database(f"bench_{n}")
            rows.append(
                await one_setup(
                    f"PostgreSQL, {n} replica{'s' * (n > 1)}",
                    {"OM_DB_URL": url},
                    n,
                    args,
                    workdir,
                    kill=True,
                    audit_url=url,
                    postgres_pid=pg._process.pid,
                )
            )
            print(json.dumps(rows[-1]), flush=True)
    sqlite = await one_setup("SQLite, 1 process", {"OM_DB_PATH": str(workdir / "sqlite.db")}, 1, args, workdir)
    rows.append(sqlite)
    print(json.dumps(sqlite), flush=True)
    print(
        f"\n{'setup':<26}{'turns/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'calls/cycle':>13}{'lost':>6}{'dup':>5}"
        f"{'server cpu/turn':>17}{'db cpu/turn':>13}"
    )
    for row in rows:
        per = f"{row['model_calls']}/{row['cycles']}" if "cycles" in row else "-"
        print(
            f"{row['setup']:<26}{row['turns/s']:>9.1f}{row['p50 ms']:>9.0f}{row['p99 ms']:>9.0f}{per:>13}"
            f"{row.get('lost', '-'):>6}{row.get('duplicated', '-'):>5}{row['server cpu ms/turn']:>14.1f} ms"
            f"{row['database cpu ms/turn']:>10.1f} ms"
        )
    for one in [r for r in rows if r["setup"].startswith("PostgreSQL, 1 ")]:
        print(
            f"\nPostgreSQL 1 replica / SQLite 1 process: turns/s x{one['turns/s'] / sqlite['turns/s']:.2f},"
            f" p99 x{one['p99 ms'] / sqlite['p99 ms']:.2f}"
        )
    for row in rows:
        if "kill" in row:
            print(f"kill ({row['setup']}): {json.dumps(row['kill'])}")
    print(f"\nlogs: {workdir}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", default="1,2,4", type=lambda s: [int(x) for x in s.split(",")])
    parser.add_argument("--clients", type=int, default=8, help="clients per replica")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--delay", type=float, default=2.0, help="the scripted model's answer time")
    anyio.run(run, parser.parse_args())


if __name__ == "__main__":
    main()
