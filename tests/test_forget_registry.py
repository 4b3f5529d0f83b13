"""Forget walks the registry: `forget --match` finds a phrase in every column the registry classifies
as said, counts it in the preview and takes it out, on both backends; what only the working-memory
history holds (a thread's, a resource's, the person layer's) is forgotten, and neither `show --as-of`
nor `get_context(as_of)` shows it after; the retired lines a forgotten line took the place of go with
it; tombstones cover every string-bearing part and every phrase forgotten, so the same text comes back
under no id, thread or session.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from support import registry_rows as rows
from support.engine import Script, config, om_env
from support.files import raw_bytes
from support.mcp import call, connect

from om_mcp.config import load_config
from om_mcp.engine import InputError, Memory, NotFound
from om_mcp.engine.user_layer import USER_RESOURCE
from om_mcp.server import build_server
from om_mcp.store import open_store, registry
from om_mcp.store.phrases import MARKER

pytestmark = pytest.mark.anyio

PHRASE = "plum orchard address"


@pytest.fixture(params=["sqlite", "postgres"])
async def any_store(request, tmp_path):
    location = str(tmp_path / "m.db") if request.param == "sqlite" else request.getfixturevalue("postgres_url")
    store = await open_store(location)
    yield store
    await store.close()


async def test_forget_match_finds_and_takes_the_phrase_out_of_every_said_column(any_store, tmp_path):
    """One row per said column of the registry holding the phrase (written through the store as any
    operation writes), then `forget --match`: the preview counts every one, and afterwards no said
    column of the database holds it; on SQLite, neither do the file's bytes."""
    store = any_store
    planted: list[tuple[registry.SaidColumn, dict[str, Any]]] = []
    tables: dict[str, list[registry.SaidColumn]] = {}
    for column in registry.said_columns():
        tables.setdefault(column.table, []).append(column)
    for n, (table, said) in enumerate(tables.items(), start=1):
        if table == "messages":
            continue  # messages are appended below, as every way in appends them
        values = await rows.row(store, table, n)
        if table == "om_groups":
            values["generation"] = 0
        for column in said:
            values[column.column] = rows.said_value(column.form, f"the user gave the {PHRASE} 12 Elm St")
        await rows.insert(store, table, values)
        key = {k: values[k] for k in registry.TABLES[table].key}
        planted += [(column, key) for column in said]
    from om_mcp.config import Config

    memory = Memory(store, Config.model_validate({"observational_memory": {"scope": "resource"}}))
    await memory.append_messages(
        "t1",
        [
            {"role": "user", "content": f"my {PHRASE} is 12 Elm St"},
            {
                "role": "assistant",
                "content": [{"type": "tool-call", "tool_name": "note", "tool_call_id": "c1", "args": {"q": PHRASE}}],
            },
            {"role": "user", "content": "hello", "metadata": {"about": PHRASE}},
        ],
        resource_id=rows.RESOURCE,
    )
    preview = await memory.control.forget_match(PHRASE.upper(), apply=False)
    # every planted value is counted: a value scrubbed out of its row once each, a row deleted whole once
    derived = {
        (c.table, *key.values(), c.column if c.forget not in ("delete", "drop-chunks") else "")
        for c, key in planted
        if c.forget != "lines"
    }
    assert preview.messages == 3
    assert preview.derived == len(derived), preview
    assert preview.lines + preview.earlier_lines >= 1  # the log's own text (om_groups, om_chunks)
    done = await memory.control.forget_match(PHRASE)
    assert done.done and done.messages == 3
    counts = ("messages", "lines", "earlier_lines", "groups", "derived")
    assert [getattr(done, n) for n in counts] == [getattr(preview, n) for n in counts]  # the preview said it all
    left = []
    for column, key in planted:
        value = await rows.read(store, column.table, column.column, key)
        if value is not None and PHRASE in value.lower():
            left.append(f"{column.table}.{column.column}")
    assert left == []
    assert await memory.messages("t1") == []
    if store.backend == "sqlite":
        await store.close()
        assert PHRASE.encode() not in raw_bytes(tmp_path / "m.db")


