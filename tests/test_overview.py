"""The look-at-your-memory reads (`thread_states`, `series_inputs`, `pending_records`) on both
backends, and the commands built on them (`om-mcp status`, `threads`, `show`) against PostgreSQL.

The same conversation is played through the engine into the backend under test and
into a SQLite memory; the reads must agree row for row, times aside (the database's
clock stamps threads and events).
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest
from support.engine import Memory, Script, at, config, msg
from support.processes import PYTHON, REPO, clean_env
from support.timeouts import scaled

from om_mcp.models import ModelError
from om_mcp.store import EVERY_RESOURCE, Store

# What differs between two plays of the same conversation: clock times, durations, ids made at random.
VARYING = {"at", "id", "cycle_id", "duration_ms"}
GROUP_ID = re.compile(r"\b[0-9a-f]{16}\b")  # in the log's text: "## Group `438f89026b54493a`"


def failing_on_bob(messages: list[dict]) -> str:
    from support.engine import conversation_of, tracing_observer

    if "bob" in conversation_of(messages):
        raise ModelError("the provider said no")
    return tracing_observer(messages)


async def play(where: str, scope: str = "thread") -> Memory:
    """Three threads in two resources: one observed, one pending, one whose cycle failed."""
    mem = await Memory.open(config(scope=scope), db_path=where, client=Script(observer=failing_on_bob).model)
    await mem.append_messages("a", [msg(n, at=at(n)) for n in range(6)], "alice", thread_metadata={"title": "A"})
    await mem.observe("a", "alice")
    await mem.append_messages("a", [msg(6, at=at(6))], "alice")
    await mem.append_messages("b", [msg(n, at=at(10 + n)) for n in range(2)], "alice")
    await mem.append_messages("c", [msg(n, at=at(20 + n), text=f"m{n} bob asks") for n in range(3)], "bob")
    try:
        await mem.observe("c", "bob")
    except Exception:  # noqa: BLE001 - a failed cycle is what this thread is for; its event is recorded
        pass
    return mem


def plain(value: Any) -> Any:
    """Rows as plain data without what two plays of one conversation cannot share."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items() if k not in VARYING and not k.endswith("_at")}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, str):
        return GROUP_ID.sub("<group>", value)
    return value


async def reads(store: Store, scope: str) -> dict[str, Any]:
    key_a = "thread:a" if scope == "thread" else "resource:alice"
    series = await store.series_inputs(key_a)
    return {
        "all": plain(await store.thread_states(scope, access=EVERY_RESOURCE)),  # type: ignore[arg-type]
        "alice": plain(await store.thread_states(scope, access=EVERY_RESOURCE, resource_id="alice")),  # type: ignore[arg-type]
        "one": plain(await store.thread_states(scope, access=EVERY_RESOURCE, thread_id="c")),  # type: ignore[arg-type]
        "first": plain(await store.thread_states(scope, access=EVERY_RESOURCE, limit=1)),  # type: ignore[arg-type]
        "series": {"messages": [(t, n) for _, t, n in series.messages], "events": plain(series.events)},
        "series_seqs": len({seq for seq, _, _ in series.messages}),
        "few_events": len((await store.series_inputs(key_a, limit_events=1)).events),
        "pending": await store.pending_records(),
    }


