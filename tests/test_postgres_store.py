"""The PostgreSQL store where it must do what SQLite's single writer did for free:
several processes (here: several stores, each with its own pool) on one database.

- appends to one thread from many connections keep seq order = commit order, so a
  cursor moved meanwhile never passes a message that commits later;
- two cycles committing from the same state: exactly one wins;
- leases live on the database's clock; a killed process leaves no lock behind;
- the due-work poll skips records another process is working on;
- migrations: replicas starting together, and databases that are not ours or too new;
- changes broadcast to the other processes (LISTEN/NOTIFY), not to oneself.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import anyio
import pytest
from support.backends import location
from support.timeouts import scaled

from om_mcp.engine.search.query import parse_query
from om_mcp.store import NewGroup, NewMessage, Store, open_store
from om_mcp.store.errors import DatabaseRefused
from om_mcp.store.migrations import LATEST_VERSION
from om_mcp.store.postgres.store import PostgresStore

pytestmark = pytest.mark.anyio


def new(mid: str, text: str | None = None, tokens: int = 5) -> NewMessage:
    text = text or f"message {mid}"
    return NewMessage(
        id=mid,
        role="user",
        parts=[{"type": "text", "text": text}],
        created_at="2026-01-01T00:00:00+00:00",
        metadata={},
        body=text,
        tokens=tokens,
    )


async def stores(url: str, n: int) -> list[PostgresStore]:
    return [await open_store(url) for _ in range(n)]


async def close(*opened) -> None:
    for store in opened:
        await store.close()


async def test_both_backends_satisfy_the_store_protocol(store_location):
    store = await open_store(store_location)
    try:
        assert isinstance(store, Store)
        assert store.backend == ("postgres" if store_location.startswith("postgresql://") else "sqlite")
        assert (await store.stats()).backend == store.backend
    finally:
        await store.close()


async def test_a_message_with_a_nul_byte_is_kept_exactly(store_location):
    """PostgreSQL text cannot hold NUL; the message keeps it anyway (its parts are JSON), and is found."""
    store = await open_store(store_location)
    try:
        text = "a pasted log\x00line zebrafish"
        await store.append_messages("t", "r", "thread:t", [new("m1", text)])
        [stored] = await store.message_page("t")
        assert stored.parts == [{"type": "text", "text": text}]
        hits, _ = await store.search_messages("r", parse_query("zebrafish"))
        assert [h.seq for h in hits] == [stored.seq]
        assert await store.integrity() == []
    finally:
        await store.close()


async def test_the_background_drain_reads_work_on_both_backends(store_location):
    """What a server's poll loop asks (`engine/drain.py`): the newest seq, the counts another
    tokenizer made after a seq, and the host sessions that are over with messages unobserved."""
    store = await open_store(store_location)
    try:
        assert await store.last_seq() == 0
        host = {"host": "claude-code"}
        await store.append_messages("t", "r", "thread:t", [new(f"m{i}") for i in range(3)], thread_metadata=host)
        await store.append_messages("u", "r", "thread:u", [new("other")])  # not a host session
        seqs = [m.seq for m in await store.message_page("t")]
        assert await store.last_seq() == max(seqs) + 1
        counted_by = await store.tokenizer_id("another@1")
        assert [r["seq"] for r in await store.stale_token_counts(counted_by)] == [*seqs, max(seqs) + 1]
        assert [r["seq"] for r in await store.stale_token_counts(counted_by, after_seq=seqs[1])] == [
            seqs[2],
            max(seqs) + 1,
        ]
        assert await store.settled_threads("2000-01-01T00:00:00+00:00") == []  # neither ended nor quiet
        [quiet] = await store.settled_threads("2999-01-01T00:00:00+00:00")
        assert (quiet.thread_id, quiet.record_key, quiet.resource_id, quiet.pending_messages) == (
            "t",
            "thread:t",
            "r",
            3,
        )
        await store.set_thread_metadata_paths("t", {"ended_at": "2999-01-01T00:00:00+00:00"})
        [ended] = await store.settled_threads("2000-01-01T00:00:00+00:00")
        assert ended.thread_id == "t"
        assert await store.settled_threads("2999-01-01T00:00:00+00:00", record_key="thread:u") == []
    finally:
        await store.close()


@pytest.mark.slow
async def test_concurrent_appends_and_observations_never_skip_a_message(postgres_url):
    """Eight writers on one thread while a ninth keeps observing up to the newest committed seq.
    If a lower seq could commit after the cursor passed it, its tokens would stay counted as
    unobserved under the cursor: integrity() checks exactly that total."""
    writers = await stores(postgres_url, 3)
    key = "thread:t"
    await writers[0].append_messages("t", "r", key, [new("seed")])
    done = anyio.Event()

    async def write(store: PostgresStore, worker: int) -> None:
        for n in range(25):
            await store.append_messages("t", "r", key, [new(f"w{worker}-{n}-{i}") for i in range(1 + n % 3)])

    async def observe(store: PostgresStore) -> None:
        while not done.is_set():
            record = await store.record(key)
            newest = await store.message_page("t", limit=1, newest_first=True)
            cursor = record.cursors.get("t", 0)
            if newest and newest[0].seq > cursor:
                await store.commit_observation(
                    key,
                    lease=None,
                    expected_cursors={"t": cursor},
                    new_cursors={"t": newest[0].seq},
                    groups=[NewGroup("seen", 1, cursor + 1, newest[0].seq, None, None, "t")],
                    hints={},
                    extracted=None,
                    observed_at=None,
                )
            await anyio.sleep(0)

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(observe, writers[2])
            async with anyio.create_task_group() as appenders:
                for worker in range(8):
                    appenders.start_soon(write, writers[worker % 2], worker)
            done.set()
        assert await writers[0].integrity() == []
        page = await writers[0].message_page("t", limit=10_000)
        assert len(page) == 1 + 8 * sum(1 + n % 3 for n in range(25))
        assert len({m.seq for m in page}) == len(page)
        state = await writers[0].record_state(key, "t")
        unobserved = [m for m in page if m.seq > (await writers[0].record(key)).cursors["t"]]
        assert state.pending_messages == len(unobserved)
    finally:
        await close(*writers)


async def test_two_cycles_committing_from_the_same_state_one_wins(postgres_url):
    a, b = await stores(postgres_url, 2)
    try:
        await a.append_messages("t", "r", "thread:t", [new("m1"), new("m2")])
        seq = (await a.message_page("t", limit=5))[-1].seq

        async def commit(store: PostgresStore, text: str) -> bool:
            return await store.commit_observation(
                "thread:t",
                lease=None,
                expected_cursors={"t": 0},
                new_cursors={"t": seq},
                groups=[NewGroup(text, 1, 1, seq, "m1", "m2", "t")],
                hints={},
                extracted=None,
                observed_at=None,
            )

        results: list[tuple[str, bool]] = []

        async def run(store, text):
            results.append((text, await commit(store, text)))

        async with anyio.create_task_group() as group:
            for n, store in enumerate((a, b) * 3):
                group.start_soon(run, store, f"cycle {n}")
        assert sorted(won for _, won in results) == [False] * 5 + [True]
        assert [g.text for g in await a.groups("thread:t")] == [text for text, won in results if won]
    finally:
        await close(a, b)


async def test_leases_use_the_database_clock_and_the_owner_check(postgres_url):
    a, b = await stores(postgres_url, 2)
    try:
        assert await a.acquire_lease("thread:t", "observe", "A", ttl=0.5)
        assert not await b.acquire_lease("thread:t", "observe", "B", ttl=30)
        assert await a.acquire_lease("thread:t", "observe", "A", ttl=0.5)  # a renewal
        assert await b.lease_holder("thread:t", "observe") == "A"
        with anyio.fail_after(scaled(10)):  # until the database's clock passes the half second
            while await b.lease_holder("thread:t", "observe") is not None:
                await anyio.sleep(0.05)
        assert await b.acquire_lease("thread:t", "observe", "B", ttl=30)  # expired: taken over
        # a commit checks the lease it was given
        await a.append_messages("t", "r", "thread:t", [new("m1")])
        ok = await a.commit_observation(
            "thread:t",
            lease=("observe", "A"),
            expected_cursors={"t": 0},
            new_cursors={"t": 1},
            groups=[],
            hints={},
            extracted=None,
            observed_at=None,
        )
        assert ok is False
        await b.release_lease("thread:t", "observe", "B")
        assert await a.lease_holder("thread:t", "observe") is None
    finally:
        await close(a, b)


async def test_the_poll_skips_records_someone_is_working_on(postgres_url):
    a, b = await stores(postgres_url, 2)
    try:
        for thread in ("busy", "free"):
            await a.append_messages(thread, "r", f"thread:{thread}", [new(f"{thread}-1", tokens=500)])
        assert {w.record_key for w in await b.due_work(100, 10_000)} == {"thread:busy", "thread:free"}
        assert await a.acquire_lease("thread:busy", "observe", "A", ttl=30)
        assert [w.record_key for w in await b.due_work(100, 10_000)] == ["thread:free"]
    finally:
        await close(a, b)


KILLED = """
import asyncio, os, sys
import asyncpg

