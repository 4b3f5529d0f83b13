"""One gate for stored text (`om_mcp/store/gate.py`): every write of a column the registry classifies
as said passes the scan and the tombstones, whoever writes it.

The surfaces are enumerated, not listed: the registry's said columns (written directly through
the store's write layer, on both backends), the server's tool list (every argument), and every way
to remember (the tools, the commands, a `<remember>` span on every way a message comes in). After
each, the database file and its -wal are read as bytes.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import pytest
from support import registry_rows as rows
from support.files import raw_bytes
from support.mcp import connect

from om_mcp.config import load_config
from om_mcp.engine import Memory
from om_mcp.server import build_server
from om_mcp.store import Access, GateError, NewMessage, Transaction, open_store, registry
from om_mcp.store.gate import plan
from om_mcp.store.phrases import MARKER
from om_mcp.testing import ScriptedModel
from om_mcp.testing.secrets import ONE_LINE, PLANTS, SECRETS, stored

pytestmark = pytest.mark.anyio

RESOURCE = rows.RESOURCE


# -- reading statements ------------------------------------------------------------------------


def test_the_gate_reads_what_a_statement_writes_into_said_columns():
    assert plan("SELECT title FROM threads WHERE id = $1") is None
    assert plan("UPDATE om_records SET version = version + 1 WHERE key = $1") is None  # no said column
    found = plan(
        "INSERT INTO threads (id, resource_id, title, title_pinned, metadata, created_at, updated_at)"
        " VALUES ($1, $2, $3, $4, $5, $6, $6) ON CONFLICT (id) DO NOTHING"
    )
    assert found is not None and dict((c, p) for p, c in found.said) == {"title": 2, "metadata": 4}
    assert found.owner == (("resource_id", 1),)
    found = plan("UPDATE threads SET title = COALESCE($1, title), metadata = $2 WHERE id = $3")
    assert found is not None and {c for _, c in found.said} == {"title", "metadata"}
    assert found.owner == () and found.lookup == ("id", 2)  # the row's resource is looked up by its key
    found = plan("UPDATE om_cursors SET current_task = $1 WHERE record_key = $2 AND thread_id = $3")
    assert found is not None and found.owner == (("record_key", 1),)


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE threads SET title = $1",  # whose title? no key
        "INSERT INTO threads SELECT * FROM other_threads WHERE title = $1",  # no column list
        "UPDATE threads SET title = $1 WHERE title = $2",  # not a key of the row
        "INSERT INTO om_groups (id, text) VALUES ($1, $2), ($3)",  # values that do not line up
    ],
)
def test_a_statement_the_gate_cannot_read_is_refused(sql):
    with pytest.raises(GateError):
        plan(sql)


# -- every said column of the registry, on both backends ----------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
async def any_store(request, tmp_path):
    location = str(tmp_path / "m.db") if request.param == "sqlite" else request.getfixturevalue("postgres_url")
    store = await open_store(location)
    yield store
    await store.close()


async def test_every_said_column_is_written_through_the_gate(any_store):
    """Each said column of the registry, written by a plain INSERT and a plain UPDATE through the store's
    write layer (as any new operation would write it): the secret does not arrive, and a phrase forgotten in
    the row's resource becomes the marker while the same phrase forgotten elsewhere does not."""
    store = any_store
    said = registry.said_columns()
    assert len(said) >= 20
    secret_text, secret = ONE_LINE[1][1], ONE_LINE[1][2]  # a GitHub token

    async def bury(t: Transaction) -> None:
        from om_mcp.store import tombstones

        await tombstones.bury_phrase(t.tx, "plum orchard address", Access.to([RESOURCE]))
        await tombstones.bury_phrase(t.tx, "kept elsewhere words", Access.to(["another-resource"]))

    await store.transaction(bury)
    failures = []
    for n, column in enumerate(said, start=1):
        entry = registry.TABLES[column.table]
        row = await rows.row(store, column.table, n)
        value = rows.said_value(column.form, f"{secret_text} at my plum orchard address; kept elsewhere words")
        row[column.column] = value
        key = {k: row[k] for k in entry.key}

        async def write(t: Transaction, row=row, key=key, column=column) -> Any:
            where = " AND ".join(f"{k} = ${i + 1}" for i, k in enumerate(key))
            read = f"SELECT {column.column} FROM {column.table} WHERE {where}"
            marks = ", ".join(f"${i}" for i in range(1, len(row) + 1))
            await t.tx.execute(f"DELETE FROM {column.table} WHERE {where}", *key.values())
            await t.tx.execute(f"INSERT INTO {column.table} ({', '.join(row)}) VALUES ({marks})", *row.values())
            inserted = await t.tx.fetchval(read, *key.values())
            moved = " AND ".join(f"{k} = ${i + 2}" for i, k in enumerate(key))
            update = f"UPDATE {column.table} SET {column.column} = $1 WHERE {moved}"
            await t.tx.execute(update, row[column.column], *key.values())
            return inserted, await t.tx.fetchval(read, *key.values())

        for how, got in zip(("INSERT", "UPDATE"), await store.transaction(write)):
            where = f"{column.table}.{column.column} by {how}"
            if secret in got or "hunter2hunter2" in got:
                failures.append(f"{where}: the secret was stored")
            server = entry.owner == "server"  # the phrase was forgotten in one resource: not the server's text
            if ("plum orchard address" in got) != server or MARKER in got == server:
                failures.append(f"{where}: the forgotten phrase {'kept' if not server else 'replaced'}: {got!r}")
            if "kept elsewhere words" not in got:
                failures.append(f"{where}: a phrase forgotten in another resource was replaced: {got!r}")
    assert failures == []