@pytest.mark.anyio
@pytest.mark.parametrize("scope", ["thread", "resource"])
@pytest.mark.slow
async def test_the_overview_reads_agree_on_both_backends(store_location, scope):
    mem = await play(store_location, scope)
    reference = await play(":memory:", scope)
    try:
        store, sqlite = mem.store, reference.store
        got, expected = await reads(store, scope), await reads(sqlite, scope)
        assert got == expected

        states = await store.thread_states(scope, access=EVERY_RESOURCE)  # type: ignore[arg-type]
        assert [s.thread.id for s in states] == ["c", "b", "a"]  # newest-updated first
        a = next(s for s in states if s.thread.id == "a")
        c = next(s for s in states if s.thread.id == "c")
        assert a.record_key == ("thread:a" if scope == "thread" else "resource:alice")
        assert a.last_cycle is not None and a.last_cycle.type == "data-om-observation-end"
        assert a.unobserved_messages == 1 and a.unobserved_tokens > 0 and a.observation_tokens > 0
        assert a.last_observed_at is not None and a.generation == 0
        assert c.last_cycle is not None and c.last_cycle.type == "data-om-observation-failed"
        assert c.last_cycle.payload.get("error")
        assert [s.thread.id for s in await store.thread_states(scope, access=EVERY_RESOURCE, resource_id="alice")] == [
            "b",
            "a",
        ]  # type: ignore[arg-type]
        assert await store.thread_states(scope, access=EVERY_RESOURCE, thread_id="nope") == []  # type: ignore[arg-type]

        inputs = await store.series_inputs(a.record_key)
        assert [seq for seq, _, _ in inputs.messages] == sorted(seq for seq, _, _ in inputs.messages)
        assert len(inputs.messages) == (7 if scope == "thread" else 9)  # resource scope: b's messages too
        assert [e.type for e in inputs.events] == ["data-om-observation-end"]

        pending = await store.pending_records()
        assert [p for p, _, _ in pending] == [p for p, _, _ in sorted(pending, key=lambda r: (-r[1], r[0]))]
        assert {k for k, _, _ in pending} >= {a.record_key, c.record_key}
    finally:
        await mem.close()
        await reference.close()


@pytest.mark.anyio
async def test_the_status_page_reads_either_backend(store_location):
    """The page's data (`MemorySource`) on the backend under test is what it is on SQLite."""
    from om_mcp.server.http.ui.source import MemorySource

    mem, reference = await play(store_location), await play(":memory:")
    try:
        pages = []
        for memory in (mem, reference):
            source = MemorySource(lambda memory=memory: memory)
            threads, detail, series = await source.threads("alice"), await source.thread("a"), await source.series("a")
            assert threads is not None and detail is not None and series is not None
            assert [t.id for t in threads] == ["b", "a"] and series.points and series.cycles
            # b has no title: it is named by the start of its first user message
            (b, b_from), (a, a_from) = [(t.title or "", t.title_from) for t in threads]
            assert (b_from, a, a_from) == ("first-prompt", "A", "set")
            assert b.startswith("m0 words words") and b.endswith("words…") and len(b) <= 81  # cut on a word
            newest = await source.messages("a", limit=3)
            older = await source.messages("a", limit=3, before="m4")
            found = await source.messages("c", limit=5, query="bob")
            assert newest and older and found
            assert [m.id for m in newest.messages] == ["m6", "m5", "m4"] and newest.next_before == "m4"
            assert [m.id for m in older.messages] == ["m3", "m2", "m1"] and older.more
            assert {m.id for m in found.messages} == {"m0", "m1", "m2"} and found.words == ["bob"]
            renamed = await source.retitle("b", "Named")
            assert renamed and (renamed.title, renamed.title_from) == ("Named", "set")
            # (the search's ties, three messages alike, may fall either way: its set is compared above)
            pages.append(plain([m.model_dump(mode="json") for m in (*threads, detail, series, newest, older)]))
        assert pages[0] == pages[1]
    finally:
        await mem.close()
        await reference.close()


# -- the commands against PostgreSQL -------------------------------------------------------------


