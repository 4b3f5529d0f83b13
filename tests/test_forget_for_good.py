"""Forget is permanent and honest, tried as a user (and an attacker) would: through the real hook,
`om-mcp ingest`, `om-mcp import`, `om-mcp forget`, the MCP tools; the bytes of the SQLite file and
its -wal are what is checked.

- what is forgotten does not come back: a session recorded by the hook, a message forgotten, then
  the same transcript ingested again, the hook reading it rewritten, a resumed copy of it under new
  ids, an export made before the forget imported, the client re-sending it: none of it is stored
  (tombstones), and the status counts what they refused;
- `forget --match` finds the phrase in every stored field: message metadata, a file part's data,
  tool arguments at any depth, a title; in NFD as in NFC, in any case; and scrubs the model-health
  excerpt quoting it;
- with a reader holding an older snapshot (an export piped into a slow consumer), the command says
  the erase is not complete and exits 5, the status shows it pending, and `forget --finish` ends it.
"""

from __future__ import annotations

import base64
import json
import sqlite3
import subprocess
import unicodedata
from pathlib import Path

import pytest
from support.files import raw_bytes
from support.hooks import Box
from support.mcp import connect, ok
from support.processes import PYTHON

from om_mcp.config import Config
from om_mcp.engine import Memory, NotFound
from om_mcp.server import build_server
from om_mcp.store import ModelHealth
from om_mcp.testing.transcripts import ClaudeTranscript

pytestmark = pytest.mark.slow

GONE, KEPT = "quokkavelvet", "marmosetamber"


