"""The one append pipeline (`engine/append.py`): every way a message comes in (an MCP client's
`append_messages`, a host hook, `om-mcp ingest`, `om-mcp import` of an export) goes through
the same steps, inside the append's transaction, on both backends; a failing step leaves
nothing behind, so the hook reads the same transcript again next time."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from support.engine import Memory
from support.hooks import hook_ingest as ingest
from support.hooks import source_of

from om_mcp.commands.ingest import store as ingest_file
from om_mcp.config import Config
from om_mcp.engine import append
from om_mcp.engine.recorder import RecorderSettings
from om_mcp.engine.tokens import TokenCounter
from om_mcp.hosts.events import HookEvent
from om_mcp.store import NewMessage, StoreError, Transaction, local, open_store, record_key
from om_mcp.testing.transcripts import ClaudeTranscript

PROJECT = "/home/user/project"
GITHUB = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"  # a token's shape, no real token


class Seen:
    """A step that notes what each stored batch brought and records an event saying so."""

    def __init__(self, fail: bool = False):
        self.batches: list[tuple[str, list[str], bool]] = []
        self.fail = fail

    async def __call__(self, store: Transaction, stored: append.Stored) -> list[dict[str, Any]]:
        self.batches.append((stored.thread_id, [m.id for m in stored.messages], stored.imported))
        # A step may use any operation of the store, in the append's transaction.
        await store.set_thread_metadata_paths(stored.thread_id, {"stepped": len(self.batches)})
        if self.fail:
            raise RuntimeError("the step failed")
        return [{"type": "test-step", "thread_id": stored.thread_id, "resource_id": stored.resource_id}]


@pytest.fixture
def seen(monkeypatch) -> Seen:
    step = Seen()
    monkeypatch.setattr(append, "STEPS", [*append.STEPS, step])
    return step


def memory_config(db: Path, **options: Any) -> Config:
    return Config.model_validate({"db_path": str(db), "observational_memory": {"enabled": False}, **options})


def hook_settings(db: Path) -> RecorderSettings:
    return RecorderSettings(
        db_path=str(db),
        observation=False,
        scope="thread",
        limits=memory_config(db).observational_memory.limits(),
        working_memory=None,
        max_message_chars=1_000_000,
    )


def hook_event(name: str, transcript: Path, session: str = "s1") -> HookEvent:
    return HookEvent("claude-code", name, session, str(transcript), PROJECT)


def events_of(db: Path, thread: str) -> list[str]:
    conn = local.direct.open_database(str(db))
    try:
        return [r[0] for r in conn.execute("SELECT type FROM om_events WHERE thread_id = ? ORDER BY id", (thread,))]
    finally:
        conn.close()


@pytest.mark.anyio
async def test_every_way_in_goes_through_the_steps_in_the_append_transaction(tmp_path: Path, seen: Seen) -> None:
    db = tmp_path / "memory.db"
    cfg = memory_config(db)
    memory = await Memory.open(cfg)
    try:
        # an MCP client's append
        done = await memory.append_messages("mcp", [{"id": "a", "role": "user", "content": "hello"}])
        assert [e["type"] for e in done.events] == ["test-step"]
        # conversations from another app go through append_messages too
        export = tmp_path / "export.jsonl"
        with export.open("w") as out:
            await memory.export_to(out)
    finally:
        await memory.close()
    # a host hook
    transcript = ClaudeTranscript(tmp_path / "s1.jsonl", "s1", PROJECT)
    transcript.turn("Should we use SQLite?", "Yes: one file.")
    conn = local.direct.open_database(str(db))
    try:
        hooked = ingest(
            conn, hook_settings(db), TokenCounter.estimating(), hook_event("Stop", transcript.path), PROJECT, PROJECT
        )
    finally:
        conn.close()
    assert hooked.appended == 2
    # om-mcp ingest
    messages = [
        {"id": f"f{n}", "role": "user" if n % 2 == 0 else "assistant", "content": f"line {n}"} for n in range(3)
    ]
    summary = ingest_file(
        cfg, "openai-messages", iter([(messages, 0)]), "file", "default", start_worker=False, config_file=None
    )
    assert summary["appended"] == 3
    # om-mcp import of an export, into another memory
    target = await Memory.open(memory_config(tmp_path / "other.db"))
    try:
        await target.import_from(io.BytesIO(export.read_bytes()))
        assert (await target.thread("mcp")).metadata["stepped"] == 4  # written in the import's transaction
    finally:
        await target.close()

    assert [(thread, imported) for thread, _, imported in seen.batches] == [
        ("mcp", False),
        ("s1", False),
        ("file", False),
        ("mcp", True),
    ]
    ids = [ids for _, ids, _ in seen.batches]
    assert ids[0] == ["a"] and len(ids[1]) == 2 and ids[2] == ["f0", "f1", "f2"] and ids[3] == ["a"]
    for thread in ("mcp", "s1", "file"):
        assert events_of(db, thread) == ["test-step"]  # persisted with the messages
    reopened = await Memory.open(cfg)
    try:
        assert (await reopened.thread("s1")).metadata["stepped"] == 2
        assert (await reopened.thread("file")).metadata["ended_at"]  # the last batch ended the session
    finally:
        await reopened.close()


@pytest.mark.anyio
async def test_a_failing_step_stores_nothing_and_the_hook_reads_the_turn_again(tmp_path: Path, monkeypatch) -> None:
    db = tmp_path / "memory.db"
    failing = Seen(fail=True)
    monkeypatch.setattr(append, "STEPS", [*append.STEPS, failing])
    memory = await Memory.open(memory_config(db))
    try:
        with pytest.raises(RuntimeError, match="the step failed"):
            await memory.append_messages("mcp", [{"id": "a", "role": "user", "content": "hello"}])
        assert await memory.thread("mcp") is None  # neither the thread nor the message
    finally:
        await memory.close()

    transcript = ClaudeTranscript(tmp_path / "s1.jsonl", "s1", PROJECT)
    transcript.turn("a question", "an answer")
    settings, counter, stop = hook_settings(db), TokenCounter.estimating(), hook_event("Stop", transcript.path)
    conn = local.direct.open_database(str(db))
    try:
        with pytest.raises(RuntimeError):
            ingest(conn, settings, counter, stop, PROJECT, PROJECT)
        assert local.read(conn, Transaction.get_thread, "s1") is None
        assert local.read(conn, Transaction.ingest_state, source_of(stop)).offset == 0  # the read is not saved
        monkeypatch.setattr(append, "STEPS", [s for s in append.STEPS if s is not failing])
        assert ingest(conn, settings, counter, stop, PROJECT, PROJECT).appended == 2  # nothing lost
    finally:
        conn.close()


def row(message_id: str, text: str) -> NewMessage:
    return NewMessage(message_id, "user", [{"type": "text", "text": text}], "2026-01-01T00:00:00+00:00", {}, text, 3)


def batch(rows: list[NewMessage], **options: Any) -> append.Batch:
    return append.Batch("t", "r", record_key("thread", "t", "r"), rows, **options)


@pytest.mark.anyio
async def test_a_clash_refuses_the_batch_or_with_keep_going_only_that_message(store_location) -> None:
    """The same pipeline awaited on either backend (`Store.transaction`)."""
    store = await open_store(store_location)
    try:
        await store.transaction(append.record, batch([row("a", "first")]))
        with pytest.raises(StoreError, match="'a'"):
            await store.transaction(append.record, batch([row("b", "new"), row("a", "other")]))
        assert [m.id for m in await store.message_page("t")] == ["a"]  # nothing of the batch
        done = await store.transaction(append.record, batch([row("b", "new"), row("a", "other")], keep_going=True))
        assert [m.id for m in done.appended] == ["b"] and len(done.refused) == 1 and "'a'" in done.refused[0]
        assert [(m.id, m.parts[0]["text"]) for m in await store.message_page("t")] == [("a", "first"), ("b", "new")]
        assert done.state is not None and done.state.thread_pending_messages == 2
    finally:
        await store.close()


def test_the_pipeline_runs_synchronously_on_the_file(tmp_path: Path) -> None:
    """The same pipeline, with no event loop: SQLite's driver completes each operation at once."""
    conn = local.direct.open_database(str(tmp_path / "memory.db"))
    try:
        done = local.write(conn, append.record, batch([row("a", f"token {GITHUB}")], ends_session=True))
        assert [m.id for m in done.appended] == ["a"] and done.thread_created
        thread = local.read(conn, Transaction.get_thread, "t")
        assert thread is not None and thread.metadata["ended_at"]
        empty = local.write(conn, append.record, batch([]))  # nothing to store: the record's state still
        assert empty.appended == [] and empty.state is not None and empty.state.thread_pending_messages == 1
        assert local.write(conn, append.record, append.Batch("new", "r", "thread:new", [])).state is None
        assert local.read(conn, Transaction.get_thread, "new") is None  # no rows, no thread
    finally:
        conn.close()


