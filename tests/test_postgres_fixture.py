"""The throwaway PostgreSQL server the PostgreSQL store's tests and benchmarks run on."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
from support.postgres import _unavailable

from om_mcp.testing.postgres_server import Install, PostgresServer, PostgresUnavailable, _alive, find_install


@pytest.fixture
def install() -> Install:
    try:
        return find_install()
    except PostgresUnavailable as error:
        _unavailable(error)


@pytest.fixture
def parent_dir():
    """A directory of its own for servers' data, reachable by the account postgres runs as
    (pytest's tmp_path sits under a root-only directory)."""
    path = Path(tempfile.mkdtemp(prefix="om-pg-test-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _wait_dead(pid: int, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_session_server_answers_sql(postgres_server):
    assert postgres_server.url.startswith("postgresql://postgres@127.0.0.1:")
    assert postgres_server.psql("SELECT 40 + 2") == "42"
    assert postgres_server.psql("SHOW fsync") == "off"
    assert postgres_server.psql("SHOW listen_addresses") == "127.0.0.1"


@pytest.mark.anyio
async def test_driver_round_trip_in_a_fresh_database(postgres_url):
    asyncpg = pytest.importorskip("asyncpg")
    conn = await asyncpg.connect(postgres_url)
    try:
        await conn.execute("CREATE TABLE t (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, body text)")
        ids = [await conn.fetchval("INSERT INTO t (body) VALUES ($1) RETURNING id", b) for b in ("a", "b")]
        assert ids == [1, 2]
        assert await conn.fetchval("SELECT string_agg(body, ',' ORDER BY id) FROM t") == "a,b"
    finally:
        await conn.close()


def test_each_test_gets_its_own_database(postgres_server, postgres_url):
    name = postgres_url.rsplit("/", 1)[1]
    assert postgres_server.psql("SELECT count(*) FROM pg_tables WHERE tablename = 't'", name) == "0"
    postgres_server.psql("CREATE TABLE t (x int)", name)
    assert postgres_server.psql("SELECT count(*) FROM pg_tables WHERE tablename = 't'", name) == "1"


@pytest.mark.slow
def test_stop_ends_every_process_and_a_second_start_works(install, parent_dir):
    server = PostgresServer(install, parent_dir=parent_dir)
    for _ in range(2):
        server.start()
        assert server.psql("SELECT 1") == "1"
        postmaster, root = server._process.pid, server.root
        if os.geteuid() == 0:  # initdb and postgres refuse root: they run as a service account
            uid = int(
                next(
                    line
                    for line in Path(f"/proc/{postmaster}/status").read_text().splitlines()
                    if line.startswith("Uid:")
                ).split()[1]
            )
            assert uid != 0
        server.stop()
        assert _wait_dead(postmaster)
        assert not root.exists()
        assert not server.running
    server.stop()  # twice is harmless


@pytest.mark.slow
def test_server_dies_with_a_killed_owner_and_its_directory_is_swept(install, parent_dir):
    script = textwrap.dedent(f"""
        import time
        from om_mcp.testing.postgres_server import PostgresServer, find_install
        server = PostgresServer(find_install(), parent_dir={str(parent_dir)!r}).start()
        print(server._process.pid, server.root, flush=True)
        time.sleep(120)
    """)
    env = {**os.environ, "OM_PG_BINDIR": str(install.bindir)}
    owner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=env)
    try:
        postmaster, root = owner.stdout.readline().split()
        owner.kill()  # SIGKILL: no atexit, no teardown
        owner.wait()
        assert _wait_dead(int(postmaster)), "postmaster outlived its killed owner"
        assert Path(root).exists()
        with PostgresServer(install, parent_dir=parent_dir):
            assert not Path(root).exists(), "the next start did not sweep the dead server's directory"
    finally:
        owner.kill()
        owner.wait()


def test_unavailable_binaries_give_a_clear_reason(monkeypatch, tmp_path):
    monkeypatch.setenv("OM_PG_BINDIR", str(tmp_path))
    with pytest.raises(PostgresUnavailable, match="OM_PG_BINDIR=.* has no initdb, postgres and psql"):
        PostgresServer().start()


def test_unavailable_server_skips_unless_required(monkeypatch):
    error = PostgresUnavailable("no PostgreSQL server binaries")
    monkeypatch.delenv("OM_TEST_POSTGRES", raising=False)
    with pytest.raises(pytest.skip.Exception, match="PostgreSQL unavailable: no PostgreSQL server binaries"):
        _unavailable(error)
    monkeypatch.setenv("OM_TEST_POSTGRES", "require")
    with pytest.raises(pytest.fail.Exception, match="OM_TEST_POSTGRES=require"):
        _unavailable(error)