def om(box: Box, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([PYTHON, "-m", "om_mcp", *args], capture_output=True, text=True, env=box.env, timeout=120)


def found(db: Path, word: str) -> int:
    return raw_bytes(db).lower().count(word[:10].encode())


def test_a_forgotten_message_does_not_come_back_through_ingest_the_hook_an_import_or_a_resend(tmp_path):
    """The reproduction a new user would do, and every other way in."""
    box = Box(tmp_path)
    transcript = ClaudeTranscript(tmp_path / "s1.jsonl", "s1", str(box.project / "src"))
    transcript.turn(f"my old address is 12 {GONE} road", "noted")
    transcript.turn(f"and I like {KEPT}", "noted too")
    assert box.hook(box.event("Stop", transcript.path, "s1"), "--no-worker").returncode == 0
    assert found(box.db, GONE) > 0
    earlier = tmp_path / "before.jsonl"
    assert om(box, "export", "-o", str(earlier)).returncode == 0

    forgot = om(box, "forget", "--match", GONE, "--yes", "--json")
    assert forgot.returncode == 0, forgot.stderr
    assert json.loads(forgot.stdout)["messages"] == 1 and found(box.db, GONE) == 0

    # `om-mcp ingest` of the same transcript (docs/hosts.md says: as often as you like)
    again = om(box, "ingest", str(transcript.path), "--json", "--no-worker")
    assert again.returncode == 0, again.stderr
    summary = json.loads(again.stdout)
    assert (summary["appended"], summary["forgotten"]) == (0, 1)
    assert found(box.db, GONE) == 0
    # the hook reading a rewritten transcript from the top (same entries, one turn more)
    lines = transcript.path.read_text().splitlines(keepends=True)
    transcript.path.write_text("".join(lines[:-1]))  # shorter: the hook starts again from the top
    assert box.hook(box.event("Stop", transcript.path, "s1"), "--no-worker").returncode == 0
    transcript.path.write_text("".join(lines))
    transcript.turn("what else?", "nothing else")
    assert box.hook(box.event("Stop", transcript.path, "s1"), "--no-worker").returncode == 0
    assert box.query("SELECT COUNT(*) FROM messages WHERE body LIKE '%what else%'") == [(1,)]
    assert found(box.db, GONE) == 0
    # a resumed session: the same words under new ids in another thread of the project
    resumed = ClaudeTranscript(tmp_path / "s2.jsonl", "s2", str(box.project / "src"))
    resumed.turn(f"My old address is 12 {GONE.upper()} road", "noted")
    assert box.hook(box.event("Stop", resumed.path, "s2"), "--no-worker").returncode == 0
    assert found(box.db, GONE) == 0
    assert box.query("SELECT COUNT(*) FROM messages WHERE thread_id = 's2'") == [(1,)]  # the reply only
    # an export made before the forget
    imported = om(box, "import", str(earlier), "--json")
    assert imported.returncode == 0, imported.stderr
    assert json.loads(imported.stdout)["skipped"].get("forgotten message") == 1
    assert found(box.db, GONE) == 0 and found(box.db, KEPT) > 0

    status = json.loads(om(box, "status", "--json").stdout)["forgotten"]
    assert status["refused"] == 4 and status["tombstones"]["message"] == 1 and status["erase_pending_since"] is None
    # what a tombstone keeps is a keyed hash: neither the text nor the id is in it
    tombstones = box.query("SELECT digest, kind FROM om_tombstones")
    assert all(len(d) == 64 and GONE not in d for d, _ in tombstones)
    assert box.query("SELECT COUNT(*) FROM om_tombstone_key") == [(1,)]


@pytest.mark.anyio
async def test_the_tools_refuse_a_forgotten_message_and_a_deleted_thread_stays_deleted(tmp_path):
    db = tmp_path / "om.db"
    made = Config.model_validate({"db_path": str(db), "observational_memory": {"enabled": False}})
    async with await Memory.open(made) as memory:
        async with connect(build_server(memory.config, memory)) as client:
            said = [
                {"id": "m1", "role": "user", "content": f"the door code is {GONE}"},
                {"id": "m2", "role": "assistant", "content": "noted"},
            ]
            await ok(client, "append_messages", thread_id="t", messages=said)
            assert await ok(client, "delete_thread", thread_id="t", message_id="m1") == {"done": True, "messages": 1}
            # a client re-sending the conversation, with its ids or without
            again = await ok(client, "append_messages", thread_id="t", messages=said)
            assert again == {"stored": 0, "skipped": 1, "forgotten": 1}
            bare = [{"role": m["role"], "content": m["content"]} for m in said]
            assert (await ok(client, "append_messages", thread_id="t", messages=bare[:1]))["forgotten"] == 1
            status = await ok(client, "get_context", thread_id="t", include_status=True)
            assert status["status"]["forgotten"] == {"refused": 2}
            # a deleted thread: its messages are refused, an import of it too
            await ok(client, "append_messages", thread_id="u", messages=[{"id": "x", "role": "user", "content": KEPT}])
            export = tmp_path / "before.jsonl"
            with export.open("w") as out:
                await memory.export_to(out)
            assert await ok(client, "delete_thread", thread_id="u") == {"deleted_messages": 1}
            with export.open("rb") as source:
                result = await memory.import_from(source)
            assert result.skipped["forgotten thread"] == 1 and result.added["message"] == 0
            assert await memory.thread("u") is None
            # a new message in a thread of the same id is a new message: stored
            new = await ok(client, "append_messages", thread_id="u", messages=[{"role": "user", "content": "hello"}])
            assert new == {"stored": 1}
    assert found(db, GONE) == 0 and found(db, KEPT) == 0


@pytest.mark.anyio
async def test_match_finds_the_phrase_in_every_stored_field_whatever_its_spelling(tmp_path):
    db = tmp_path / "om.db"
    made = Config.model_validate({"db_path": str(db), "observational_memory": {"enabled": False}})
    nfc = unicodedata.normalize("NFC", "Zoë Ångström")
    nfd = unicodedata.normalize("NFD", nfc)
    assert nfc != nfd
    document = base64.b64encode(f"notes: {GONE} lives here".encode()).decode()
    async with await Memory.open(made) as memory:
        await memory.append_messages(
            "t",
            [
                {"id": "meta", "role": "user", "content": "see attached", "metadata": {"source": {"from": GONE}}},
                {
                    "id": "file",
                    "role": "user",
                    "content": [{"type": "file", "mime_type": "text/plain", "name": "a.txt", "data": document}],
                },
                {
                    "id": "tool",
                    "role": "assistant",
                    "content": [
                        {"type": "tool-call", "tool_name": "fetch", "tool_call_id": "c1", "args": {"q": [{"x": GONE}]}}
                    ],
                },
                {"id": "accent", "role": "user", "content": f"write to {nfd}"},
                {"id": "kept", "role": "user", "content": f"and {KEPT}"},
            ],
        )
        await memory.update_thread("t", title=f"about {GONE.upper()}")
        await memory.store.put_model_health(
            ModelHealth(
                model="m",
                state="backoff",
                failures=1,
                next_attempt_at=0.0,
                last_error=f"answered with nothing usable 1 time in a row; last: 'the user said {GONE}'",
            )
        )
        preview = await memory.control.forget_match(GONE, apply=False)
        assert preview.messages == 3 and preview.derived == 2  # the title, the model-health excerpt
        done = await memory.control.forget_match(GONE.upper())
        assert (done.messages, done.derived) == (3, 2)
        assert await memory.control.forget_match(nfc.lower()) is not None  # NFC and lower case find the NFD text
        ids = [m.id for m in await memory.messages("t")]
        assert ids == ["kept"]
        health = await memory.store.model_health("m")
        assert health is not None and GONE not in (health.last_error or "")
        assert health.last_error.startswith("answered with nothing usable")
        # the phrase tombstone: a title quoting it again keeps the marker in its place, so nothing holds it
        await memory.update_thread("t", title=f"more {GONE}")
        assert (await memory.thread("t")).title == "more [forgotten]"
        with pytest.raises(NotFound):
            await memory.control.forget_match(GONE)
    assert found(db, GONE) == 0 and found(db, "zoe") == 0 and found(db, KEPT) > 0
    assert nfd.encode() not in raw_bytes(db) and nfc.encode() not in raw_bytes(db)


def test_an_erase_a_reader_holds_up_is_said_plainly_and_finished_later(tmp_path):
    """`om-mcp export | slow`: the export's read snapshot keeps the old pages in the file. The forget
    says the erase is not complete (exit 5), the status shows it pending, and once the reader is done
    `forget --finish` ends it: then the text is not in the file's bytes."""
    box = Box(tmp_path)
    transcript = ClaudeTranscript(tmp_path / "s1.jsonl", "s1", str(box.project / "src"))
    transcript.turn(f"the safe code is {GONE}", "noted")
    transcript.turn(f"and {KEPT}", "noted")
    assert box.hook(box.event("Stop", transcript.path, "s1"), "--no-worker").returncode == 0
    # A reader on an older snapshot: a read transaction held open (what a slow `om-mcp export` is).
    reader = sqlite3.connect(box.db)
    reader.execute("BEGIN")
    assert reader.execute("SELECT COUNT(*) FROM messages").fetchone()[0] > 0
    try:
        forgot = om(box, "forget", "--match", GONE, "--yes")
        assert forgot.returncode == 5, forgot.stderr
        assert "the erase is not complete yet" in forgot.stderr and "om-mcp forget --finish" in forgot.stderr
        assert "erased from the memory" in forgot.stdout
        status = json.loads(om(box, "status", "--json").stdout)["forgotten"]
        assert status["erase_pending_since"] is not None
        shown = om(box, "status")
        assert "ERASE PENDING" in shown.stdout
        still = om(box, "forget", "--finish")
        assert still.returncode == 5  # the reader is still there
    finally:
        reader.rollback()
        reader.close()
    finished = om(box, "forget", "--finish")
    assert finished.returncode == 0, finished.stderr
    assert "out of the database file now" in finished.stdout
    assert found(box.db, GONE) == 0
    assert json.loads(om(box, "status", "--json").stdout)["forgotten"]["erase_pending_since"] is None
    assert om(box, "forget", "--finish").returncode == 0


def test_an_export_piped_into_a_slow_reader_holds_up_the_erase(tmp_path):
    """The same with the real pipe the issue names: `om-mcp export | (read one line; wait)`."""
    box = Box(tmp_path)
    transcript = ClaudeTranscript(tmp_path / "s1.jsonl", "s1", str(box.project / "src"))
    for n in range(400):
        transcript.turn(f"filler turn {n} " + "words " * 100, "ok")
    transcript.turn(f"the safe code is {GONE}", "noted")
    assert box.hook(box.event("Stop", transcript.path, "s1"), "--no-worker").returncode == 0
    export = subprocess.Popen(
        [PYTHON, "-m", "om_mcp", "export"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=box.env
    )
    try:
        assert export.stdout is not None
        assert export.stdout.readline()  # the export is under way, its snapshot open; the pipe fills up
        forgot = om(box, "forget", "--match", GONE, "--yes")
        assert forgot.returncode == 5, forgot.stderr
    finally:
        assert export.stdout is not None
        while export.stdout.read(1 << 16):  # the slow reader catches up: the export ends
            pass
        export.wait(timeout=120)
    assert om(box, "forget", "--finish").returncode == 0
    assert found(box.db, GONE) == 0


def test_the_ascii_that_folding_makes_is_what_the_sql_needle_avoids():
    """PostgreSQL's preselection looks for ASCII runs of the phrase that no other character folds into:
    the set is Python's own Unicode tables, recomputed here."""
    from om_mcp.store.scrub import FOLDED_INTO_ASCII, fold, preselect

    made = set()
    for code in range(0x80, 0x110000):
        if not 0xD800 <= code < 0xE000:
            made.update(c for c in fold(chr(code)) if c.isascii())
    assert made == FOLDED_INTO_ASCII
    assert preselect(fold("Straße 12"), exact=True) == "strasse 12"
    assert preselect(fold("Straße 12"), exact=False) == "e 12"
    assert preselect(fold('say "hi" now'), exact=True, json_column=True) == "say "
    assert preselect(fold("ßßß"), exact=False) is None  # every row in scope is checked instead
