"""psycopg 3 (async, psycopg_pool) against asyncpg on a throwaway local PostgreSQL.

    pip install "psycopg[binary,pool]" asyncpg
    python benchmarks/pg_drivers.py [--rounds 2000]

For each driver it prints: import time (fresh interpreter, minus a bare one),
connect time, the median round trip of SELECT 1 and of a parameterised
prepared query, a 100-row fetch, a claim transaction (FOR UPDATE SKIP LOCKED
+ UPDATE + INSERT), pooled throughput (8 tasks over 4 connections), and the
LISTEN/NOTIFY delivery latency between two connections. It also checks that
concurrent claimers with SKIP LOCKED take every job exactly once.
The server comes from om_mcp.testing.postgres_server (the same one the tests use).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

import anyio

from om_mcp.testing.postgres_server import PostgresServer

SETUP = """
DROP TABLE IF EXISTS jobs, rows100, log;
CREATE TABLE jobs (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, owner text);
INSERT INTO jobs (owner) SELECT NULL FROM generate_series(1, 200);
CREATE TABLE rows100 AS SELECT g AS seq, md5(g::text) AS id, 'thread-1' AS thread_id,
    ('{"type": "text", "text": "' || repeat('word ', 40) || '"}')::jsonb AS parts, now() AS created_at
    FROM generate_series(1, 100) g;