async def test_text_only_the_working_memory_history_holds_is_forgotten(tmp_path):
    """A thread's, a resource's and the person layer's working memory each held the phrase, then moved
    on: `forget --match` finds it (not "nothing stored holds"), and no as-of view shows it after."""

    def settings(scope: str):
        env = {**om_env(user__enabled=True, enabled=False), "OM_WORKING_MEMORY__SCOPE": scope}
        return load_config(env=env)

    thread_memory = await Memory.open(settings("thread"), db_path=str(tmp_path / "t.db"))
    resource_memory = await Memory.open(settings("resource"), db_path=str(tmp_path / "r.db"))
    for memory in (thread_memory, resource_memory):
        await memory.append_messages("t", [{"role": "user", "content": "hello"}])
        await memory.update_working_memory("t", f"# Notes\n- {PHRASE}: 12 Elm St")
        await memory.update_working_memory("t", "# Notes\n- moved on")
        await memory.set_user_working_memory(f"- my {PHRASE} is 12 Elm St")
        await memory.set_user_working_memory("- nothing")
        before = await memory.observations_at("t", "2999-01-01")
        assert PHRASE not in json.dumps(before)  # the current value never held it...
        preview = await memory.control.forget_match(PHRASE, apply=False)
        assert preview.derived >= 2  # ...the history did: the thread's (or resource's) and the person layer's
        assert (await memory.control.forget_match(PHRASE)).derived >= 2
        with pytest.raises(NotFound):
            await memory.control.forget_match(PHRASE)  # now nothing holds it
        history = await memory.store.transaction(_history)
        assert history and not [t for t in history if t and PHRASE in t.lower()]
        for day in ("2999-01-01", "2000-01-01"):
            assert PHRASE not in json.dumps(await memory.observations_at("t", day))
            assert PHRASE not in json.dumps((await memory.get_context("t", as_of=day)).model_dump())
        assert USER_RESOURCE in {r.id for r in await memory.store.list_resources()}
        await memory.close()
    for db in ("t.db", "r.db"):
        assert PHRASE.encode() not in raw_bytes(tmp_path / db)


async def _history(t: Any) -> list[str | None]:
    return [r[0] for r in await t.tx.fetch("SELECT text FROM om_working_memory_history")]


def tool_turn(n: int, result: str) -> list[dict[str, Any]]:
    call_part = {
        "type": "tool-call",
        "tool_name": "Bash",
        "tool_call_id": f"call-{n}",
        "args": {"command": "cat notes"},
    }
    return [
        {"id": f"a{n}", "role": "assistant", "content": [call_part]},
        {
            "id": f"r{n}",
            "role": "tool",
            "content": [{"type": "tool-result", "tool_name": "Bash", "tool_call_id": f"call-{n}", "result": result}],
        },
    ]


async def test_forgotten_tool_results_and_calls_come_back_under_no_id_or_thread(tmp_path):
    """A tool result and a tool call forgotten by id stay forgotten when the same session comes back
    under another thread id, or as a resumed copy with new ids (their parts' tombstones); a phrase
    forgotten by --match is refused in a new message that holds it whatever its id or thread, and
    becomes the marker in a title."""
    db = tmp_path / "m.db"
    secret_result = "the vault combination is 31-17-4 behind the painting"
    memory = await Memory.open(config(), db_path=str(db))
    await memory.append_messages("s1", tool_turn(1, secret_result), resource_id="proj")
    await memory.control.forget_message("s1", "r1")
    await memory.control.forget_message("s1", "a1")
    again = await memory.append_messages("s1-copy", tool_turn(1, secret_result), resource_id="proj")
    resumed = await memory.append_messages("s2", tool_turn(7, secret_result), resource_id="proj")  # new ids
    assert (again.forgotten, resumed.forgotten) == (2, 2)
    # a copy that puts the tool call beside new words, and the result beside another result: the parts
    mixed = tool_turn(9, secret_result)
    mixed[0]["content"].insert(0, {"type": "text", "text": "Let me look at the notes first."})
    mixed[1]["content"].append({"type": "tool-result", "tool_name": "Bash", "tool_call_id": "x", "result": "ok"})
    assert (await memory.append_messages("s2", mixed, resource_id="proj")).forgotten == 2
    elsewhere = await memory.append_messages("s3", tool_turn(1, secret_result), resource_id="another")
    assert elsewhere.forgotten == 0  # tombstones are per resource: another project's copy is its own
    await memory.forget_resource("another")

    await memory.append_messages("s4", [{"role": "user", "content": f"my {PHRASE} is 12 Elm St"}], resource_id="proj")
    await memory.control.forget_match(PHRASE, "proj")
    back = await memory.append_messages(
        "s5",
        [{"role": "user", "content": "Again: my Plum-Orchard ADDRESS moved"}, {"role": "user", "content": "hi"}],
        resource_id="proj",
    )
    assert back.forgotten == 1 and back.appended == 1
    await memory.update_thread("s5", title=f"about the {PHRASE}")
    assert (await memory.thread("s5")).title == f"about the {MARKER}"
    await memory.close()
    data = raw_bytes(db)
    assert secret_result.encode() not in data and b"Plum-Orchard" not in data and PHRASE.encode() not in data


# -- a line the Reflector merged --------------------------------------------------------------------

FACTS = {"m0": "User prefers oat milk in coffee", "m1": "User drinks oat milk lattes", "m2": "User keeps a tortoise"}
MERGED = "User takes oat milk (lattes)"


def observer(messages: list[dict]) -> str:
    body = "\n".join(f"* 🔴 (10:0{i}) {fact}" for i, fact in enumerate(FACTS.values()))
    return f"<observations>\nDate: Mar 2, 2026\n{body}\n</observations>"