def om(*args: str, db: str, tmp: Path, **env: str) -> Any:
    done = subprocess.run(
        [PYTHON, "-m", "om_mcp", *args, "--json", "--db", db],
        capture_output=True,
        text=True,
        timeout=scaled(180),
        env={**clean_env(tmp), "OM_OBSERVATIONAL_MEMORY__SCOPE": "thread", **env},
        cwd=REPO,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return json.loads(done.stdout)


@pytest.mark.slow
def test_status_threads_and_show_read_a_postgresql_memory(postgres_url, tmp_path):
    """The same commands on a SQLite file and on PostgreSQL filled the same way say the same."""
    sqlite_file = str(tmp_path / "memory.db")

    async def fill() -> None:
        for where in (postgres_url, sqlite_file):
            await (await play(where)).close()

    anyio.run(fill)
    status = om("status", db=postgres_url, tmp=tmp_path)
    assert status["database"]["path"].startswith("postgresql://") and status["database"]["bytes"] > 0
    assert status["counts"]["threads"] == 3 and status["counts"]["messages"] == 12
    assert status["pending"]["records"] >= 2 and status["pending"]["unobserved_tokens"] > 0
    assert [t["thread"] for t in status["threads"]] == ["c", "b", "a"]

    threads = om("threads", db=postgres_url, tmp=tmp_path)
    assert [(t["thread"], t["resource"]) for t in threads] == [("c", "bob"), ("b", "alice"), ("a", "alice")]
    assert threads[2]["last_cycle"]["what"] == "observed" and threads[2]["title"] == "A"
    assert threads[0]["last_cycle"]["what"] == "failed" and threads[0]["last_cycle"]["error"]

    shown = om("show", "a", db=postgres_url, tmp=tmp_path)
    assert shown["record_key"] == "thread:a" and shown["current_task"] == "answer the user"
    assert "saw m5" in shown["observations"]["text"]
    assert [m["id"] for m in shown["recent_messages"]][-2:] == ["m5", "m6"]

    off = {"OM_OBSERVATIONAL_MEMORY__ENABLED": "false"}  # doctor: no model check on this machine's setup
    doctor = om("doctor", db=postgres_url, tmp=tmp_path, **off)
    checks = [c["check"] for c in doctor["checks"]]
    assert doctor["ok"] and checks[1:4] == ["database", "search index", "running totals"]
    copy = om("backup", str(tmp_path / "copy.db"), db=postgres_url, tmp=tmp_path)
    assert (copy["threads"], copy["messages"]) == (3, 12)
    assert om("threads", db=copy["file"], tmp=tmp_path) == threads

    on_sqlite = [om(*args, db=sqlite_file, tmp=tmp_path) for args in (("status",), ("threads",), ("show", "a"))]
    for pg, lite in zip((status, threads, shown), on_sqlite, strict=True):
        assert plain(pg) == plain(lite) or _differ_only_in_database(pg, lite)


@pytest.mark.slow
def test_export_and_import_move_a_postgresql_memory_from_the_command_line(postgres_url, postgres_server, tmp_path):
    """`om-mcp export --db postgresql://...` and `om-mcp import --db postgresql://...`: a round trip
    between two PostgreSQL databases, and on to a SQLite file, shows the same memory."""
    anyio.run(lambda: _played(postgres_url))
    dump = tmp_path / "memory.jsonl"
    run = partial(_om_text, tmp=tmp_path)
    exported = run("export", "-o", str(dump), db=postgres_url)
    assert "exported" in exported.stderr
    lines = dump.read_text().splitlines()
    assert json.loads(lines[0])["type"] == "om-mcp-export" and json.loads(lines[-1])["type"] == "end"

    target = postgres_server.create_database()
    first = om("import", str(dump), db=target, tmp=tmp_path)
    assert first["added"]["thread"] == 3 and first["added"]["message"] == 12 and not first["skipped"]
    again = om("import", str(dump), db=target, tmp=tmp_path)
    assert not again["added"] and again["skipped"]["message"] == 12
    lite = str(tmp_path / "moved.db")
    assert om("import", str(dump), db=lite, tmp=tmp_path)["added"] == first["added"]

    for thread in ("a", "b", "c"):
        before = om("show", thread, "--generations", db=postgres_url, tmp=tmp_path)
        for where in (target, lite):
            after = om("show", thread, "--generations", db=where, tmp=tmp_path)
            assert after == {**before, "last_cycle": None}  # events are a log of what happened: not exported
    back = tmp_path / "back.jsonl"
    run("export", "-o", str(back), db=target)
    assert back.read_text().splitlines()[1:] == lines[1:]  # the same records, the header's time aside


async def _played(where: str) -> None:
    await (await play(where)).close()


def _om_text(*args: str, db: str, tmp: Path) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [PYTHON, "-m", "om_mcp", *args, "--db", db],
        capture_output=True,
        text=True,
        timeout=scaled(180),
        env={**clean_env(tmp), "OM_OBSERVATIONAL_MEMORY__SCOPE": "thread"},
        cwd=REPO,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return done


def _differ_only_in_database(pg: Any, lite: Any) -> bool:
    """status names its database (and its size): everything else must agree."""
    if not isinstance(pg, dict) or "database" not in pg:
        return False
    strip = {k: v for k, v in pg.items() if k != "database"}, {k: v for k, v in lite.items() if k != "database"}
    return plain(strip[0]) == plain(strip[1])
