"""Scaling out: choosing PostgreSQL in the config, moving a memory there with
`om-mcp migrate`, and several servers on one database hearing each other's changes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import anyio
import pytest
from support.engine import Memory, Script, config, msg
from support.mcp import connect, ok
from support.processes import clean_env
from support.timeouts import scaled

from om_mcp.config import ConfigError, load_config
from om_mcp.engine import RecallQuery
from om_mcp.server import build_server
from om_mcp.store import copy as copying
from om_mcp.store.errors import DatabaseRefused

pytestmark = pytest.mark.anyio


# -- the config ---------------------------------------------------------------------------------


def test_db_url_comes_from_the_config_or_om_db_url():
    url = "postgresql://om:pw@db.internal:5432/memory"
    assert load_config(env={"OM_DB_URL": url}).database() == url
    assert str(load_config(env={"OM_DB_PATH": "/tmp/m.db"}).database()) == "/tmp/m.db"


def test_db_path_and_db_url_together_are_refused_naming_both():
    with pytest.raises(ConfigError, match="db_path and db_url are both set"):
        load_config(env={"OM_DB_URL": "postgresql://h/db", "OM_DB_PATH": "/tmp/m.db"})
    with pytest.raises(ConfigError, match="db_url: must be a PostgreSQL URL"):
        load_config(env={"OM_DB_URL": "mysql://h/db"})


def test_serve_refuses_an_unreachable_database_in_one_line(tmp_path):
    env = {**clean_env(tmp_path), "OM_DB_URL": "postgresql://om:secret@127.0.0.1:9/memory"}
    out = subprocess.run(
        [sys.executable, "-m", "om_mcp", "serve"],
        env=env,
        capture_output=True,
        text=True,
        timeout=scaled(60),
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 3
    assert out.stderr.strip().splitlines()[-1].startswith("om-mcp: cannot connect to postgresql://om@127.0.0.1:9/")
    assert "secret" not in out.stderr


# -- moving a memory: om-mcp migrate ---------------------------------------------------------------


async def _fill(memory: Memory) -> None:
    """Messages in two resources, an observation log with a reflection, working memory, events."""
    for n in range(12):
        await memory.append_messages("trip", [msg(n, text=f"m{n} we planned the Lisbon trip, day {n} by tram")])
    await memory.append_messages(
        "cooking",
        [
            msg(100, text="m100 the sourdough starter needs rye flour"),
            msg(101, text="m101 a pasted log line\x00with a NUL byte"),
        ],
    )
    await memory.append_messages("other", [msg(200, text="m200 tram timetable")], resource_id="someone-else")
    assert (await memory.observe("trip")).ran
    assert (await memory.reflect("trip")).ran
    await memory.append_messages("trip", [msg(12, text="m12 booked the tram tour for Tuesday")])
    await memory.update_working_memory("trip", "# Notes\n- prefers trams")


async def _views(memory: Memory) -> dict:
    """What a client sees: contexts, searches, logs, events, browsing."""
    out = {}
    for thread in ("trip", "cooking"):
        out[f"context {thread}"] = (await memory.get_context(thread)).model_dump()
        out[f"log {thread}"] = await memory.observations(thread, history=True)
        out[f"events {thread}"] = await memory.events_of(thread)
    for query in ("Lisbon tram", "sourdough rye", "booked tour Tuesday"):
        out[f"search {query}"] = [r.model_dump() for r in await memory.search("trip", query)]
        out[f"recall {query}"] = (await memory.recall(RecallQuery(thread_id="trip", mode="search", query=query))).text
    out["threads"] = [t.model_dump() for t in await memory.threads("default")]
    out["page"] = (await memory.recall(RecallQuery(thread_id="trip", limit=50))).text
    return out


def _cfg():
    return config(observation__message_tokens=1_000_000)


async def test_migrate_copies_a_memory_that_answers_the_same(tmp_path, postgres_url, monkeypatch):
    source = tmp_path / "memory.db"
    memory = await Memory.open(_cfg(), db_path=str(source), client=Script().model)
    await _fill(memory)
    before = await _views(memory)
    await memory.close()

    # a first run stops part-way (a lost connection, Ctrl-C) ...
    monkeypatch.setattr(copying, "BATCH", 4)
    real_write, writes = copying._pg_write, []

    async def failing_write(store, table, rows):
        writes.append(table.name)
        if len(writes) == 5:
            raise OSError("connection lost")
        await real_write(store, table, rows)

    monkeypatch.setattr(copying, "_pg_write", failing_write)
    with pytest.raises(OSError):
        await copying.copy_memory(f"sqlite://{source}", postgres_url)
    monkeypatch.setattr(copying, "_pg_write", real_write)
    # ... and the next one continues, adding only what is missing
    report = await copying.copy_memory(f"sqlite://{source}", postgres_url)
    assert report.resumed and report.rows["resources"] == 0 and report.rows["messages"] > 0
    assert {name: report.totals[name] for name in report.totals} == await _counts(postgres_url)

    migrated = await Memory.open(_cfg(), db_path=postgres_url, client=Script().model)
    try:
        assert await migrated.store.integrity() == []
        assert await _views(migrated) == before
        # it goes on from there: new messages get new seqs, new events new ids
        out = await migrated.append_messages("trip", [msg(13, text="m13 one more tram")])
        assert out.appended == 1 and (await migrated.search("trip", "one more tram"))[0].message_id == "m13"
    finally:
        await migrated.close()

    # once done, running it again adds nothing
    again = await copying.copy_memory(f"sqlite://{source}", postgres_url)
    assert again.resumed and set(again.rows.values()) == {0}


async def _counts(url: str) -> dict[str, int]:
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        return {t.name: await conn.fetchval(f"SELECT COUNT(*) FROM om.{t.name}") for t in copying.TABLES}
    finally:
        await conn.close()


async def test_migrate_refuses_a_target_holding_another_memory(tmp_path, postgres_url):
    other = await Memory.open(_cfg(), db_path=postgres_url)
    await other.append_messages("x", [msg(1)])
    await other.close()
    source = tmp_path / "memory.db"
    memory = await Memory.open(_cfg(), db_path=str(source))
    await memory.append_messages("t", [msg(1)])
    await memory.close()
    with pytest.raises(DatabaseRefused, match="already holds a memory"):
        await copying.copy_memory(str(source), postgres_url)


async def test_a_postgresql_memory_backs_up_into_a_sqlite_file(tmp_path, postgres_url):
    memory = await Memory.open(_cfg(), db_path=postgres_url, client=Script().model)
    await _fill(memory)
    before = await _views(memory)
    size = await memory.backup(str(tmp_path / "backup.db"))
    await memory.close()
    assert size > 0
    restored = await Memory.open(_cfg(), db_path=str(tmp_path / "backup.db"), client=Script().model)
    try:
        assert await restored.store.integrity() == []
        assert await _views(restored) == before
    finally:
        await restored.close()


@pytest.mark.slow
def test_the_migrate_command_prints_what_it_did(tmp_path, postgres_url):
    source = tmp_path / "memory.db"

    async def fill() -> None:
        memory = await Memory.open(_cfg(), db_path=str(source))
        await memory.append_messages("t", [msg(n) for n in range(5)])
        await memory.close()

    anyio.run(fill)
    command = [
        sys.executable,
        "-m",
        "om_mcp",
        "migrate",
        "--from",
        f"sqlite://{source}",
        "--to",
        postgres_url,
        "--json",
    ]
    first = subprocess.run(command, env=clean_env(tmp_path), capture_output=True, text=True, timeout=scaled(120))
    assert first.returncode == 0, first.stderr
    result = json.loads(first.stdout)
    assert result["rows"]["messages"] == 5 and result["resumed"] is False
    second = subprocess.run(command, env=clean_env(tmp_path), capture_output=True, text=True, timeout=scaled(120))
    assert json.loads(second.stdout)["resumed"] is True and json.loads(second.stdout)["rows"]["messages"] == 0
    missing = subprocess.run(
        [*command[:5], f"sqlite://{tmp_path}/nope.db", *command[6:]],
        env=clean_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=scaled(120),
    )
    assert missing.returncode == 3 and "no database at" in missing.stderr and not os.path.exists(tmp_path / "nope.db")


# -- replicas hear each other ------------------------------------------------------------------------


async def test_a_change_through_one_replica_reaches_subscribers_of_another(postgres_url):
    cfg = config(observation__message_tokens=1_000_000)
    one = await Memory.open(cfg, db_path=postgres_url)
    two = await Memory.open(cfg, db_path=postgres_url)
    try:
        async with connect(build_server(cfg, one)) as listener, connect(build_server(cfg, two)) as writer:
            watched = ["om://threads/t1/messages", "om://threads/t1/working-memory"]
            async with listener.listen(resource_subscriptions=watched) as stream:
                await ok(writer, "append_messages", thread_id="t1", user="hello from the other replica")
                await ok(writer, "update_working_memory", thread_id="t1", memory="# Notes\n- from two")
                heard: set[str] = set()
                with anyio.fail_after(scaled(10)):
                    async for event in stream:
                        heard.add(event.uri)
                        if set(watched) <= heard:
                            break
            # and what it heard about is there to read through its own replica
            assert "hello from the other replica" in json.dumps(await ok(listener, "get_context", thread_id="t1"))
    finally:
        await one.close()
        await two.close()


def _rpc(http, url: str, method: str, params: dict, ident: int) -> dict:
    response = http.post(
        url,
        json={"jsonrpc": "2.0", "id": ident, "method": method, "params": params},
        headers={"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"},
    )
    assert response.status_code == 200, response.text
    assert "mcp-session-id" not in response.headers  # stateless: nothing to be sticky to
    data = [line[5:] for line in response.text.splitlines() if line.startswith("data:")]
    return json.loads(data[-1] if data else response.text)


@pytest.mark.slow
def test_stateless_legacy_requests_go_to_any_replica(tmp_path, postgres_url):
    """With server.http.stateless, a legacy client's requests may land on any replica."""
    import httpx2
    from support.processes import server_command
    from test_transports import stop, wait_for_port

    from om_mcp.testing.ports import free_port

    env = clean_env(
        tmp_path, OM_DB_URL=postgres_url, OM_SERVER__HTTP__STATELESS="true", OM_OBSERVATIONAL_MEMORY__ENABLED="false"
    )
    ports = [free_port(), free_port()]
    replicas = [
        subprocess.Popen(
            server_command("--transport", "http", "--port", str(port)),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for port in ports
    ]
    try:
        for port, process in zip(ports, replicas):
            wait_for_port(port, process)
        a, b = (f"http://127.0.0.1:{port}/mcp" for port in ports)
        with httpx2.Client(timeout=scaled(30)) as http:
            hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
            assert _rpc(http, a, "initialize", hello, 1)["result"]["protocolVersion"] == "2025-11-25"
            appended = _rpc(
                http,
                b,
                "tools/call",
                {"name": "append_messages", "arguments": {"thread_id": "t1", "user": "written through replica b"}},
                2,
            )
            assert not appended["result"].get("isError"), appended
            context = _rpc(http, a, "tools/call", {"name": "get_context", "arguments": {"thread_id": "t1"}}, 3)
            assert "written through replica b" in context["result"]["content"][0]["text"]
    finally:
        for process in replicas:
            stop(process)
    for process in replicas:
        assert "Traceback" not in process.stderr.read()