async def test_a_message_row_the_intake_did_not_scan_is_scanned_on_its_way_in(tmp_path):
    store = await open_store(str(tmp_path / "m.db"))
    text = f"hello {PLANTS[1][1]}"
    row = NewMessage("m1", "user", [{"type": "text", "text": text}], "2026-01-01T00:00:00+00:00", {}, text, 3)
    try:
        await store.append_messages("t", RESOURCE, "thread:t", [row])
        stored_row = (await store.message_page("t", limit=1))[0]
        assert PLANTS[1][2] not in json.dumps(stored_row.parts)

        async def skip_the_tombstones(t: Transaction) -> None:
            unchecked = NewMessage(
                "m2", "user", [{"type": "text", "text": "x"}], "2026-01-01T00:00:00+00:00", {}, "x", 1
            )
            await t.tx.insert_messages("t", RESOURCE, 0, [unchecked])

        with pytest.raises(GateError):
            await store.transaction(skip_the_tombstones)
    finally:
        await store.close()
    assert stored(raw_bytes(tmp_path / "m.db"), [PLANTS[1][2]]) == []


# -- every argument of every tool ------------------------------------------------------------------

IDS = {"thread_id", "resource_id", "message_id", "observation_id", "target_thread_id"}  # names the client chooses


def _plant(schema: dict[str, Any], text: str) -> Any:
    kinds = {schema.get("type")} | {s.get("type") for s in schema.get("anyOf", [])}
    if "string" in kinds:
        return text
    if "array" in kinds:
        return [{"role": "user", "content": text}, {"role": "assistant", "content": f"noted: {text}"}]
    if "object" in kinds:
        return {"note": text, "working_memory": text, "title": text.splitlines()[0]}
    return None