async def main():
    conn = await asyncpg.connect(sys.argv[1], server_settings={"search_path": "om"})
    tr = conn.transaction()
    await tr.start()
    await conn.fetchval("SELECT generation FROM om_records WHERE key = 'thread:t' FOR UPDATE")
    print("locked", flush=True)
    await asyncio.sleep(120)

asyncio.run(main())
"""


async def test_a_killed_process_leaves_no_lock_behind(postgres_url):
    store = await open_store(postgres_url)
    try:
        await store.append_messages("t", "r", "thread:t", [new("m1")])
        holder = subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(KILLED), postgres_url], stdout=subprocess.PIPE, text=True
        )
        try:
            assert holder.stdout.readline().strip() == "locked"
            os.kill(holder.pid, signal.SIGKILL)
        finally:
            holder.wait(10)
        # Waits for the killed process's lock only if it was left behind: then the test's time limit says so.
        assert await store.commit_observation(
            "thread:t",
            lease=None,
            expected_cursors={"t": 0},
            new_cursors={"t": 1},
            groups=[NewGroup("seen m1", 2, 1, 1, "m1", "m1", "t")],
            hints={},
            extracted=None,
            observed_at=None,
        )
    finally:
        await store.close()


async def test_replicas_starting_together_migrate_once(postgres_url):
    async with anyio.create_task_group() as group:
        opened: list[PostgresStore] = []

        async def start() -> None:
            opened.append(await open_store(postgres_url))

        for _ in range(4):
            group.start_soon(start)
    try:
        assert len(opened) == 4
        assert (await opened[0].stats()).schema_version == LATEST_VERSION
    finally:
        await close(*opened)


async def _set_meta(url: str, sql: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


async def test_a_newer_schema_is_refused_with_what_to_do(postgres_url):
    await (await open_store(postgres_url)).close()
    await _set_meta(postgres_url, f"UPDATE om.om_meta SET value = '{LATEST_VERSION + 1}' WHERE key = 'schema_version'")
    with pytest.raises(DatabaseRefused, match="newer om-mcp.*upgrade om-mcp"):
        await open_store(postgres_url)


async def test_another_applications_tables_are_refused(postgres_url):
    await _set_meta(postgres_url, "CREATE SCHEMA om; CREATE TABLE om.invoices (id int)")
    with pytest.raises(DatabaseRefused, match="not om-mcp's"):
        await open_store(postgres_url)
    await _set_meta(
        postgres_url,
        "DROP TABLE om.invoices; CREATE TABLE om.om_meta (key text PRIMARY KEY, value text"
        " NOT NULL); INSERT INTO om.om_meta VALUES ('application_id', 'billing')",
    )
    with pytest.raises(DatabaseRefused, match="another application"):
        await open_store(postgres_url)


async def test_an_unreachable_server_is_refused_in_one_line():
    with pytest.raises(DatabaseRefused, match="cannot connect to postgresql://om@127.0.0.1:9/x: .*check db_url"):
        await open_store("postgresql://om:secret@127.0.0.1:9/x")


async def test_broadcasts_reach_the_other_processes_not_the_sender(postgres_url):
    a, b = await stores(postgres_url, 2)
    heard: dict[str, list] = {"a": [], "b": []}
    got = anyio.Event()

    async def on_b(message):
        heard["b"].append(message)
        got.set()

    async def on_a(message):
        heard["a"].append(message)

    stop_a, stop_b = await a.listen(on_a), await b.listen(on_b)
    try:
        await a.broadcast({"uris": ["om://threads/t1/messages"]})
        with anyio.fail_after(scaled(10)):
            await got.wait()
        # A barrier instead of a wait: PostgreSQL delivers notifications in commit order, so had a heard
        # its own broadcast, it would have heard it before b's.
        await b.broadcast({"uris": ["om://threads/t2/messages"]})
        with anyio.fail_after(scaled(10)):
            while not heard["a"]:
                await anyio.sleep(0.02)
        assert heard == {"a": [{"uris": ["om://threads/t2/messages"]}], "b": [{"uris": ["om://threads/t1/messages"]}]}
    finally:
        await stop_a()
        await stop_b()
        await close(a, b)


async def test_vectors_say_how_they_are_searched(postgres_url, postgres_server):
    store = await open_store(postgres_url)
    try:
        status = (await store.stats()).vectors
        if postgres_server.has_extension("vector"):
            assert status.startswith("pgvector ") and "in the database" in status
        else:
            assert "not installed" in status
    finally:
        await store.close()
    sqlite = await open_store(location())
    try:
        assert (await sqlite.stats()).vectors == "compared in Python"
    finally:
        await sqlite.close()