def merging_reflector(messages: list[dict]) -> str:
    return (
        f"<observations>\nDate: Mar 2, 2026\n* 🔴 (10:01) {MERGED}\n* 🔴 (10:02) User keeps a tortoise\n</observations>"
    )


@pytest.mark.parametrize("with_sources", [False, True])
async def test_forgetting_a_merged_line_forgets_the_lines_it_was_merged_from(tmp_path, with_sources):
    db = tmp_path / "m.db"
    script = Script(observer=observer, reflector=merging_reflector)
    memory = await Memory.open(config(), db_path=str(db), client=script.model)
    await memory.append_messages("t", [{"id": f"m{i}", "role": "user", "content": f"m{i} milk"} for i in range(3)])
    assert (await memory.observe("t")).ran and (await memory.reflect("t")).ran
    log = await memory.observations("t")
    merged = next(line for g in log["groups"] for line in g["lines"] if MERGED in line["text"])
    retired = [g for g in log["retired"] if "oat milk" in json.dumps(g)]
    assert len(retired) == 2 and {g["reason"] for g in retired} == {"merged"}
    sources = [g["lines"][-1]["id"] for g in retired]

    done = await memory.control.forget_observation(merged["id"], with_sources=with_sources)
    assert done.earlier_lines >= 4  # the two retired lines, and their copies in generation 0

    async with connect(build_server(memory.config, memory)) as client:
        found = await call(client, "recall", thread_id="t", mode="search", query="oat milk lattes coffee")
        assert "oat milk" not in found.lower()
    for line_id in sources:
        with pytest.raises(NotFound):
            await memory.control.restore_line(line_id, thread_id="t")
    await memory.control.restore_generation("t", 0)  # the log before the reflection: without them
    assert "oat milk" not in json.dumps(await memory.observations("t", history=True)).lower()
    assert "oat milk" not in json.dumps(await memory.observations("t")).lower()  # the retired pile too
    assert "oat milk" not in json.dumps(await memory.observations_at("t", "2999-01-01")).lower()
    assert "tortoise" in json.dumps(await memory.observations("t"))
    await memory.close()
    assert b"oat milk" not in raw_bytes(db).lower()


# -- a line the user corrected ----------------------------------------------------------------------

CORRECTED = ["User keeps a tortoise named Zed", "User lives at 12 Elm St"]


def observing_two(messages: list[dict]) -> str:
    body = "\n".join(f"* 🔴 (10:0{i}) {fact}" for i, fact in enumerate(CORRECTED))
    return f"<observations>\nDate: Mar 2, 2026\n{body}\n</observations>"


async def _every_view(memory: Memory) -> str:
    """The thread's log as every way to look shows it: its generations, the retired pile, as of any day."""
    views: list[Any] = [await memory.observations("t", history=True), await memory.observations("t")]
    for day in ("2000-01-01", "2026-03-02", "2999-01-01"):
        views += [await memory.observations_at("t", day), (await memory.get_context("t", as_of=day)).model_dump()]
    return json.dumps(views)


@pytest.mark.parametrize("by", ["id", "match"])
async def test_forgetting_a_corrected_line_forgets_what_it_corrected(tmp_path, by):
    """`edit` leaves the old words on the retired pile and in the generation before (the memory as of
    then); forgetting the corrected line, by its id or by a phrase of it, takes them too: no restore of
    any generation or of the old line's id, and no as-of view, brings either back."""
    db = tmp_path / "m.db"
    memory = await Memory.open(config(), db_path=str(db), client=Script(observer=observing_two).model)
    await memory.append_messages("t", [{"id": f"m{i}", "role": "user", "content": f"m{i} moved"} for i in range(2)])
    assert (await memory.observe("t")).ran
    old = next(line for g in (await memory.observations("t"))["groups"] for line in g["lines"] if "Elm" in line["text"])
    new = await memory.control.edit_observation(old["id"], "User lives at 9 Birch Rd")
    assert "Elm St" in await _every_view(memory)  # as of before the correction, and on the retired pile
    if by == "id":
        preview = await memory.control.forget_observation(new.id, apply=False)
        done = await memory.control.forget_observation(new.id)
    else:
        preview = await memory.control.forget_match("9 birch rd", apply=False)
        done = await memory.control.forget_match("9 birch rd")
    assert (done.lines, done.earlier_lines) == (preview.lines, preview.earlier_lines) == (1, 2)
    gone = ("Elm St", "Birch")
    left = [g for g in gone if g in await _every_view(memory)]
    with pytest.raises(NotFound):
        await memory.control.restore_line(old["id"], thread_id="t")
    for generation in range(3):
        try:
            await memory.control.restore_generation("t", generation)
        except (NotFound, InputError):
            continue  # the active one, or one that was never there
        left += [f"{g} after restoring generation {generation}" for g in gone if g in await _every_view(memory)]
    assert "tortoise" in json.dumps(await memory.observations("t"))
    await memory.close()
    assert left == [] and [g for g in gone if g.encode() in raw_bytes(db)] == []