async def test_no_argument_of_any_tool_stores_a_secret(tmp_path):
    """Every argument of every tool the server lists (ids aside: names the client chooses), given each
    secret class; the Observer and Reflector (a scripted model) run meanwhile: neither the file nor a
    model request holds a secret."""
    db = tmp_path / "m.db"
    sent: list[str] = []

    def model(messages: list[dict[str, Any]], target: Any) -> str:
        sent.append(json.dumps(messages))
        if "<observations>" in json.dumps(messages) and "reflect" in json.dumps(messages).lower():
            return "<observations>\nDate: Mar 2, 2026\n* 🔴 (10:00) the user works on a garden\n</observations>"
        return "<observations>\nDate: Mar 2, 2026\n* 🔴 (10:00) the user talked about a garden\n</observations>"

    config = load_config(
        env={
            "OM_DB_PATH": str(db),
            "OM_MODEL": "default",
            "OM_OBSERVATIONAL_MEMORY__SCOPE": "thread",
            "OM_OBSERVATIONAL_MEMORY__OBSERVATION__BUFFER_TOKENS": "false",
        }
    )
    memory = await Memory.open(config, client=ScriptedModel(model))
    succeeded: set[tuple[str, str]] = set()
    try:
        async with connect(build_server(memory.config, memory)) as client:
            tools = (await client.list_tools()).tools
            await client.call_tool("append_messages", {"thread_id": "t", "user": "the garden", "assistant": "ok"})

            async def companions(tool: str, name: str) -> dict[str, Any]:
                """What an argument needs beside it to be taken: a line to correct, a message to go with."""
                if name == "text":
                    line = await client.call_tool("update_thread", {"thread_id": "t", "remember": "a garden"})
                    return {"observation_id": json.loads(line.content[0].text)["remembered"]["id"]}
                if name == "thread_metadata":
                    return {"user": "hello"}
                if tool == "observe":  # something to observe, so the instruction reaches the model
                    await client.call_tool("append_messages", {"thread_id": "t", "user": "the garden again"})
                return {}

            for tool in tools:
                properties = tool.input_schema.get("properties", {})
                for name, schema in properties.items():
                    if name in IDS:
                        continue
                    for _, text, _ in PLANTS:
                        value = _plant(schema, text)
                        if value is None:
                            continue
                        arguments = {"thread_id": "t", **await companions(tool.name, name), name: value}
                        result = await client.call_tool(tool.name, arguments)
                        if not result.is_error:
                            succeeded.add((tool.name, name))
    finally:
        await memory.close()
    # the arguments that store or reach a model did run (the rest may refuse a secret where a word is due)
    assert {
        ("append_messages", "user"),
        ("append_messages", "assistant"),
        ("append_messages", "messages"),
        ("append_messages", "thread_metadata"),
        ("update_working_memory", "memory"),
        ("update_thread", "title"),
        ("update_thread", "metadata"),
        ("update_thread", "remember"),
        ("update_thread", "text"),
        ("observe", "instruction"),
        ("reflect", "instruction"),
    } <= succeeded
    assert stored(raw_bytes(db)) == []
    assert sent and [s for s in SECRETS if any(s in request for request in sent)] == []


# -- every way to remember ----------------------------------------------------------------------------


