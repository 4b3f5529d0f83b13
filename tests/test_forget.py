"""Forget one thing, correct one line, undo a reflection: on both backends, through the engine
and the MCP tools; what is forgotten leaves the storage (the SQLite file and its WAL, byte for
byte; every table on PostgreSQL) and does not come back through a reflection, a buffered
reflection computed before the forget, or a restore.

The scripted Observer writes one line per marker word it reads, *reversed* ("heard
tevlevakkouq"), so an observation's words are not its message's: forgetting the line must
remove the reversed word while the message keeps the original. The copying Observer of the
--match tests writes the word itself into everything it can (lines, task, hints, extracted
values, events), as the deletion tests do."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from support.backends import location, on_postgres
from support.engine import config, memory_log_of, role_of, text_of
from support.files import raw_bytes
from support.mcp import connect, fail, ok, read_json

from om_mcp.engine import Memory
from om_mcp.engine.errors import InputError, NotFound
from om_mcp.engine.observation import activation, lines
from om_mcp.server import build_server
from om_mcp.testing import ScriptedModel

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("store_location")]

SECTION = re.compile(r'<thread id="([^"]+)">\n(.*?)\n</thread>', re.S)
WORDS = re.compile(r"\b([a-z]+(?:velvet|amber|copper|garnet|indigo))\b")
A, B, C, D = "quokkavelvet", "marmosetamber", "narwhalcopper", "ocelotgarnet"
SECRET = "pangolinindigo"


def reverse(word: str) -> str:
    return word[::-1]


def marker_words(text: str) -> list[str]:
    return list(dict.fromkeys(WORDS.findall(text)))


def script(copy_everywhere: bool = False, during_reflection: Any = None) -> ScriptedModel:
    """Observer: a line per marker word (reversed, or as it is with `copy_everywhere`, which
    also fills the task, the response and an extracted value). Reflector: a line per word of the
    log; `during_reflection` is awaited before it answers (a change racing the model call)."""

    async def reply(messages: list[dict], target: Any) -> str:
        if role_of(messages) == "reflector":
            if during_reflection is not None:
                await during_reflection()
            found = re.findall(r"heard (\w+)", memory_log_of(messages))
            body = "\n".join(f"* 🔴 (10:00) heard {w}" for w in dict.fromkeys(found)) or "* 🟢 (10:00) nothing"
            return f"<observations>\nDate: Mar 2, 2026\n{body}\n</observations>"

        def notes(text: str) -> str:
            seen = marker_words(text)
            written = seen if copy_everywhere else [reverse(w) for w in seen]
            return "\n".join(f"* 🔴 (10:00) heard {w}" for w in written) or "* 🟢 (10:00) small talk"

        body = text_of(messages[-1])
        seen = " ".join(marker_words(body))
        sections = SECTION.findall(body)  # resource scope: one section per thread
        if sections:
            log = "\n".join(
                f'<thread id="{label}">\nDate: Mar 2, 2026\n{notes(text)}\n'
                + (
                    f"<current-task>follow up on {' '.join(marker_words(text))}</current-task>\n"
                    if copy_everywhere
                    else ""
                )
                + "</thread>"
                for label, text in sections
            )
        else:
            log = f"Date: Mar 2, 2026\n{notes(body)}"
        extra = ""
        if copy_everywhere:
            extra = (
                f"<current-task>follow up on {seen}</current-task>\n"
                f"<suggested-response>mention {seen}</suggested-response>\n<secret>{seen}</secret>"
            )
        return f"<observations>\n{log}\n</observations>\n{extra}"

    return ScriptedModel(reply)


async def open_memory(
    tmp_path: Path, model: ScriptedModel, *, extractor: bool = False, buffering: bool = False, **options: Any
) -> Memory:
    """A memory on the test's backend: a file on SQLite (its bytes are checked), else PostgreSQL."""
    options.setdefault("observation__message_tokens", 100_000)
    if extractor:  # an extracted value, copied to thread metadata too
        options["observation__extract"] = json.dumps([{"name": "secret", "metadata_key_path": "facts.secret"}])
    where = location() if on_postgres() else str(tmp_path / "om.db")
    return await Memory.open(config(buffering=buffering, **options), db_path=where, client=model)