@pytest.mark.anyio
async def test_an_imported_export_reports_the_secrets_it_kept_out(tmp_path: Path) -> None:
    """The import's batches take the append's steps: here the redaction event."""
    old = await Memory.open(memory_config(tmp_path / "old.db", privacy={"enabled": False}))  # before redaction
    export = io.StringIO()
    try:
        await old.append_messages("t", [{"id": "a", "role": "user", "content": f"my token {GITHUB}"}])
        await old.export_to(export)
    finally:
        await old.close()
    assert GITHUB in export.getvalue()
    memory = await Memory.open(memory_config(tmp_path / "new.db"))
    try:
        await memory.import_from(io.BytesIO(export.getvalue().encode()))
        events = await memory.store.events(thread_id="t")
        assert [(e.type, e.payload["redactions"]) for e in events] == [("data-om-redaction", {"github-token": 1})]
        assert GITHUB not in json.dumps([m.parts for m in await memory.store.message_page("t")])
    finally:
        await memory.close()


@pytest.mark.parametrize("says_so", [True, False])
def test_a_step_that_changes_the_record_has_the_state_read_after_it(tmp_path: Path, monkeypatch, says_so) -> None:
    """What decides the due work sees the record as the step left it, when the step says it changed it."""

    async def recount(store: Transaction, stored: append.Stored) -> list[dict[str, Any]]:
        (message,) = stored.messages
        await store.set_token_counts(0, [(message.seq, 300, [300])])  # the record's pending tokens move
        stored.record_changed = says_so
        return []

    monkeypatch.setattr(append, "STEPS", [*append.STEPS, recount])
    conn = local.direct.open_database(str(tmp_path / "memory.db"))
    try:
        done = local.write(conn, append.record, batch([row("a", "some words")]))
        assert done.state is not None and done.state.thread_pending_tokens == (300 if says_so else 3)
        assert local.read(conn, Transaction.record_state, "thread:t", "t").thread_pending_tokens == 300
    finally:
        conn.close()
