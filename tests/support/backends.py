"""Running the same tests on both store backends, where the backends differ.

The store conformance suite (`test_store_conformance.py`) and the tests of what only a
database can show (the overview reads, deletion, a NUL byte, the background drain's reads)
opt in with `pytestmark = [..., pytest.mark.usefixtures("store_location")]` (or a test takes
`store_location`): each test then runs twice, on SQLite and on PostgreSQL. The engine's and
the MCP tools' tests run on SQLite only. `store_location` is the test's own database, as `db_path` is its own
file (conftest's `make_config` uses it). Helpers that open a memory call
`location()`, which is a new empty database at each call, as ":memory:" is:
":memory:" itself on SQLite, a fresh PostgreSQL database otherwise. Outside
such tests `location()` is ":memory:" and `on_postgres()` is False.

PostgreSQL databases are copies of a template migrated once per session
(CREATE DATABASE ... TEMPLATE), and are emptied and reused after the test: a
test costs a few DELETEs (20 ms), not a copy (300 ms) or a migration.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

import anyio
import pytest

from om_mcp.testing.postgres_server import PostgresServer

TEMPLATE = "om_template"
_current: dict = {"location": ":memory:", "backend": "sqlite", "server": None, "template": None, "made": []}
_counter = {"n": 0}


def location() -> str:
    """A new empty database: ':memory:', or a fresh PostgreSQL database (dropped after the test)."""
    if _current["backend"] != "postgres":
        return ":memory:"
    where = fresh_database(_current["server"], _current["template"])
    _current["made"].append(where)
    return where


def backend() -> str:
    return _current["backend"]


def on_postgres() -> bool:
    return _current["backend"] == "postgres"


@pytest.fixture(scope="session")
def postgres_template(postgres_server: PostgresServer) -> str:
    """A database with the current schema, for tests' databases to copy."""
    from om_mcp.store import open_store

    url = postgres_server.create_database(TEMPLATE)

    async def migrate() -> None:
        await (await open_store(url)).close()

    _run(migrate)
    return TEMPLATE


def _run(function, *args):
    """anyio.run, on a thread of its own: a fixture may be set up while a test's event loop runs."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(anyio.run, function, *args).result()


_clean: list[str] = []  # emptied databases, ready for the next test


def fresh_database(server: PostgresServer, template: str) -> str:
    if _clean:
        return server.url_for(_clean.pop())
    _counter["n"] += 1
    name = f"om_t{os.getpid()}_{_counter['n']}"
    server.psql(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    return server.url_for(name)


async def _empty(url: str) -> None:
    """Delete every row, as the template has them (the test server's superuser skips FK triggers)."""
    import asyncpg

    conn = await asyncpg.connect(url, server_settings={"lock_timeout": "2000"})
    try:
        tables = [
            r[0]
            for r in await conn.fetch(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'om' AND tablename <> 'om_meta'"
            )
        ]
        async with conn.transaction():
            await conn.execute("SET LOCAL session_replication_role = replica")
            for table in tables:
                await conn.execute(f"DELETE FROM om.{table}")
            await conn.execute("INSERT INTO om.om_counters (name, value) VALUES ('events', 0)")
            await conn.execute("ALTER TABLE om.messages ALTER COLUMN seq RESTART")
            await conn.execute("ALTER TABLE om.om_tokenizers ALTER COLUMN id RESTART")
    finally:
        await conn.close()


def release(server: PostgresServer, url: str) -> None:
    """Empty the database for the next test; drop it if that fails (a connection left open)."""
    name = urlsplit(url).path.lstrip("/")
    try:
        _run(_empty, url)
    except Exception:  # noqa: BLE001 - a fresh copy is made instead
        server.drop_database(name)
        return
    _clean.append(name)


@pytest.fixture(params=["sqlite", "postgres"])
def store_location(request: pytest.FixtureRequest) -> Iterator[str]:
    """The database of this run of the test: SQLite in memory, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        yield ":memory:"
        return
    server = request.getfixturevalue("postgres_server")
    template = request.getfixturevalue("postgres_template")
    where = fresh_database(server, template)
    _current.update(location=where, backend="postgres", server=server, template=template, made=[where])
    try:
        yield where
    finally:
        made = _current["made"]
        _current.update(location=":memory:", backend="sqlite", server=None, template=None, made=[])
        for url in made if server.running else ():
            release(server, url)


# Tests that look at tables directly name SQLite's; these are PostgreSQL's names for the same rows.
PG_TABLES = {"om_groups_fts": "om_groups", "messages_fts": "messages_fts"}


async def rows(store, sql: str, params: tuple = ()) -> list[tuple]:
    """Run a read-only SQL query (SQLite's dialect, `?` placeholders) on either backend."""
    if store.backend == "sqlite":
        return await store.db.read(lambda conn: [tuple(r) for r in conn.execute(sql, params).fetchall()])
    parts = sql.split("?")
    sql = parts[0] + "".join(f"${n}{part}" for n, part in enumerate(parts[1:], start=1))
    for sqlite_name, pg_name in PG_TABLES.items():
        sql = sql.replace(sqlite_name, pg_name)

    async def run(conn):
        return [tuple(r) for r in await conn.fetch(sql, *params)]

    return await store.db.read(run)


async def scalar(store, sql: str, params: tuple = ()):
    found = await rows(store, sql, params)
    return found[0][0] if found else None


async def postgres_text(url: str) -> bytes:
    """Every live row of every om-mcp table, as text: what the database still holds."""
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        tables = [r[0] for r in await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'om'")]
        out = []
        for table in tables:
            out += [r[0] for r in await conn.fetch(f"SELECT t::text FROM om.{table} t")]
        return "\n".join(out).encode()
    finally:
        await conn.close()