async def leftovers(memory: Memory, word: str) -> int:
    """How often the word is still stored: in the SQLite file and -wal, or in any PostgreSQL table."""
    stem = word[:10].lower()  # an index may keep a stem
    if memory.store.backend == "sqlite":
        return raw_bytes(Path(memory.store.location)).lower().count(stem.encode())
    import asyncpg

    conn = await asyncpg.connect(memory.store.db.url)  # type: ignore[attr-defined]
    try:
        tables = [r[0] for r in await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'om'")]
        total = 0
        for table in tables:
            total += await conn.fetchval(f"SELECT count(*) FROM om.{table} t WHERE lower(t::text) LIKE $1", f"%{stem}%")
        return total
    finally:
        await conn.close()


async def talk(memory: Memory, thread: str, *words: str, resource: str | None = None) -> None:
    turns = [{"role": "user", "content": f"remember {w}, it matters"} for w in words]
    turns.append({"role": "assistant", "content": "noted"})
    await memory.append_messages(thread, turns, resource)


def line_of(log: dict[str, Any], word: str) -> str:
    return next(line["id"] for g in log["groups"] for line in g["lines"] if line["id"] and word in line["text"])


# --------------------------------------------------------------------------------------
# One message
# --------------------------------------------------------------------------------------


async def test_a_forgotten_message_leaves_messages_search_vectors_and_storage(tmp_path):
    memory = await open_memory(tmp_path, script())
    try:
        await talk(memory, "t", A)
        await talk(memory, "t", B)
        page = await memory.messages("t")
        gone = next(m for m in page if A in json.dumps(m.parts))
        assert await leftovers(memory, A) > 0
        done = await memory.control.forget_message("t", gone.id)
        assert (done.done, done.messages) == (True, 1)
        assert [m.id for m in await memory.messages("t")] == [m.id for m in page if m.id != gone.id]
        assert (await memory.thread("t")).message_count == len(page) - 1
        assert not await memory.search("t", A) and await memory.search("t", B)
        assert await leftovers(memory, A) == 0
        assert await leftovers(memory, B) > 0
        events = [e.payload for e in await memory.store.events(thread_id="t") if e.type == "data-om-forget"]
        assert events == [
            {"type": "data-om-forget", "thread_id": "t", "resource_id": "default", "selector": "message", "messages": 1}
        ]
        with pytest.raises(NotFound, match="unknown message 'no-such-id' in thread 't'"):
            await memory.control.forget_message("t", "no-such-id")
    finally:
        await memory.close()


# --------------------------------------------------------------------------------------
# One observation: a line, a group, with its sources
# --------------------------------------------------------------------------------------


async def test_a_forgotten_line_leaves_the_log_every_generation_and_storage(tmp_path):
    memory = await open_memory(tmp_path, script())
    try:
        await talk(memory, "t", A, B)
        assert (await memory.observe("t")).ran
        log = await memory.observations("t")
        gone = line_of(log, reverse(A))
        assert gone.startswith(log["groups"][0]["id"] + ".") and lines.LINE_ID.match(gone)
        preview = await memory.control.forget_observation(gone, "t", apply=False)
        assert (preview.done, preview.lines, preview.messages) == (False, 1, 0)
        assert await leftovers(memory, reverse(A)) > 0  # a preview changes nothing
        done = await memory.control.forget_observation(gone, "t")
        assert (done.done, done.lines) == (True, 1)
        text = (await memory.observations("t"))["text"]
        assert reverse(A) not in text and reverse(B) in text
        assert await leftovers(memory, reverse(A)) == 0
        assert await leftovers(memory, A) > 0  # its message stays: only the observation was forgotten
        # the same line id again is unknown now
        with pytest.raises(NotFound, match=re.escape(f"unknown observation {gone!r}")):
            await memory.control.forget_observation(gone, "t")
    finally:
        await memory.close()


async def test_a_group_with_its_sources_goes_with_the_messages_it_came_from(tmp_path):
    memory = await open_memory(tmp_path, script())
    try:
        await talk(memory, "t", A)
        assert (await memory.observe("t")).ran
        await talk(memory, "t", B)
        assert (await memory.observe("t")).ran
        first = (await memory.observations("t"))["groups"][0]
        done = await memory.control.forget_observation(first["id"], "t", with_sources=True)
        assert (done.groups, done.messages) == (1, 2)
        log = await memory.observations("t")
        assert [g["id"] for g in log["groups"]] != [first["id"]] and reverse(A) not in log["text"]
        for word in (A, reverse(A)):
            assert await leftovers(memory, word) == 0, word
        assert await leftovers(memory, B) > 0 and await leftovers(memory, reverse(B)) > 0
    finally:
        await memory.close()


async def test_a_forgotten_line_does_not_come_back_through_a_reflection_or_a_restore(tmp_path):
    memory = await open_memory(tmp_path, script())
    try:
        await talk(memory, "t", A, B)
        assert (await memory.observe("t")).ran
        assert (await memory.reflect("t")).ran  # generation 1 holds the same lines as generation 0
        log = await memory.observations("t")
        assert log["generation"] == 1 and reverse(A) in log["text"]
        done = await memory.control.forget_observation(line_of(log, reverse(A)), "t")
        assert (done.lines, done.earlier_lines) == (1, 1)  # and its copy in generation 0
        history = await memory.observations("t", history=True)
        assert all(reverse(A) not in g["text"] for g in history["generations"])
        assert (await memory.reflect("t")).ran  # the Reflector reads the active log
        assert reverse(A) not in (await memory.observations("t"))["text"]
        await memory.control.restore_generation("t", 0)
        assert reverse(A) not in (await memory.observations("t"))["text"]
        assert await leftovers(memory, reverse(A)) == 0
    finally:
        await memory.close()


async def test_a_reflection_running_when_a_line_is_forgotten_cannot_bring_it_back(tmp_path):
    memory: Memory | None = None
    target: dict[str, str] = {}

    async def forget_meanwhile() -> None:
        if target.get("line"):
            await memory.control.forget_observation(target.pop("line"), "t")  # type: ignore[union-attr]

    memory = await open_memory(tmp_path, script(during_reflection=forget_meanwhile))
    try:
        await talk(memory, "t", A, B)
        assert (await memory.observe("t")).ran
        target["line"] = line_of(await memory.observations("t"), reverse(A))
        outcome = await memory.reflect("t")  # read the log with the line, and answered with it
        # a lost race is a skip that says why, not a failure (issue 37: status tells the truth)
        assert not outcome.ran and outcome.error is None
        assert "skipped: the memory changed meanwhile" in (outcome.reason or "")
        log = await memory.observations("t")
        assert log["generation"] == 0 and reverse(A) not in log["text"]
        assert (await memory.reflect("t")).ran and reverse(A) not in (await memory.observations("t"))["text"]
    finally:
        await memory.close()


async def test_a_buffered_reflection_made_before_the_forget_is_never_swapped_in(tmp_path):
    memory = await open_memory(tmp_path, script())
    try:
        engine = memory.observation
        await talk(memory, "t", A, B)
        assert (await memory.observe("t")).ran
        key = memory.record_key("t", "default")
        assert (await engine.reflect("t", "default", "async-buffer")).ran
        stale = await memory.store.snapshot(key, "t")  # read before the forget, with its buffered rewrite
        assert stale.buffered_reflection is not None and reverse(A) in stale.buffered_reflection.text
        await memory.control.forget_observation(line_of(await memory.observations("t"), reverse(A)), "t")
        assert (await memory.store.snapshot(key, "t")).buffered_reflection is None
        assert not await activation.activate_reflection(engine.deps, stale, "t", "threshold")
        log = await memory.observations("t")
        assert log["generation"] == 0 and reverse(A) not in log["text"]
        assert await leftovers(memory, reverse(A)) == 0
    finally:
        await memory.close()


# --------------------------------------------------------------------------------------
# Everything holding a phrase
# --------------------------------------------------------------------------------------


@pytest.mark.slow
async def test_forgetting_a_phrase_removes_it_from_everything_derived(tmp_path):
    memory = await open_memory(tmp_path, script(copy_everywhere=True), extractor=True, scope="resource")
    try:
        await talk(memory, "a", SECRET, C, resource="r")
        await talk(memory, "b", D, resource="r")
        await memory.update_thread("a", title=f"about {SECRET}")
        await memory.update_working_memory("a", f"# Notes\n- the code is {SECRET}\n- likes {C}", "r")
        assert (await memory.observe("a", "r")).ran
        assert (await memory.reflect("a", "r")).ran
        await talk(memory, "a", f"{SECRET} again", resource="r")  # unobserved, and buffered below
        assert await leftovers(memory, SECRET) > 0
        preview = await memory.control.forget_match(SECRET.upper(), "r", apply=False)  # case does not matter
        assert not preview.done and preview.messages == 2 and preview.lines >= 1
        assert {i.get("thread_id") for i in preview.items if "message_id" in i} == {"a"}
        done = await memory.control.forget_match(SECRET, "r", thread_id="a")
        assert done.done and done.messages == 2 and done.derived > 0
        assert await leftovers(memory, SECRET) == 0
        for kept in (C, D):
            assert await leftovers(memory, kept) > 0, kept
        assert "likes" in (await memory.get_working_memory("a", "r")).memory
        with pytest.raises(NotFound, match=f"nothing stored holds '{SECRET}' in resource 'r'"):
            await memory.control.forget_match(SECRET, "r")
        events = [e.payload for e in await memory.store.events(thread_id="a") if e.type == "data-om-forget"]
        assert len(events) == 1 and events[0]["selector"] == "match" and SECRET not in json.dumps(events)
    finally:
        await memory.close()


async def test_forgetting_a_phrase_drops_buffered_work_that_holds_it(tmp_path):
    memory = await open_memory(tmp_path, script(copy_everywhere=True), buffering=True)
    try:
        engine, key = memory.observation, memory.record_key("t", "default")
        await talk(memory, "t", SECRET)
        await talk(memory, "t", C)
        assert (await engine.buffer("t", "default", on_idle=True)).ran
        (chunk,) = await memory.store.chunks(key)
        assert SECRET in chunk.text and SECRET in json.dumps(chunk.hints)
        done = await memory.control.forget_match(SECRET)
        assert done.messages == 1 and done.earlier_lines == 1
        assert await memory.store.chunks(key) == []  # its messages are buffered again
        assert await leftovers(memory, SECRET) == 0 and await leftovers(memory, C) > 0
        assert (await engine.buffer("t", "default", on_idle=True)).ran
        (again,) = await memory.store.chunks(key)
        assert C in again.text and SECRET not in again.text
    finally:
        await memory.close()


# --------------------------------------------------------------------------------------
# Correct one line; undo a reflection
# --------------------------------------------------------------------------------------


async def test_a_corrected_line_is_marked_and_kept_through_every_reflection(tmp_path):
    forgetful = ScriptedModel(["<observations>\nDate: Mar 2, 2026\n* 🟢 (10:00) nothing much\n</observations>"])
    memory = await open_memory(tmp_path, script())
    try:
        await talk(memory, "t", A, B)
        assert (await memory.observe("t")).ran
        old = line_of(await memory.observations("t"), reverse(A))
        edited = await memory.control.edit_observation(old, "User lives in Lisbon")
        assert edited.text == "* 🔴 (10:00) User lives in Lisbon [user-stated]" and edited.id != old
        log = await memory.observations("t")
        assert line_of(log, "Lisbon") == edited.id and reverse(A) not in log["text"]
        with pytest.raises(InputError, match="not in the active log"):  # generation 0 and the pile hold it
            await memory.control.edit_observation(old, "again")
        with pytest.raises(NotFound, match="unknown observation"):
            await memory.control.edit_observation(old.split(".")[0] + ".abcdef", "again")
        with pytest.raises(InputError, match="one line"):
            await memory.control.edit_observation(edited.id, "two\nlines")
        # A Reflector that drops it: the line is put back, word for word.
        memory.observation.reflector.router.client = forgetful
        assert (await memory.reflect("t")).ran
        assert edited.text in (await memory.observations("t"))["text"]
        (call,) = forgetful.calls
        assert "[user-stated] is a correction the user made" in call.messages[0]["content"]
        events = [e.type for e in await memory.store.events(thread_id="t")]
        assert "data-om-edit" in events
    finally:
        await memory.close()


async def test_a_restore_round_trip(tmp_path):
    memory = await open_memory(tmp_path, script())
    try:
        await talk(memory, "t", A, B)
        assert (await memory.observe("t")).ran
        await talk(memory, "t", C)
        assert (await memory.observe("t")).ran
        first = (await memory.observations("t"))["text"]
        assert (await memory.reflect("t")).ran
        reflected = await memory.observations("t")
        restored = await memory.control.restore_generation("t", 0)
        assert (restored.restored, restored.generation, restored.groups) == (0, 2, 2)
        again = await memory.observations("t")
        assert again["generation"] == 2 and _lines(again) == _lines_of_text(first)
        back = await memory.control.restore_generation("t", 1)  # undo the undo
        assert back.generation == 3 and _lines(await memory.observations("t")) == _lines(reflected)
        history = await memory.observations("t", history=True)
        assert [g["generation"] for g in history["generations"]] == [3, 2, 1, 0]  # nothing deleted
        with pytest.raises(NotFound, match=r"unknown generation 9 of thread:t \(it has 0, 1, 2, 3\)"):
            await memory.control.restore_generation("t", 9)
        with pytest.raises(InputError, match="generation 3 is already the active log"):
            await memory.control.restore_generation("t", 3)
        restores = [e.payload for e in await memory.store.events(thread_id="t") if e.type == "data-om-restore"]
        assert [(e["restored_generation"], e["generation_count"]) for e in restores] == [(0, 2), (1, 3)]
    finally:
        await memory.close()


def _lines(log: dict[str, Any]) -> list[str]:
    return [line["text"] for g in log["groups"] for line in g["lines"] if line["id"]]


def _lines_of_text(text: str) -> list[str]:
    return [t for t in text.splitlines() if t.startswith("* ")]


# --------------------------------------------------------------------------------------
# The MCP surface
# --------------------------------------------------------------------------------------


async def test_the_tools_forget_by_each_selector_and_correct_a_line(tmp_path):
    memory = await open_memory(tmp_path, script())
    try:
        async with connect(build_server(memory.config, memory)) as client:
            await talk(memory, "t", A, B, C)
            assert (await ok(client, "observe", thread_id="t"))["ran"]
            log = await read_json(client, "om://threads/t/observations")
            line = line_of(log, reverse(A))
            assert await ok(client, "delete_thread", thread_id="t", observation_id=line) == {"done": True, "lines": 1}
            fixed = await ok(
                client, "update_thread", thread_id="t", observation_id=line_of(log, reverse(B)), text="User is a vet"
            )
            assert fixed["corrected"]["text"].endswith("User is a vet [user-stated]")
            await talk(memory, "t", D)
            message = next(m for m in await memory.messages("t") if D in json.dumps(m.parts))
            assert await ok(client, "delete_thread", thread_id="t", message_id=message.id) == {
                "done": True,
                "messages": 1,
            }
            preview = await ok(client, "delete_thread", thread_id="t", match=C)
            assert preview["done"] is False and preview["messages"] == 1 and preview["items"]
            assert await leftovers(memory, C) > 0
            done = await ok(client, "delete_thread", thread_id="t", match=C, confirm=True)
            assert done["done"] and done["messages"] == 1
            for word in (reverse(A), D, C):
                assert await leftovers(memory, word) == 0, word
            # A correction is not a forget: the line as it was stays in the log's history (as_of shows it).
            assert await leftovers(memory, reverse(B)) > 0
            assert "unknown message 'nope'" in await fail(client, "delete_thread", thread_id="t", message_id="nope")
            assert "unknown observation '0123456789abcdef.abcdef'" in await fail(
                client, "delete_thread", thread_id="t", observation_id="0123456789abcdef.abcdef"
            )
            assert "give a line id" in await fail(client, "delete_thread", thread_id="t", observation_id="x")
            assert "nothing stored holds" in await fail(
                client, "delete_thread", thread_id="t", match="nothing-like-this"
            )
            assert "give one of" in await fail(client, "delete_thread", thread_id="t", match="abc", message_id="x")
            assert (await memory.thread("t")) is not None  # none of the refusals touched the thread
    finally:
        await memory.close()