CREATE TABLE log (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, job bigint, at timestamptz);
"""
CLAIM = (
    "UPDATE jobs SET owner = {p1} WHERE id = (SELECT id FROM jobs WHERE owner IS NULL ORDER BY id"
    " FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING id"
)


def import_ms(statement: str, runs: int = 7) -> float:
    def wall(code: str) -> float:
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        return time.perf_counter() - t0

    base = statistics.median(wall("pass") for _ in range(runs))
    return 1000 * (statistics.median(wall(statement) for _ in range(runs)) - base)


async def median_us(fn, rounds: int) -> float:
    for _ in range(min(50, rounds)):  # warm-up, and past psycopg's prepare threshold
        await fn()
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        await fn()
        times.append(time.perf_counter() - t0)
    return 1e6 * statistics.median(times)


# -- psycopg -----------------------------------------------------------------------------


async def bench_psycopg(url: str, rounds: int) -> dict:
    import psycopg
    from psycopg_pool import AsyncConnectionPool

    out = {}
    t0 = time.perf_counter()
    conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
    out["connect ms"] = 1000 * (time.perf_counter() - t0)
    await conn.execute(SETUP)

    async def select1():
        await (await conn.execute("SELECT 1")).fetchone()

    async def param():
        await (await conn.execute("SELECT seq, id FROM rows100 WHERE seq = %s", (7,))).fetchone()

    async def fetch100():
        await (await conn.execute("SELECT seq, id, thread_id, parts, created_at FROM rows100")).fetchall()

    async def claim():
        async with conn.transaction():
            row = await (await conn.execute(CLAIM.format(p1="%s"), ("w",))).fetchone()
            await conn.execute("UPDATE jobs SET owner = NULL WHERE id = %s", (row[0],))
            await conn.execute("INSERT INTO log (job, at) VALUES (%s, now())", (row[0],))

    out["SELECT 1 us"] = await median_us(select1, rounds)
    out["param query us"] = await median_us(param, rounds)
    out["fetch 100 rows us"] = await median_us(fetch100, rounds // 4)
    out["claim tx us"] = await median_us(claim, rounds // 4)

    async with AsyncConnectionPool(url, min_size=4, max_size=4, open=False) as pool:
        await pool.wait()

        async def worker():
            for _ in range(rounds // 8):
                async with pool.connection() as c:
                    await (await c.execute("SELECT seq FROM rows100 WHERE seq = %s", (3,))).fetchone()

        out["pool q/s"] = await _throughput(worker, rounds)

        async def claimer(name: str, claimed: list):
            while True:
                async with pool.connection() as c, c.transaction():
                    row = await (await c.execute(CLAIM.format(p1="%s"), (name,))).fetchone()
                    if row is None:
                        return
                    claimed.append(row[0])
                    await anyio.sleep(0.001)  # hold the row lock while others claim

        await conn.execute("UPDATE jobs SET owner = NULL")
        out["SKIP LOCKED"] = await _claims_ok(claimer)

    listener = await psycopg.AsyncConnection.connect(url, autocommit=True)
    await listener.execute("LISTEN om_events")
    arrived = []

    async def listen():
        async for note in listener.notifies():
            arrived.append((time.perf_counter(), note.payload))

    async def send(i: int):
        await conn.execute("SELECT pg_notify('om_events', %s)", (str(i),))

    out["NOTIFY latency us"] = await _notify_latency(listen, send, arrived, rounds // 10)
    await listener.close()
    await conn.close()
    return out


# -- asyncpg -------------------------------------------------------------------------------


async def bench_asyncpg(url: str, rounds: int) -> dict:
    import asyncpg

    out = {}
    t0 = time.perf_counter()
    conn = await asyncpg.connect(url)
    out["connect ms"] = 1000 * (time.perf_counter() - t0)
    await _json_codec(conn)  # psycopg decodes jsonb by default; asyncpg returns text
    await conn.execute(SETUP)

    async def select1():
        await conn.fetchval("SELECT 1")

    async def param():
        await conn.fetchrow("SELECT seq, id FROM rows100 WHERE seq = $1", 7)

    async def fetch100():
        await conn.fetch("SELECT seq, id, thread_id, parts, created_at FROM rows100")

    async def claim():
        async with conn.transaction():
            job = await conn.fetchval(CLAIM.format(p1="$1"), "w")
            await conn.execute("UPDATE jobs SET owner = NULL WHERE id = $1", job)
            await conn.execute("INSERT INTO log (job, at) VALUES ($1, now())", job)

    out["SELECT 1 us"] = await median_us(select1, rounds)
    out["param query us"] = await median_us(param, rounds)
    out["fetch 100 rows us"] = await median_us(fetch100, rounds // 4)
    out["claim tx us"] = await median_us(claim, rounds // 4)

    pool = await asyncpg.create_pool(url, min_size=4, max_size=4, init=_json_codec)

    async def worker():
        for _ in range(rounds // 8):
            async with pool.acquire() as c:
                await c.fetchrow("SELECT seq FROM rows100 WHERE seq = $1", 3)

    out["pool q/s"] = await _throughput(worker, rounds)

    async def claimer(name: str, claimed: list):
        while True:
            async with pool.acquire() as c, c.transaction():
                job = await c.fetchval(CLAIM.format(p1="$1"), name)
                if job is None:
                    return
                claimed.append(job)
                await anyio.sleep(0.001)

    await conn.execute("UPDATE jobs SET owner = NULL")
    out["SKIP LOCKED"] = await _claims_ok(claimer)
    await pool.close()

    listener = await asyncpg.connect(url)
    arrived = []
    await listener.add_listener(
        "om_events", lambda _c, _pid, _ch, payload: arrived.append((time.perf_counter(), payload))
    )

    async def listen():
        await anyio.sleep_forever()

    async def send(i: int):
        await conn.execute("SELECT pg_notify('om_events', $1)", str(i))

    out["NOTIFY latency us"] = await _notify_latency(listen, send, arrived, rounds // 10)
    await listener.close()
    await conn.close()
    return out


async def _json_codec(conn) -> None:
    import json

    await conn.set_type_codec("jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")


# -- shared ----------------------------------------------------------------------------------


async def _throughput(worker, rounds: int) -> float:
    t0 = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(8):
            tg.start_soon(worker)
    return 8 * (rounds // 8) / (time.perf_counter() - t0)


async def _claims_ok(claimer) -> str:
    claimed: list[int] = []
    async with anyio.create_task_group() as tg:
        for i in range(4):
            tg.start_soon(claimer, f"w{i}", claimed)
    ok = sorted(claimed) == list(range(1, 201))
    return f"{'ok' if ok else 'WRONG'} {len(set(claimed))}/200"


async def _notify_latency(listen, send, arrived: list, rounds: int) -> float:
    latencies = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(listen)
        await anyio.sleep(0.1)
        for i in range(rounds):
            before = len(arrived)
            t0 = time.perf_counter()
            await send(i)
            with anyio.fail_after(5):
                while len(arrived) == before:
                    await anyio.sleep(0)
            latencies.append(arrived[-1][0] - t0)
        tg.cancel_scope.cancel()
    return 1e6 * statistics.median(latencies)


async def run(args) -> None:
    with PostgresServer() as server:
        print(f"PostgreSQL {server.install.version} ({server.install.source}), {args.rounds} rounds, medians\n")
        results = {
            "psycopg 3": await bench_psycopg(server.url, args.rounds),
            "asyncpg": await bench_asyncpg(server.url, args.rounds),
        }
    results["psycopg 3"]["import ms"] = import_ms("import psycopg, psycopg_pool")
    results["asyncpg"]["import ms"] = import_ms("import asyncpg")
    names = list(results)
    print(f"{'':<20}" + "".join(f"{n:>14}" for n in names))
    for key in results[names[0]]:
        cells = []
        for n in names:
            value = results[n][key]
            cells.append(f"{value:>14.1f}" if isinstance(value, float) else f"{value:>14}")
        print(f"{key:<20}" + "".join(cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2000)
    anyio.run(run, parser.parse_args())


if __name__ == "__main__":
    main()