async def test_no_way_to_remember_stores_or_sends_a_secret(tmp_path):
    """`remember` into a thread, a resource and the person layer, the person's working memory, the tool's
    `remember`, and a `<remember>` span in a message: stored without the secret, so the model reading the
    log and every project's `<user-memory>` block never see it."""
    db = tmp_path / "m.db"
    sent: list[str] = []

    def model(messages: list[dict[str, Any]], target: Any) -> str:
        sent.append(json.dumps(messages))
        return "<observations>\nDate: Mar 2, 2026\n* 🔴 (10:00) the user talked about a garden\n</observations>"

    config = load_config(
        env={
            "OM_DB_PATH": str(db),
            "OM_MODEL": "default",
            "OM_OBSERVATIONAL_MEMORY__SCOPE": "resource",
            "OM_OBSERVATIONAL_MEMORY__OBSERVATION__BUFFER_TOKENS": "false",
            "OM_OBSERVATIONAL_MEMORY__USER__ENABLED": "true",
        }
    )
    shown: list[str] = []
    async with await Memory.open(config, client=ScriptedModel(model)) as memory:
        await memory.append_messages("t", [{"role": "user", "content": "hello"}], resource_id=RESOURCE)
        async with connect(build_server(memory.config, memory)) as client:
            for i, (_, text, _) in enumerate(ONE_LINE):
                out = [
                    await memory.remember(text, thread_id="t"),
                    await memory.remember(text, resource_id=RESOURCE),
                    await memory.remember(text, user=True),
                ]
                shown += [o.text for o in out]
                shown.append(await memory.set_user_working_memory(f"- {text}"))
                result = await client.call_tool("update_thread", {"thread_id": "t", "remember": text})
                shown.append(result.content[0].text)
                span = [
                    {"role": "user", "content": f"<remember>{text}</remember>"},
                    {"role": "assistant", "content": "ok"},
                ]
                await memory.append_messages(f"s{i}", span, resource_id=RESOURCE)
        await memory.observe("t")
        await memory.reflect("t")
        context = await memory.get_context("elsewhere", resource_id="another-project")
        shown.append(json.dumps(context.model_dump()))
    assert [s for s in SECRETS if any(s in text for text in shown)] == []  # what the commands answer
    assert sent and [s for s in SECRETS if any(s in request for request in sent)] == []  # what the model gets
    assert stored(raw_bytes(db)) == []
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT COUNT(*) FROM om_groups WHERE text LIKE '%[redacted:%'").fetchone()[0] >= 3 * 10
    conn.close()


def test_the_commands_store_and_send_no_secret(tmp_path, monkeypatch, capsys):
    """`om-mcp remember` (--thread, --resource, --user, --user --working-memory), a `<remember>` span
    through `om-mcp ingest`, and `om-mcp observe --instruction`, each through the command line's own
    entry point (its parser, its configuration from the environment; in this process, so that the test
    costs no interpreter starts): the file holds none of the secrets, nor does anything a command printed
    or any request the model (a fake one on loopback, reached through litellm) received."""
    from support.processes import use_clean_env

    from om_mcp.cli import main
    from om_mcp.testing.fake_server import FakeLLMServer
    from om_mcp.testing.transcripts import ClaudeTranscript

    text = " and ".join(p[1] for p in ONE_LINE[:4])
    secrets = [p[2] for p in ONE_LINE[:4]]
    db = tmp_path / "m.db"
    reply = "<observations>\nDate: Mar 2, 2026\n* 🔴 (10:00) the user talked about a garden\n</observations>"
    with FakeLLMServer(lambda request: reply) as llm:
        use_clean_env(
            monkeypatch,
            tmp_path,
            OM_DB_PATH=str(db),
            OM_MODEL=json.dumps({"model": "openai/fake", "api_base": llm.base_url}),
            OM_OBSERVATIONAL_MEMORY__SCOPE="resource",
            OM_OBSERVATIONAL_MEMORY__USER__ENABLED="true",
            OM_OBSERVATIONAL_MEMORY__OBSERVATION__BUFFER_TOKENS="false",
        )
        transcript = ClaudeTranscript(tmp_path / "s.jsonl", "s", str(tmp_path))
        transcript.turn(f"<remember>{text}</remember>", "noted")
        commands = [["ingest", str(transcript.path), "--no-worker", "--resource", "r"]]
        for where in (["--thread", "s"], ["--resource", "r"], ["--user"], ["--user", "--working-memory"]):
            commands.append(["remember", text, *where])
        commands.append(["observe", "s", "--instruction", text])
        codes = [main(argv) for argv in commands]
        requests = json.dumps(llm.requests)
    printed = capsys.readouterr()
    assert codes == [0] * len(commands), printed.err
    assert [s for s in secrets if s in printed.out or s in printed.err] == []
    assert llm.requests and [s for s in secrets if s in requests] == []
    assert stored(raw_bytes(db), secrets) == []
