"""A database that stops taking writes while the server runs: every tool says so in one
line, changes nothing, and works again once the cause is gone.

Three honest ways to get there: SQLite's own read-only switch on the server's connection
(`PRAGMA query_only`, which answers writes exactly as a read-only file does), a page limit
the next write cannot fit under (`PRAGMA max_page_count`: SQLite's SQLITE_FULL, the error a
full disk gives), and, in a real `om-mcp serve` process, the file made immutable under the
open connection (what a filesystem gone read-only does to it).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from support.files import read_only
from support.mcp import call, connect, fail, ok
from support.processes import REPO, clean_env, server_command
from support.timeouts import scaled

from om_mcp.config import Config
from om_mcp.engine import Memory
from om_mcp.server import build_server
from om_mcp.testing import ScriptedModel

pytestmark = pytest.mark.anyio

OBSERVER = "<observations>\nDate: Mar 2, 2026\n* 🔴 (10:00) the user said hello\n</observations>"
WRITES: list[tuple[str, dict[str, Any]]] = [
    ("append_messages", {"thread_id": "t", "user": "one more"}),
    ("update_working_memory", {"thread_id": "t", "memory": "# Notes\n- likes tea"}),
    ("update_thread", {"thread_id": "t", "title": "renamed"}),
    ("observe", {"thread_id": "t"}),
    ("reflect", {"thread_id": "t"}),
    ("delete_thread", {"thread_id": "t"}),
]


@pytest.fixture
async def memory(tmp_path: Path):
    config = Config.model_validate(
        {
            "db_path": str(tmp_path / "om.db"),
            "observational_memory": {
                "scope": "thread",
                "observation": {"message_tokens": 100_000, "buffer_tokens": False},
            },
        }
    )
    opened = await Memory.open(config, client=ScriptedModel(lambda messages, target: OBSERVER))
    yield opened
    await opened.close()


async def pragma(memory: Memory, statement: str) -> Any:
    """A statement on the server's own connection, on its database thread."""
    return await memory.store.db.raw(lambda conn: conn.execute(statement).fetchone())


async def snapshot(client: Client) -> tuple[Any, ...]:
    context = await ok(client, "get_context", thread_id="t")
    status = json.loads((await client.read_resource("om://threads/t/status")).contents[0].text)
    return [m["id"] for m in context["messages"]], status["message_count"], status["generation_count"]


async def test_a_read_only_database_answers_every_write_in_one_line_and_reads_go_on(memory):
    async with connect(build_server(memory.config, memory)) as client:
        await ok(client, "append_messages", thread_id="t", user="hello", assistant="hi")
        before = await snapshot(client)
        await pragma(memory, "PRAGMA query_only = 1")
        for tool, arguments in WRITES:
            error = await fail(client, tool, **arguments)
            assert (
                error
                == "the database file is read-only: check its permissions (and its folder's), or its filesystem's mount"
            ), (tool, error)
        assert await snapshot(client) == before  # reads still answer, and nothing changed
        assert "hello" in await call(client, "recall", thread_id="t", mode="search", query="hello")
        await pragma(memory, "PRAGMA query_only = 0")
        assert (await ok(client, "observe", thread_id="t"))["ran"] is True


async def test_a_full_disk_answers_in_one_line_changes_nothing_and_recovers(memory):
    async with connect(build_server(memory.config, memory)) as client:
        await ok(client, "append_messages", thread_id="t", user="hello", assistant="hi")
        before = await snapshot(client)
        pages = (await pragma(memory, "PRAGMA page_count"))[0]
        await pragma(memory, f"PRAGMA max_page_count = {pages}")
        big = "a long message that needs pages the file may not grow to " * 4000
        for tool, arguments in [
            ("append_messages", {"thread_id": "t", "user": big}),
            ("update_working_memory", {"thread_id": "t", "memory": big[:39_000]}),
        ]:
            error = await fail(client, tool, **arguments)
            assert error == "the disk holding the database is full: free some space, nothing was written", error
        assert await snapshot(client) == before
        await pragma(memory, "PRAGMA max_page_count = 1073741823")
        assert (await ok(client, "append_messages", thread_id="t", user=big))["stored"] == 1


@pytest.mark.slow
async def test_a_file_that_turns_read_only_under_the_server_gets_a_clear_error(tmp_path: Path):
    """The real process; the file and its -wal made immutable while it holds them open."""
    db = tmp_path / "om.db"
    command, *args = server_command("--db", str(db))
    params = StdioServerParameters(
        command=command, args=args, cwd=str(REPO), env=clean_env(tmp_path, OM_OBSERVATIONAL_MEMORY__ENABLED="false")
    )
    with anyio.fail_after(scaled(60)):
        async with Client(params) as client:
            await ok(client, "append_messages", thread_id="t", user="hello")
            wal = Path(f"{db}-wal")
            assert wal.exists()
            with read_only(db, wal) as how:
                if how == "chmod":
                    pytest.skip("permission bits do not bind an open file; only root can make it immutable")
                error = await fail(client, "append_messages", thread_id="t", user="while locked")
                context = await ok(client, "get_context", thread_id="t")
            assert error.startswith("the database file cannot be written (disk I/O error)"), error
            assert [m["content"] for m in context["messages"]] == ["hello"]
            await ok(client, "append_messages", thread_id="t", user="after")  # the cause gone, it works again
            context = await ok(client, "get_context", thread_id="t")
            assert [m["content"] for m in context["messages"]] == ["hello", "after"]


@pytest.mark.slow
async def test_opening_the_file_a_second_time_in_one_process_keeps_the_first_connection_s_locks(tmp_path: Path):
    """POSIX locks belong to the process: a second open's header read used to close a descriptor of the
    file and so drop the first connection's WAL lock, and the next process to close its connection took
    itself for the last one and deleted the -wal under the server."""
    path = str(tmp_path / "om.db")
    config = Config.model_validate({"db_path": path})
    first = await Memory.open(config)
    try:
        await first.append_messages("t", [{"role": "user", "content": "kept in the WAL"}])
        await (await Memory.open(config)).close()
        reader = f"import sqlite3; c = sqlite3.connect({path!r}); c.execute('select count(*) from messages'); c.close()"
        await anyio.run_process([sys.executable, "-c", reader], check=True)
        assert Path(f"{path}-wal").exists(), "another process deleted the WAL of a database this one holds open"
        assert "kept in the WAL" in str(await first.get_context("t"))
    finally:
        await first.close()
