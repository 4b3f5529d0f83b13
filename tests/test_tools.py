"""Every tool through an in-process MCP client (`Client(build_server(config))`).

Core cases run in both protocol eras: "auto" lands on 2026-07-28, "legacy" runs the
2025-11-25 initialize handshake. Tools return compact JSON or plain text; recall's text
is parsed here the way a model reads it (headers, part lines, the continuation hint).
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from support.backends import on_postgres, postgres_text
from support.engine import role_of, text_of
from support.mcp import call, connect, fail, ok, read_json

from om_mcp.config.working_memory import DEFAULT_TEMPLATE
from om_mcp.engine import Memory
from om_mcp.engine.tokens import get_token_counter
from om_mcp.server import build_server
from om_mcp.testing import ScriptedModel

# On SQLite: what the engine relies on of each backend is tests/test_store_conformance.py's.
pytestmark = pytest.mark.anyio

ERAS = pytest.mark.parametrize("mode", ["auto", "legacy"])

TOOLS = {
    "append_messages",
    "get_context",
    "recall",
    "observe",
    "reflect",
    "get_working_memory",
    "update_working_memory",
    "update_thread",
    "delete_thread",
}

PROFILE_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "prefs": {"type": "object", "properties": {"theme": {"type": "string"}, "size": {"type": "integer"}}},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
}

FILLED = "# About the User\n- First name: Ada\n- Location: London\n- Interests: engines"


def msg(id: str, content: Any, role: str = "user", **extra: Any) -> dict:
    return {"id": id, "role": role, "content": content, **extra}


# -- reading recall's text ---------------------------------------------------------------

HEADER = re.compile(r"^\*\*(?P<role>\w+) \((?P<at>\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ)\)\*\* \[(?P<id>[^\]\n]+)\]:$", re.M)
HINT = re.compile(r"\((?:more|next): recall ([^)\n]*)\)\s*$")
ARG = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|-?\d+)')
# A search result is an index: a `thread <id>, <day>:` line, then one line per hit, until the next such line.
SEARCH_PLACE = re.compile(r"^thread (?P<thread>\S+), (?P<date>\d{4}-\d\d-\d\d):$")
SEARCH_LINE = re.compile(r"^- \[(?P<id>[^\]]+)\] (?P<role>\w+): (?P<snippet>.*)$")
THREAD_LINE = re.compile(
    r"^- (?P<title>.*) \[(?P<id>[^\]]+)\](?P<current> ← current)?: (?P<count>\d+) messages,"
    r" updated (?P<updated>.+)$",
    re.M,
)


def messages_of(text: str) -> list[dict[str, Any]]:
    """The messages a recall text shows: role, UTC stamp, id and its parts ("[pN] ..." lines;
    a part's own line breaks continue it)."""
    hint = HINT.search(text)
    text = text[: hint.start()] if hint else text
    headers = list(HEADER.finditer(text))
    out = []
    for index, header in enumerate(headers):
        end = headers[index + 1].start() if index + 1 < len(headers) else len(text)
        parts: list[str] = []
        for line in text[header.end() : end].strip("\n").split("\n"):
            if line.startswith("  [p"):
                parts.append(line[2:])
            elif parts:
                parts[-1] += "\n" + line
        out.append(
            {"role": header["role"], "at": header["at"], "id": header["id"], "parts": [p.rstrip("\n") for p in parts]}
        )
    return out


def ids(text: str) -> list[str]:
    return [m["id"] for m in messages_of(text)]


def hint_of(text: str) -> dict[str, Any] | None:
    """The arguments of the call that continues this result, or None when it is complete."""
    match = HINT.search(text)
    if match is None:
        return None
    return {key: json.loads(value) for key, value in ARG.findall(match.group(1))}


def search_hits(text: str) -> list[dict[str, str]]:
    hits, place = [], None
    for row in text.splitlines():
        if found := SEARCH_PLACE.match(row):
            place = found.groupdict()
        elif (found := SEARCH_LINE.match(row)) and place is not None:
            hits.append({**found.groupdict(), **place})
    return hits


def thread_lines(text: str) -> list[dict[str, str]]:
    return [m.groupdict() for m in THREAD_LINE.finditer(text)]


async def follow(client, thread_id: str, keep: dict[str, Any] | None = None, **first: Any) -> list[str]:
    """Call recall, then each continuation it names (plus `keep`), until it says nothing more."""
    texts, args = [], dict(first)
    for _ in range(60):
        text = await call(client, "recall", thread_id=thread_id, **args)
        texts.append(text)
        hint = hint_of(text)
        if hint is None:
            return texts
        args = {**(keep or {}), **hint}
    raise AssertionError(f"recall never finished: {texts[-1][-200:]}")


def counts(out: dict) -> tuple[int, int]:
    """append_messages' answer as (stored, skipped); a zero count may be left out of the JSON."""
    assert set(out) <= {"stored", "skipped", "status"}, out
    return out.get("stored", 0), out.get("skipped", 0)


async def append(client, **arguments: Any) -> tuple[int, int]:
    return counts(await ok(client, "append_messages", **arguments))


def one_line_naming(text: str, *names: str) -> None:
    assert "\n" not in text, text
    assert not text.startswith("Error executing tool"), text
    for name in names:
        assert name in text, (name, text)


# -- a scripted model for the observation tools ---------------------------------------------

SECTION = re.compile(r'<thread id="([^"]+)">\n(.*?)\n</thread>', re.S)
SECRET = re.compile(r"\bsecret\w+")


def echo_model() -> ScriptedModel:
    """Observer and Reflector that copy every 'secret...' word they are shown into their notes,
    so a test can trace where a message's words went."""

    def reply(messages: list[dict], target) -> str:
        if role_of(messages) == "reflector":
            words = " ".join(dict.fromkeys(SECRET.findall(text_of(messages[1])))) or "nothing"
            return f"<observations>\nDate: Mar 2, 2026\n* 🔴 (10:00) reflected {words}\n</observations>"
        body = text_of(messages[-1])
        sections = SECTION.findall(body)
        if not sections:
            words = " ".join(dict.fromkeys(SECRET.findall(body))) or "nothing"
            return f"<observations>\nDate: Mar 2, 2026\n* 🔴 (10:00) heard {words}\n</observations>"
        out = []
        for label, section in sections:
            words = " ".join(dict.fromkeys(SECRET.findall(section))) or "nothing"
            out.append(
                f'<thread id="{label}">\nDate: Mar 2, 2026\n* 🔴 (10:00) heard {words}\n'
                f"<current-task>follow up on {words}</current-task>\n</thread>"
            )
        return "<observations>\n" + "\n".join(out) + "\n</observations>"

    return ScriptedModel(reply)


@pytest.fixture
async def observing(make_config):
    """A server whose engine observes with the echo model (resource scope, the default; no buffering)."""
    memories = []

    async def make(**options: Any):
        options.setdefault("observational_memory", {"observation": {"buffer_tokens": False}})
        config = make_config(**options)
        model = echo_model()
        memory = await Memory.open(config, client=model)
        memories.append(memory)
        return build_server(config, memory), model

    yield make
    for memory in memories:
        await memory.close()


# -- discovery ---------------------------------------------------------------------------------


@ERAS
async def test_tools_are_listed_with_annotations_and_no_output_schema(server, mode):
    async with connect(server, mode) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == TOOLS
    for tool in tools.values():
        notes = tool.annotations
        assert tool.description, tool.name
        assert tool.output_schema is None, tool.name  # compact text, no schema to pay for on every session
        assert None not in (notes.read_only_hint, notes.destructive_hint, notes.idempotent_hint), tool.name
    for name in TOOLS - {"observe", "reflect"}:
        assert tools[name].annotations.open_world_hint is False, name
    for name in ("recall", "get_working_memory"):
        assert tools[name].annotations.read_only_hint is True, name
        assert tools[name].annotations.destructive_hint is False, name
    # get_context may activate buffered work or observe: not read-only, but safe to repeat
    context = tools["get_context"].annotations
    assert (context.read_only_hint, context.destructive_hint, context.idempotent_hint) == (False, False, True)
    for name in ("append_messages", "update_working_memory", "update_thread", "delete_thread", "observe", "reflect"):
        assert tools[name].annotations.read_only_hint is False, name
    assert tools["append_messages"].annotations.idempotent_hint is True
    assert tools["append_messages"].annotations.destructive_hint is False
    assert tools["delete_thread"].annotations.destructive_hint is True
    assert tools["delete_thread"].annotations.idempotent_hint is False
    # the compact turn form is offered next to messages=[...]
    properties = tools["append_messages"].input_schema["properties"]
    assert {"thread_id", "user", "assistant", "messages", "resource_id", "thread_metadata"} <= set(properties)
    assert tools["append_messages"].input_schema["required"] == ["thread_id"]


# -- append and context --------------------------------------------------------------------------


@ERAS
async def test_append_then_get_context(server, mode):
    async with connect(server, mode) as client:
        out = await ok(
            client,
            "append_messages",
            thread_id="t1",
            messages=[
                msg("m1", "I live in Lisbon and work as a baker.", created_at="2024-05-01T10:00:00+00:00"),
                msg(
                    "m2",
                    [
                        {"type": "text", "text": "Nice, noted."},
                        {"type": "tool-call", "tool_name": "save", "args": {"k": "v"}},
                    ],
                    role="assistant",
                    created_at="2024-05-01T10:00:05+00:00",
                ),
            ],
        )
        assert counts(out) == (2, 0)

        context = await ok(client, "get_context", thread_id="t1")
        assert set(context) <= {"system_text", "messages", "omitted_messages"}
        assert context.get("omitted_messages", 0) == 0
        first, second = context["messages"]
        # one text part is just its text; anything else is the list of parts
        assert set(first) == {"id", "role", "at", "content"}
        assert (first["id"], first["role"], first["content"]) == ("m1", "user", "I live in Lisbon and work as a baker.")
        assert first["at"].startswith("2024-05-01T10:00:00")  # to the second
        assert second["role"] == "assistant" and second["at"].startswith("2024-05-01T10:00:05")
        assert second["content"] == [
            {"type": "text", "text": "Nice, noted."},
            {"type": "tool-call", "tool_name": "save", "args": {"k": "v"}},
        ]
        # working memory appears once, inside its tags
        system = context["system_text"]
        assert system.count("<working-memory>") == 1 and system.count("</working-memory>") == 1
        assert system.count("- First name:") == 1

        more = await ok(
            client,
            "append_messages",
            thread_id="t1",
            messages=[msg("m3", "And I bake sourdough.")],
            include_status=True,
        )
        assert more["stored"] == 1
        assert more["status"]["unobserved_tokens"] > 0 and more["status"]["threshold"] > 0
        assert "observation is off" in more["status"]["reason"]
        with_status = await ok(client, "get_context", thread_id="t1", include_status=True)
        assert with_status["status"]["unobserved_tokens"] == more["status"]["unobserved_tokens"]
        assert [m["id"] for m in with_status["messages"]] == ["m1", "m2", "m3"]


async def test_get_context_of_a_new_thread_has_working_memory_only(server):
    async with connect(server) as client:
        context = await ok(client, "get_context", thread_id="not-yet")
        assert context.get("messages", []) == []
        assert "<working-memory>" in context["system_text"]
        # asking wrote nothing
        assert await read_json(client, "om://resources/default/threads") == []


@ERAS
async def test_compact_turn_form(server, mode):
    async with connect(server, mode) as client:
        assert await append(client, thread_id="t1", user="What is 2+2?", assistant="4.") == (2, 0)
        assert await append(client, thread_id="t1", user="And 3+3?") == (1, 0)
        assert await append(client, thread_id="t1", assistant="6.") == (1, 0)
        # messages=[...] come first, then user, then assistant
        out = await ok(
            client,
            "append_messages",
            thread_id="t1",
            messages=[msg("tool", "lookup", role="tool")],
            user="thanks",
            assistant="welcome",
        )
        assert counts(out) == (3, 0)
        context = await ok(client, "get_context", thread_id="t1")
    assert [(m["role"], m["content"]) for m in context["messages"]] == [
        ("user", "What is 2+2?"),
        ("assistant", "4."),
        ("user", "And 3+3?"),
        ("assistant", "6."),
        ("tool", "lookup"),
        ("user", "thanks"),
        ("assistant", "welcome"),
    ]
    assert all(m["id"] for m in context["messages"])


@ERAS
async def test_resend_with_ids_is_idempotent_and_counted(server, mode):
    batch = [
        msg("a", "first", created_at="2024-01-02T03:04:00+00:00"),
        msg("b", "second", role="assistant", created_at="2024-01-02T03:04:05+01:00", metadata={"k": 1}),
    ]
    async with connect(server, mode) as client:
        first = await ok(client, "append_messages", thread_id="t1", messages=batch)
        again = await ok(client, "append_messages", thread_id="t1", messages=batch)
        mixed = await ok(client, "append_messages", thread_id="t1", messages=[*batch, msg("c", "third")])
        # the same id and text at another time the client states is a different message: refused
        moved = msg("a", "first", created_at="2024-01-02T03:05:00+00:00")
        text = await fail(client, "append_messages", thread_id="t1", messages=[msg("d", "new"), moved])
        one_line_naming(text, "messages[1]", "'a'")
        page = await call(client, "recall", thread_id="t1", limit=50)
    assert counts(first) == (2, 0)
    assert counts(again) == (0, 2)
    assert counts(mixed) == (1, 2)
    assert ids(page) == ["a", "b", "c"]  # "d" went down with the batch


async def test_resend_with_ids_without_timestamps_is_idempotent(server):
    """A client that never sends created_at can retry a batch: the server-filled time
    must not make the re-sent message look different."""
    batch = [msg("a", "first"), msg("b", [{"type": "text", "text": "second"}], role="assistant")]
    async with connect(server) as client:
        assert await append(client, thread_id="t1", messages=batch) == (2, 0)
        assert await append(client, thread_id="t1", messages=batch) == (0, 2)
        assert ids(await call(client, "recall", thread_id="t1")) == ["a", "b"]


@ERAS
async def test_resend_without_ids_is_stored_once(server, mode):
    async with connect(server, mode) as client:
        assert await append(client, thread_id="t1", user="hello", assistant="hi!") == (2, 0)
        assert await append(client, thread_id="t1", user="hello", assistant="hi!") == (0, 2)
        # the same exchange through messages=[...] gets the same ids
        same = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi!"}]
        assert await append(client, thread_id="t1", messages=same) == (0, 2)
        # the same words at a stated time are another message
        stamped = [{"role": "user", "content": "hello", "created_at": "2024-05-01T10:00:00+00:00"}]
        assert await append(client, thread_id="t1", messages=stamped) == (1, 0)
        assert await append(client, thread_id="t1", messages=stamped) == (0, 1)
        # two identical messages in one batch are both kept ("ok", "ok" is a real exchange)
        twice = [{"role": "user", "content": "ok"}, {"role": "user", "content": "ok"}]
        assert await append(client, thread_id="t1", messages=twice) == (2, 0)
        assert await append(client, thread_id="t1", messages=twice) == (0, 2)
        context = await ok(client, "get_context", thread_id="t1")
    contents = [m["content"] for m in context["messages"]]
    assert contents == ["hello", "hi!", "hello", "ok", "ok"]
    assert len({m["id"] for m in context["messages"]}) == 5
    # the other thread's identical exchange is its own
    async with connect(server, mode) as client:
        assert await append(client, thread_id="t2", user="hello", assistant="hi!") == (2, 0)


async def test_repeated_words_in_later_turns_are_new_messages(server):
    """Only a repeat of the thread's last messages is a re-send: "yes" and "Done." said again
    in a later turn are new messages, never silently dropped."""
    async with connect(server) as client:
        assert await append(client, thread_id="t1", user="yes", assistant="Done.") == (2, 0)
        assert await append(client, thread_id="t1", user="rename it too", assistant="Done.") == (2, 0)
        assert await append(client, thread_id="t1", user="yes", assistant="Done.") == (2, 0)
        assert await append(client, thread_id="t1", user="yes", assistant="Done.") == (0, 2)  # the re-send
        # a host that re-sends the whole conversation plus the new turn stores only the new turn
        whole = [
            {"role": "user", "content": "rename it too"},
            {"role": "assistant", "content": "Done."},
            {"role": "user", "content": "yes"},
            {"role": "assistant", "content": "Done."},
            {"role": "user", "content": "thanks"},
        ]
        assert await append(client, thread_id="t1", messages=whole) == (1, 4)
        context = await ok(client, "get_context", thread_id="t1")
    assert [m["content"] for m in context["messages"]] == [
        "yes",
        "Done.",
        "rename it too",
        "Done.",
        "yes",
        "Done.",
        "thanks",
    ]
    assert len({m["id"] for m in context["messages"]}) == 7


async def test_missing_timestamp_is_now_in_utc(server):
    before = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=5)
    async with connect(server) as client:
        await ok(client, "append_messages", thread_id="t1", user="no time here")
        messages = await read_json(client, "om://threads/t1/messages")
    stamp = datetime.fromisoformat(messages[0]["created_at"])
    assert stamp.utcoffset() == timedelta(0)
    assert before <= stamp <= datetime.now(UTC) + timedelta(seconds=5)


@ERAS
async def test_time_zone_is_kept(server, mode):
    stamps = ["2024-05-01T10:00:00+02:00", "2024-05-01T05:00:00-04:00"]  # 08:00Z, then 09:00Z
    async with connect(server, mode) as client:
        await ok(
            client,
            "append_messages",
            thread_id="t1",
            messages=[
                msg("m1", "morning in Berlin", created_at=stamps[0]),
                msg("m2", "early in New York", created_at=stamps[1]),
            ],
        )
        stored = await read_json(client, "om://threads/t1/messages")
        page = await call(client, "recall", thread_id="t1")
    assert [m["created_at"] for m in stored] == stamps
    # recall shows every time in UTC, so order is plain to read
    assert [m["at"] for m in messages_of(page)] == ["2024-05-01 08:00:00Z", "2024-05-01 09:00:00Z"]


async def test_context_times_name_their_instant(server):
    stamps = ["2024-05-01T10:00:00+02:00", "2024-05-01T05:00:00-04:00"]
    async with connect(server) as client:
        await ok(
            client,
            "append_messages",
            thread_id="t1",
            messages=[
                msg("m1", "morning in Berlin", created_at=stamps[0]),
                msg("m2", "early in New York", created_at=stamps[1]),
            ],
        )
        context = await ok(client, "get_context", thread_id="t1")
    shown = [datetime.fromisoformat(m["at"].replace("Z", "+00:00")) for m in context["messages"]]
    assert all(s.tzinfo is not None for s in shown)
    assert shown == [datetime.fromisoformat(s) for s in stamps]


# -- input errors ------------------------------------------------------------------------------------


@ERAS
async def test_invalid_messages_are_rejected_and_nothing_is_written(make_server, mode):
    server = make_server(max_message_chars=200)
    cases = [
        ({"messages": [msg("m1", "x", role="robot")]}, ["invalid arguments", "messages.0.role"]),
        ({"messages": [msg("m1", "x", created_at="last tuesday")]}, ["messages[0].created_at"]),
        ({"messages": []}, ["messages"]),
        ({}, ["messages"]),
        ({"messages": [msg("m1", "y" * 500)]}, ["messages[0]", "200"]),
        # an oversized message later in the batch sinks the whole batch
        ({"messages": [msg("ok", "fine"), msg("big", "z" * 500)]}, ["messages[1]", "200"]),
        ({"messages": [msg("m1", [{"type": "hologram", "text": "x"}])]}, ["messages.0.content", "tool-call"]),
        ({"messages": [msg("m1", "x", metadata="not an object")]}, ["messages", "metadata"]),
        ({"user": "fine", "messages": [msg("m1", "x", role="wizard")]}, ["messages.0.role"]),
        ({"user": 42}, ["invalid arguments", "user"]),
        ({"user": "hi", "thread_metadata": {"title": 7}}, ["thread_metadata.title"]),
        ({"user": "hi", "resource_id": ""}, ["resource_id"]),
    ]
    async with connect(server, mode) as client:
        for arguments, names in cases:
            text = await fail(client, "append_messages", thread_id="t1", **arguments)
            one_line_naming(text, *names)
        text = await fail(client, "append_messages", thread_id="", user="hi")
        one_line_naming(text, "thread_id")
        text = await fail(client, "append_messages", thread_id="bad\nid", user="hi")
        one_line_naming(text, "thread_id")
        assert await read_json(client, "om://resources/default/threads") == []


async def test_a_bad_part_error_names_the_part_field(server):
    async with connect(server) as client:
        text = await fail(
            client,
            "append_messages",
            thread_id="t1",
            messages=[msg("m1", [{"type": "tool-call", "args": {}}], role="assistant")],
        )
        one_line_naming(text, "tool_name")
        text = await fail(
            client,
            "append_messages",
            thread_id="t1",
            messages=[msg("m1", [{"type": "text", "text": "a", "colour": "red"}])],
        )
        one_line_naming(text, "colour")


@ERAS
async def test_duplicate_id_with_other_content_leaves_batch_unwritten(server, mode):
    async with connect(server, mode) as client:
        await ok(client, "append_messages", thread_id="t1", messages=[msg("m1", "original")])
        text = await fail(
            client,
            "append_messages",
            thread_id="t1",
            messages=[msg("m2", "new one"), msg("m1", "rewritten"), msg("m3", "another new one")],
        )
        one_line_naming(text, "messages[1]", "'m1'")
        text = await fail(client, "append_messages", thread_id="t1", messages=[msg("x", "one"), msg("x", "two")])
        one_line_naming(text, "messages[1]", "'x'")
        # ids are per thread: another thread has its own "m1"
        assert await append(client, thread_id="t2", messages=[msg("m1", "elsewhere")]) == (1, 0)
        page = await call(client, "recall", thread_id="t1", limit=50)
        context = await ok(client, "get_context", thread_id="t1")
        threads = await read_json(client, "om://resources/default/threads")
    assert ids(page) == ["m1"]
    assert [(m["id"], m["content"]) for m in context["messages"]] == [("m1", "original")]
    assert {t["id"]: t["message_count"] for t in threads} == {"t1": 1, "t2": 1}


@ERAS
async def test_thread_belongs_to_one_resource(server, mode):
    async with connect(server, mode) as client:
        await ok(client, "append_messages", thread_id="t1", resource_id="alice", messages=[msg("m1", "hi")])
        for tool, arguments in [
            ("append_messages", {"user": "hi"}),
            ("get_context", {}),
            ("recall", {}),
            ("get_working_memory", {}),
            ("update_working_memory", {"memory": FILLED}),
        ]:
            text = await fail(client, tool, thread_id="t1", resource_id="bob", **arguments)
            one_line_naming(text, "resource_id", "alice", "bob")
        # without a resource id the thread's own resource is used
        assert await append(client, thread_id="t1", messages=[msg("m2", "again")]) == (1, 0)
        assert "First name: Ada" not in (await ok(client, "get_context", thread_id="t1"))["system_text"]
        await ok(client, "update_working_memory", thread_id="t1", memory=FILLED)
        assert (await read_json(client, "om://resources/alice/working-memory"))["memory"] == FILLED
        threads = await read_json(client, "om://resources/alice/threads")
        assert [(t["id"], t["message_count"]) for t in threads] == [("t1", 2)]
        assert await read_json(client, "om://resources/bob/threads") == []
        assert (await read_json(client, "om://resources/bob/working-memory"))["memory"] is None
        # bob's search does not see alice's messages
        await ok(client, "append_messages", thread_id="b1", resource_id="bob", user="hello")
        assert search_hits(await call(client, "recall", thread_id="b1", mode="search", query="again")) == []


@ERAS
async def test_unknown_thread_is_an_error(server, mode):
    async with connect(server, mode) as client:
        await ok(client, "append_messages", thread_id="real", messages=[msg("m1", "hello")])
        for tool, arguments, field in [
            ("update_thread", {"thread_id": "nope", "title": "x"}, "thread_id"),
            ("delete_thread", {"thread_id": "nope"}, "thread_id"),
            ("observe", {"thread_id": "nope"}, "thread_id"),
            ("reflect", {"thread_id": "nope"}, "thread_id"),
            ("recall", {"thread_id": "real", "target_thread_id": "nope"}, "target_thread_id"),
        ]:
            one_line_naming(await fail(client, tool, **arguments), field, "'nope'")
        one_line_naming(await fail(client, "recall", thread_id="real", cursor="ghost"), "cursor", "'ghost'")
        # the current thread may be new: recalling it shows nothing rather than inventing anything
        assert await call(client, "recall", thread_id="nope") == "No messages."
        assert [t["id"] for t in await read_json(client, "om://resources/default/threads")] == ["real"]


async def test_argument_bounds_are_enforced(server):
    async with connect(server) as client:
        await ok(client, "append_messages", thread_id="t1", messages=[msg("m1", "hello")])
        for tool, arguments, field in [
            ("get_context", {"max_tokens": 5}, "max_tokens"),
            ("get_context", {"max_tokens": 2_000_000}, "max_tokens"),
            ("recall", {"limit": 0}, "limit"),
            ("recall", {"limit": 51}, "limit"),
            ("recall", {"page": 1001}, "page"),
            ("recall", {"mode": "everything"}, "mode"),
            ("recall", {"detail": "medium"}, "detail"),
            ("recall", {"part_type": "video"}, "part_type"),
            ("recall", {"part_index": -1, "cursor": "m1"}, "part_index"),
            ("recall", {"char_offset": -1, "cursor": "m1"}, "char_offset"),
            ("recall", {"max_tokens": 10}, "max_tokens"),
            ("recall", {"scope": "world"}, "scope"),
            ("recall", {"anchor": "middle"}, "anchor"),
            ("recall", {"query": "x" * 2001, "mode": "search"}, "query"),
            ("update_thread", {"title": "t" * 501}, "title"),
            ("get_context", {"thread_id": ""}, "thread_id"),
            ("get_context", {"thread_id": "t" * 201}, "thread_id"),
        ]:
            arguments = {"thread_id": "t1", **arguments}
            one_line_naming(await fail(client, tool, **arguments), "invalid arguments", field)
        one_line_naming(await fail(client, "recall", thread_id="t1", mode="search"), "query")
        one_line_naming(await fail(client, "recall", thread_id="t1", part_index=0), "cursor")
        one_line_naming(await fail(client, "observe", thread_id="t1", instruction="x" * 4001), "instruction")


# -- recall: messages -------------------------------------------------------------------------------------


@ERAS
async def test_recall_pages_from_cursor_and_anchor(server, mode):
    async with connect(server, mode) as client:
        await ok(
            client, "append_messages", thread_id="t1", messages=[msg(f"m{i}", f"message number {i}") for i in range(10)]
        )

        first = await call(client, "recall", thread_id="t1", limit=3)
        assert ids(first) == ["m0", "m1", "m2"]
        assert hint_of(first) == {"limit": 3, "page": 2}
        assert messages_of(first)[0]["parts"] == ["[p0] message number 0"]

        last = await call(client, "recall", thread_id="t1", anchor="end", limit=3)
        assert ids(last) == ["m7", "m8", "m9"]
        assert hint_of(last) == {"anchor": "end", "limit": 3, "page": 2}
        assert ids(await call(client, "recall", thread_id="t1", anchor="end", limit=3, page=2)) == ["m4", "m5", "m6"]

        # the cursor message itself opens page 1 and closes page -1
        forward = await call(client, "recall", thread_id="t1", cursor="m5", limit=3)
        assert ids(forward) == ["m5", "m6", "m7"]
        assert hint_of(forward) == {"limit": 3, "cursor": "m5", "page": 2}
        tail = await call(client, "recall", thread_id="t1", cursor="m5", page=2, limit=3)
        assert ids(tail) == ["m8", "m9"] and hint_of(tail) is None

        back = await call(client, "recall", thread_id="t1", cursor="m5", page=-1, limit=3)
        assert ids(back) == ["m3", "m4", "m5"]
        assert hint_of(back) == {"limit": 3, "cursor": "m5", "page": -2}
        back2 = await call(client, "recall", thread_id="t1", cursor="m5", page=-2, limit=3)
        assert ids(back2) == ["m0", "m1", "m2"] and hint_of(back2) is None

        # a cursor finds its thread: reading another thread of the resource by message id
        await ok(client, "append_messages", thread_id="t2", user="elsewhere")
        assert ids(await call(client, "recall", thread_id="t2", cursor="m8", limit=5)) == ["m8", "m9"]
        other = await call(client, "recall", thread_id="t2", target_thread_id="t1", anchor="end", limit=2)
        assert ids(other) == ["m8", "m9"]
        # a range from an observation is two ids: the error says which one to pass
        text = await fail(client, "recall", thread_id="t1", cursor="m2:m5")
        one_line_naming(text, "cursor", "'m2'", "'m5'")


@ERAS
async def test_recall_reads_a_whole_thread_in_order(server, mode):
    async with connect(server, mode) as client:
        await ok(client, "append_messages", thread_id="t1", messages=[msg(f"m{i}", f"note {i}") for i in range(23)])
        expected = [f"m{i}" for i in range(23)]
        for limit in (1, 4, 7, 20, 50):
            forward = await follow(client, "t1", keep={"limit": limit}, limit=limit)
            assert [i for text in forward for i in ids(text)] == expected, limit
            backward = await follow(client, "t1", keep={"limit": limit}, limit=limit, anchor="end")
            assert [i for text in reversed(backward) for i in ids(text)] == expected, limit
        from_cursor = await follow(client, "t1", keep={"limit": 6}, limit=6, cursor="m10")
        assert [i for text in from_cursor for i in ids(text)] == expected[10:]
        back_from_cursor = await follow(client, "t1", keep={"limit": 6}, limit=6, cursor="m10", page=-1)
        assert [i for text in reversed(back_from_cursor) for i in ids(text)] == expected[:11]


async def test_the_continuation_alone_is_the_exact_call(server):
    async with connect(server) as client:
        await ok(client, "append_messages", thread_id="t1", messages=[msg(f"m{i}", f"note {i}") for i in range(10)])
        texts = await follow(client, "t1", limit=4)
        assert [i for text in texts for i in ids(text)] == [f"m{i}" for i in range(10)]


@ERAS
async def test_low_detail_clips_and_high_detail_continues(server, mode):
    lines = [" ".join(f"w{row:03d}.{col}" for col in range(12)) for row in range(400)]
    words = "\n".join(lines)  # 35,599 characters over 400 lines, one part
    async with connect(server, mode) as client:
        await ok(
            client,
            "append_messages",
            thread_id="t1",
            messages=[
                msg(
                    "long", [{"type": "text", "text": words}, {"type": "text", "text": "second part"}], role="assistant"
                ),
                msg("after", "short"),
            ],
        )

        low = await call(client, "recall", thread_id="t1")
        long, after = messages_of(low)
        assert len(low) < len(words) // 10
        assert long["parts"][0].startswith("[p0] w000.0 w000.1")
        assert 'recall cursor="long" part_index=0 detail="high"' in long["parts"][0]
        assert long["parts"][1] == "[p1] second part"
        assert after["parts"] == ["[p0] short"]

        pieces, args = [], {"cursor": "long", "part_index": 0, "detail": "high"}
        for _ in range(40):
            high = await call(client, "recall", thread_id="t1", **args)
            (shown,) = messages_of(high)
            assert shown["id"] == "long"
            start = high.index("\n  [p0") + 3
            body_start = high.index("] ", start) + 2
            pieces.append(high[body_start : high.rindex("\n\n(next: recall ")])
            args = hint_of(high)
            if args.get("part_index") != 0:
                break
            assert args["cursor"] == "long" and args["char_offset"] > 0
        else:
            raise AssertionError("the part never ended")
        assert len(pieces) > 1
        assert "".join(pieces) == words
        # after the last chunk the continuation moves on to the next part
        assert args == {"cursor": "long", "part_index": 1, "detail": "high"}
        second = await call(client, "recall", thread_id="t1", **args)
        assert messages_of(second)[0]["parts"] == ["[p1] second part"]
        # and from the last part on to the following message
        onward = await call(client, "recall", thread_id="t1", **hint_of(second))
        assert "after" in ids(onward)
        # a part index past the end falls through to the next message
        through = await call(client, "recall", thread_id="t1", cursor="long", part_index=5)
        assert ids(through) == ["after"]


@ERAS
async def test_recall_filters_by_part_type_and_tool_name(server, mode):
    async with connect(server, mode) as client:
        await ok(
            client,
            "append_messages",
            thread_id="t1",
            messages=[
                msg("u1", "find me flights to Oslo"),
                msg(
                    "c1",
                    [
                        {"type": "text", "text": "Searching."},
                        {
                            "type": "tool-call",
                            "tool_name": "search_web",
                            "args": {"q": "Oslo flights"},
                            "tool_call_id": "call1",
                        },
                    ],
                    role="assistant",
                ),
                msg(
                    "r1",
                    [
                        {
                            "type": "tool-result",
                            "tool_name": "search_web",
                            "result": {"hits": 3},
                            "tool_call_id": "call1",
                        }
                    ],
                    role="tool",
                ),
                msg(
                    "c2", [{"type": "tool-call", "tool_name": "calculator", "args": {"expr": "2+2"}}], role="assistant"
                ),
                msg(
                    "a1",
                    [{"type": "reasoning", "text": "cheapest is Tuesday"}, {"type": "text", "text": "Tuesday."}],
                    role="assistant",
                ),
            ],
        )
        calls = messages_of(await call(client, "recall", thread_id="t1", part_type="tool-call"))
        assert [m["id"] for m in calls] == ["c1", "c2"]
        assert len(calls[0]["parts"]) == 1  # only the matching part, with its own index
        assert calls[0]["parts"][0].startswith("[p1] ") and "search_web" in calls[0]["parts"][0]
        assert "Oslo flights" in calls[0]["parts"][0]

        assert ids(await call(client, "recall", thread_id="t1", tool_name="search_web")) == ["c1", "r1"]
        assert ids(await call(client, "recall", thread_id="t1", part_type="tool-call", tool_name="calculator")) == [
            "c2"
        ]
        reasoning = messages_of(await call(client, "recall", thread_id="t1", part_type="reasoning"))
        assert [m["id"] for m in reasoning] == ["a1"]
        assert reasoning[0]["parts"] == ["[p0] cheapest is Tuesday"]
        assert await call(client, "recall", thread_id="t1", part_type="image") == "No messages."
        # filters page over the matching messages only
        first = await call(client, "recall", thread_id="t1", tool_name="search_web", limit=1)
        assert ids(first) == ["c1"]
        assert hint_of(first) == {"limit": 1, "tool_name": "search_web", "page": 2}
        rest = await call(client, "recall", thread_id="t1", **hint_of(first))
        assert ids(rest) == ["r1"]


# -- recall: threads -----------------------------------------------------------------------------------------


@ERAS
async def test_threads_listing(server, mode):
    async with connect(server, mode) as client:
        for name in ("old", "mid", "new"):
            await ok(client, "append_messages", thread_id=name, resource_id="r", messages=[msg(f"{name}-1", name)])
        await ok(
            client,
            "append_messages",
            thread_id="mid",
            messages=[msg("mid-2", "more")],
            thread_metadata={"title": "ignored: the thread exists"},
        )
        await ok(
            client,
            "append_messages",
            thread_id="titled",
            resource_id="r",
            messages=[msg("t-1", "x")],
            thread_metadata={"title": "Trip to Oslo"},
        )
        await ok(client, "append_messages", thread_id="elsewhere", resource_id="other", messages=[msg("e", "e")])

        listing = thread_lines(await call(client, "recall", thread_id="mid", mode="threads"))
        # newest activity first: "mid" took a message after "new" was made
        assert [t["id"] for t in listing] == ["titled", "mid", "new", "old"]
        assert [bool(t["current"]) for t in listing] == [False, True, False, False]
        assert {t["id"]: int(t["count"]) for t in listing} == {"titled": 1, "new": 1, "mid": 2, "old": 1}
        assert {t["id"]: t["title"] for t in listing}["titled"] == "Trip to Oslo"
        assert {t["id"]: t["title"] for t in listing}["mid"] == "(untitled)"

        created = {t["id"]: t["created_at"] for t in await read_json(client, "om://resources/r/threads")}
        after = thread_lines(await call(client, "recall", thread_id="mid", mode="threads", after=created["mid"]))
        assert [t["id"] for t in after] == ["titled", "new"]
        before = thread_lines(await call(client, "recall", thread_id="mid", mode="threads", before=created["mid"]))
        assert [t["id"] for t in before] == ["old"]
        future = (datetime.now(UTC) + timedelta(days=1)).date().isoformat()
        assert len(thread_lines(await call(client, "recall", thread_id="mid", mode="threads", before=future))) == 4
        assert await call(client, "recall", thread_id="mid", mode="threads", after=future) == "No threads."

        paged = await call(client, "recall", thread_id="mid", mode="threads", limit=3)
        assert [t["id"] for t in thread_lines(paged)] == ["titled", "mid", "new"]
        assert hint_of(paged) == {"mode": "threads", "limit": 3, "page": 2}
        page2 = await call(client, "recall", thread_id="mid", mode="threads", limit=3, page=2)
        assert [t["id"] for t in thread_lines(page2)] == ["old"] and hint_of(page2) is None

        one_line_naming(await fail(client, "recall", thread_id="mid", mode="threads", before="not-a-date"), "before")
        one_line_naming(await fail(client, "recall", thread_id="mid", mode="threads", after="2024-13-45"), "after")


# -- recall: search ---------------------------------------------------------------------------------------------


@ERAS
async def test_search_ranks_the_more_relevant_message_first(server, mode):
    async with connect(server, mode) as client:
        await ok(
            client,
            "append_messages",
            thread_id="t1",
            messages=[
                msg(
                    "weak",
                    "The database was slow yesterday, and lunch was late as well today.",
                    created_at="2024-05-01T10:00:00+00:00",
                ),
                msg("noise", "We talked about the weather and a walk in the park."),
                msg("strong", "The database migration failed: the migration script hit a database lock."),
            ],
        )
        await ok(client, "append_messages", thread_id="t2", messages=[msg("other", "unrelated gardening notes")])
        await ok(
            client,
            "append_messages",
            thread_id="x",
            resource_id="someone-else",
            messages=[msg("foreign", "database migration database migration")],
        )

        found = await call(client, "recall", thread_id="t2", mode="search", query="database migration")
        hits = search_hits(found)
        # Ranked; no foreign resource. "noise" may follow: it is indexed with the
        # messages before it, which mention the database.
        assert [h["id"] for h in hits][:2] == ["strong", "weak"]
        assert {h["id"] for h in hits} <= {"strong", "weak", "noise"}
        assert hits[0]["thread"] == "t1" and hits[0]["role"] == "user"
        assert "migration" in hits[0]["snippet"]
        assert {h["id"]: h["date"] for h in hits}["weak"] == "2024-05-01"
        assert "recall cursor=" in found.splitlines()[-1]  # the footer says how to read around a match

        scoped = await call(client, "recall", thread_id="t2", mode="search", query="database migration", scope="thread")
        assert search_hits(scoped) == [] and scoped.startswith("No matches")
        scoped = await call(client, "recall", thread_id="t1", mode="search", query="database", scope="thread")
        assert {"strong", "weak"} <= {h["id"] for h in search_hits(scoped)} <= {"strong", "weak", "noise"}
        assert [
            h["id"]
            for h in search_hits(await call(client, "recall", thread_id="t1", mode="search", query="database", limit=1))
        ] == ["strong"]

        # the footer's advice leads to recall around the match, from another thread
        assert "cursor=<id> page=0" in found.splitlines()[-1]
        around = await call(client, "recall", thread_id="t2", cursor="noise", page=0, limit=3)
        assert ids(around) == ["weak", "noise", "strong"]
        assert ids(await call(client, "recall", thread_id="t2", cursor="strong", page=-1)) == [
            "weak",
            "noise",
            "strong",
        ]


@ERAS
async def test_search_answers_with_an_index_of_short_lines(server, mode):
    """A default search lists 10 hits, one short line each, naming the thread and day once per run of hits
    from the same one; detail="high" shows more of each; the hit is then read whole by id."""
    long_tail = " and then the rest of a long message that an index line leaves out" * 3
    async with connect(server, mode) as client:
        for day, thread in enumerate(["a", "b"], start=1):
            await ok(
                client,
                "append_messages",
                thread_id=thread,
                messages=[
                    msg(f"{thread}{n}", f"kilimanjaro note {n}{long_tail}", created_at=f"2024-05-0{day}T10:00:00+00:00")
                    for n in range(8)
                ],
            )
        found = await call(client, "recall", thread_id="a", mode="search", query="kilimanjaro")
        hits = search_hits(found)
        assert len(hits) == 10 and {h["thread"] for h in hits} == {"a", "b"}
        assert {h["date"] for h in hits if h["thread"] == "b"} == {"2024-05-02"}
        places = [row for row in found.splitlines() if row.startswith("thread ")]
        runs = sum(
            1
            for i, h in enumerate(hits)
            if i == 0 or (h["thread"], h["date"]) != (hits[i - 1]["thread"], hits[i - 1]["date"])
        )
        assert len(places) == runs < len(hits)  # a header per run, not per hit
        assert all(len(h["snippet"]) <= 62 and "leaves out" not in h["snippet"] for h in hits)
        detailed = search_hits(
            await call(client, "recall", thread_id="a", mode="search", query="kilimanjaro", detail="high")
        )
        assert [h["id"] for h in detailed] == [h["id"] for h in hits]
        assert all(len(d["snippet"]) > len(h["snippet"]) for d, h in zip(detailed, hits))
        whole = await call(client, "recall", thread_id="a", cursor=hits[0]["id"], page=0, limit=1)
        assert ids(whole) == [hits[0]["id"]] and "leaves out" in whole


@ERAS
async def test_search_accepts_any_query(server, mode):
    awkward = [
        '"',
        '""',
        "AND OR NOT",
        "NEAR(",
        "NEAR(a b",
        "col:x",
        "body:",
        "*",
        "-",
        "^",
        "(",
        ")",
        "a OR",
        "🙂🎉",
        "the and of to",
        "'",
        "'); DROP TABLE messages; --",
        "\x00",
        "∑∫≈",
        "prev1:x",
        "{body}",
        "a" * 2000,
    ]
    async with connect(server, mode) as client:
        await ok(client, "append_messages", thread_id="t1", messages=[msg("m1", "The database migration failed")])
        for query in awkward:
            text = await call(client, "recall", thread_id="t1", mode="search", query=query)
            assert search_hits(text) == [], query
            assert text.startswith(("No matches", "The query has no searchable words")), (query, text)
        for query in [
            'database"',
            "body:database",
            "database*",
            "NEAR(database",
            "(migration)",
            "-database",
            "DATABASE",
            "databases",
            "prev1:database",
            "database AND",
            "migrations OR nothing",
        ]:
            text = await call(client, "recall", thread_id="t1", mode="search", query=query)
            assert [h["id"] for h in search_hits(text)] == ["m1"], query
        stop_words = await call(client, "recall", thread_id="t1", mode="search", query="the and of to")
        assert "no searchable words" in stop_words
        # nothing was harmed
        assert ids(await call(client, "recall", thread_id="t1")) == ["m1"]


# -- output budget ------------------------------------------------------------------------------------------------


async def long_thread(client, count: int = 40) -> None:
    sentence = "Deployment notes for the quarterly release of the billing service, kept for reference. "
    for start in range(0, count, 10):
        await ok(
            client,
            "append_messages",
            thread_id="t1",
            messages=[msg(f"m{n}", f"{sentence * 6} item {n}", role="assistant") for n in range(start, start + 10)],
        )


async def test_outputs_respect_the_token_budget(make_server):
    counter = get_token_counter()
    budget = 500
    server = make_server(output_token_budget=budget)
    async with connect(server) as client:
        await long_thread(client)

        page = await call(client, "recall", thread_id="t1", limit=20)
        shown = ids(page)
        assert 0 < len(shown) < 20 and shown == [f"m{n}" for n in range(len(shown))]
        assert counter.count_text(page) <= budget
        # the continuation starts exactly where the page stopped
        hint = hint_of(page)
        assert hint == {"cursor": f"m{len(shown)}", "page": 1}
        assert ids(await call(client, "recall", thread_id="t1", **hint))[0] == f"m{len(shown)}"
        # and reading on this way gets every message once, in order
        texts = await follow(client, "t1", keep={"limit": 20}, limit=20)
        assert [i for text in texts for i in ids(text)] == [f"m{n}" for n in range(40)]
        assert all(counter.count_text(text) <= budget for text in texts)

        found = await call(
            client, "recall", thread_id="t1", mode="search", query="billing deployment", limit=20, detail="high"
        )
        assert 0 < len(search_hits(found)) < 20
        assert counter.count_text(found) <= budget

        context = await ok(client, "get_context", thread_id="t1")
        assert context["omitted_messages"] > 0
        assert context["messages"][-1]["id"] == "m39"  # the newest messages are kept
        assert context["omitted_messages"] == 40 - len(context["messages"])
        small = await ok(client, "get_context", thread_id="t1", max_tokens=300)
        assert 0 < len(small["messages"]) < len(context["messages"])
        assert small["omitted_messages"] == 40 - len(small["messages"])
        assert small["messages"][-1]["id"] == "m39"


async def test_get_context_result_fits_max_tokens(make_server):
    counter = get_token_counter()
    server = make_server(output_token_budget=500)
    async with connect(server) as client:
        await long_thread(client)
        for max_tokens in (None, 300, 1000):
            arguments = {"max_tokens": max_tokens} if max_tokens else {}
            text = await call(client, "get_context", thread_id="t1", **arguments)
            assert counter.count_text(text) <= (max_tokens or 500), max_tokens


async def test_recall_max_tokens_is_a_hard_bound(make_server):
    counter = get_token_counter()
    server = make_server(output_token_budget=2000)
    async with connect(server) as client:
        await long_thread(client)
        for n in range(12):
            await ok(client, "append_messages", thread_id=f"other-{n}", user=f"billing question {n}")
        for max_tokens in (200, 350, 800, 5000):
            for arguments in [
                {},
                {"anchor": "end"},
                {"cursor": "m7", "limit": 50},
                {"cursor": "m30", "page": -1},
                {"mode": "search", "query": "billing deployment", "limit": 50},
            ]:
                text = await call(client, "recall", thread_id="t1", max_tokens=max_tokens, **arguments)
                # max_tokens above the server's budget is held to the server's budget
                assert counter.count_text(text) <= min(max_tokens, 2000), (max_tokens, arguments)
                assert ids(text) or search_hits(text), (max_tokens, arguments, text)


async def test_recall_max_tokens_bounds_the_threads_listing(server):
    counter = get_token_counter()
    async with connect(server) as client:
        for n in range(14):
            await ok(
                client,
                "append_messages",
                thread_id=f"thread-{n}",
                user=f"question {n}",
                thread_metadata={"title": f"A conversation about topic number {n}"},
            )
        text = await call(client, "recall", thread_id="thread-0", mode="threads", limit=50, max_tokens=200)
        assert thread_lines(text)
        assert counter.count_text(text) <= 200


async def test_recall_max_tokens_bounds_high_detail(make_server):
    counter = get_token_counter()
    server = make_server(output_token_budget=2000)
    async with connect(server) as client:
        await ok(
            client,
            "append_messages",
            thread_id="t1",
            messages=[
                msg("cjk", "記憶" * 3000, role="assistant"),
                msg("digits", " ".join(f"w{i:05d}" for i in range(3500)), role="assistant"),
            ],
        )
        for max_tokens in (200, 1000, 5000):
            for cursor in ("cjk", "digits"):
                text = await call(client, "recall", thread_id="t1", cursor=cursor, part_index=0, max_tokens=max_tokens)
                assert counter.count_text(text) <= min(max_tokens, 2000), (cursor, max_tokens)


async def test_recall_never_hides_what_does_not_fit(server):
    async with connect(server) as client:
        await long_thread(client, count=10)
        text = await call(client, "recall", thread_id="t1", limit=5, max_tokens=100)
        assert "No messages" not in text
        hint = hint_of(text)
        assert hint is not None and hint.get("page") != 2
        found = await call(client, "recall", thread_id="t1", mode="search", query="billing", max_tokens=60)
        assert "No matches" not in found


# -- threads: update and delete ------------------------------------------------------------------------------------


@ERAS
async def test_update_thread(server, mode):
    async with connect(server, mode) as client:
        await ok(
            client,
            "append_messages",
            thread_id="t1",
            messages=[msg("m1", "hi")],
            thread_metadata={"title": "First title", "project": "apollo", "tag": "x"},
        )
        assert thread_lines(await call(client, "recall", thread_id="t1", mode="threads"))[0]["title"] == "First title"

        out = await ok(client, "update_thread", thread_id="t1", title="Renamed", metadata={"tag": None, "owner": "ann"})
        assert out == {"id": "t1", "title": "Renamed"}
        (thread,) = await read_json(client, "om://resources/default/threads")
        assert thread["title"] == "Renamed"
        assert thread["metadata"]["project"] == "apollo" and thread["metadata"]["owner"] == "ann"
        assert "tag" not in thread["metadata"]
        assert thread_lines(await call(client, "recall", thread_id="t1", mode="threads"))[0]["title"] == "Renamed"

        # metadata alone keeps the title
        assert await ok(client, "update_thread", thread_id="t1", metadata={"stage": 2}) == {
            "id": "t1",
            "title": "Renamed",
        }
        one_line_naming(await fail(client, "update_thread", thread_id="t1", title="   "), "title")
        one_line_naming(await fail(client, "update_thread", thread_id="t1", metadata={"x": "\ud800"}), "metadata")
        (thread,) = await read_json(client, "om://resources/default/threads")
        assert thread["title"] == "Renamed" and thread["metadata"]["stage"] == 2


@ERAS
@pytest.mark.slow
async def test_delete_thread_leaves_nothing_findable(observing, db_path, store_location, mode):
    server, model = await observing(working_memory={"scope": "thread"})
    async with connect(server, mode) as client:
        await ok(
            client,
            "append_messages",
            thread_id="doomed",
            messages=[msg("d1", "the secretzebracorn password is secrethunter2"), msg("d2", "noted", role="assistant")],
        )
        await ok(client, "append_messages", thread_id="keep", messages=[msg("k1", "a secretsighting today")])
        await ok(client, "update_working_memory", thread_id="doomed", memory="# Notes\n- secretwmnote")
        # observe both threads into the shared log, condense it, then observe a little more
        assert (await ok(client, "observe", thread_id="keep"))["ran"] is True
        log = await read_json(client, "om://resources/default/observations")
        assert "secretzebracorn" in log["text"] and "secretsighting" in log["text"]
        assert (await ok(client, "reflect", thread_id="keep"))["ran"] is True
        await ok(client, "append_messages", thread_id="keep", messages=[msg("k2", "a secretlater note")])
        assert (await ok(client, "observe", thread_id="keep"))["ran"] is True
        assert (await read_json(client, "om://threads/doomed/events")) != []
        hits = search_hits(await call(client, "recall", thread_id="keep", mode="search", query="secretzebracorn"))
        assert hits[0]["id"] == "d1" and {h["id"] for h in hits} <= {"d1", "d2"}  # d2 is indexed with d1

        assert await ok(client, "delete_thread", thread_id="doomed") == {"deleted_messages": 2}

        found = await call(client, "recall", thread_id="keep", mode="search", query="secretzebracorn secrethunter2")
        assert search_hits(found) == []
        assert search_hits(await call(client, "recall", thread_id="keep", mode="search", query="secretlater"))
        one_line_naming(await fail(client, "recall", thread_id="keep", target_thread_id="doomed"), "'doomed'")
        one_line_naming(await fail(client, "recall", thread_id="keep", cursor="d1"), "'d1'")
        one_line_naming(await fail(client, "delete_thread", thread_id="doomed"), "'doomed'")
        assert await call(client, "recall", thread_id="doomed") == "No messages."
        assert [t["id"] for t in thread_lines(await call(client, "recall", thread_id="keep", mode="threads"))] == [
            "keep"
        ]
        # the shared log and its history keep nothing of it (a reflection that took it in goes too)
        for uri in (
            "om://resources/default/observations",
            "om://resources/default/observations/history",
            "om://threads/keep/observations",
            "om://threads/keep/events",
        ):
            text = json.dumps(await read_json(client, uri))
            assert "secretzebracorn" not in text and "secrethunter2" not in text, uri
        assert "secretlater" in (await read_json(client, "om://resources/default/observations"))["text"]
        context = await ok(client, "get_context", thread_id="keep")
        assert "secretzebracorn" not in json.dumps(context)

        # a new thread with the same id starts empty: no messages, fresh working memory
        await ok(client, "append_messages", thread_id="doomed", messages=[msg("n1", "fresh start")])
        assert ids(await call(client, "recall", thread_id="doomed")) == ["n1"]
        assert await call(client, "get_working_memory", thread_id="doomed") == DEFAULT_TEMPLATE
        assert [m["id"] for m in await read_json(client, "om://threads/doomed/messages")] == ["n1"]
        assert await read_json(client, "om://threads/doomed/events") == []

    if on_postgres():
        # no live row of any table holds it (search counters included); PostgreSQL frees the dead
        # rows' space at its next VACUUM, it does not zero it (docs/postgres.md: Limits)
        data = await postgres_text(store_location)
    else:
        # erased from the file itself, not just unlinked
        files = [Path(str(db_path) + suffix) for suffix in ("", "-wal", "-journal")]
        data = b"".join(f.read_bytes() for f in files if f.exists())
    for secret in (b"secretzebracorn", b"secrethunter2", b"secretwmnote"):
        assert secret not in data, secret
    assert b"secretlater" in data


# -- observe and reflect --------------------------------------------------------------------------------------------


@ERAS
async def test_observe_and_reflect(observing, mode):
    server, model = await observing(observational_memory={"scope": "thread", "observation": {"buffer_tokens": False}})
    async with connect(server, mode) as client:
        await ok(client, "append_messages", thread_id="t1", user="my secretcode is 42", assistant="noted")
        observed = await ok(client, "observe", thread_id="t1", instruction="note codes")
        assert observed["ran"] is True and observed["tokens_in"] > 0 and observed["tokens_out"] > 0
        assert set(observed) <= {"ran", "cycle_id", "reason", "error", "tokens_in", "tokens_out"}
        assert "note codes" in text_of(model.calls[-1].messages[0])
        # nothing new: a reason, not a run
        again = await ok(client, "observe", thread_id="t1")
        assert not again.get("ran") and again["reason"]
        context = await ok(client, "get_context", thread_id="t1")
        assert "secretcode" in context["system_text"] and context.get("messages", []) == []

        reflected = await ok(client, "reflect", thread_id="t1")
        assert reflected["ran"] is True
        log = await read_json(client, "om://threads/t1/observations")
        assert log["generation"] == 1 and "reflected secretcode" in log["text"]
        history = await read_json(client, "om://threads/t1/observations/history")
        assert [g["generation"] for g in history["generations"]] == [1, 0]
    assert len(model.calls) == 2


async def test_a_failing_model_changes_nothing(make_config):
    config = make_config(
        observational_memory={
            "scope": "thread",
            "observation": {"buffer_tokens": False},
            "call_policy": {"backoff_initial_seconds": 0, "backoff_max_seconds": 0},
        }
    )
    memory = await Memory.open(config, client=ScriptedModel(lambda messages, target: "no tags at all"))
    try:
        async with connect(build_server(config, memory)) as client:
            await ok(client, "append_messages", thread_id="t1", user="hello", assistant="hi")
            out = await ok(client, "observe", thread_id="t1")
            assert not out.get("ran") and out["error"]
            context = await ok(client, "get_context", thread_id="t1")
            assert [m["content"] for m in context["messages"]] == ["hello", "hi"]
    finally:
        await memory.close()


async def test_observe_when_observation_is_off_says_so(make_config):
    config = make_config(observational_memory={"enabled": False, "scope": "thread"})
    model = echo_model()
    memory = await Memory.open(config, client=model)
    try:
        async with connect(build_server(config, memory)) as client:
            await ok(client, "append_messages", thread_id="t1", user="my secretcode is 42")
            for tool in ("observe", "reflect"):
                result = await client.call_tool(tool, {"thread_id": "t1"})
                text = result.content[0].text
                assert "failed inside" not in text and "off" in text, (tool, text)
            assert "secretcode" not in (await ok(client, "get_context", thread_id="t1"))["system_text"]
        assert model.calls == []
    finally:
        await memory.close()


# -- working memory -------------------------------------------------------------------------------------------------


@ERAS
async def test_template_working_memory(server, mode):
    async with connect(server, mode) as client:
        await ok(client, "append_messages", thread_id="t1", messages=[msg("m1", "I'm Ada from London")])
        assert await call(client, "get_working_memory", thread_id="t1") == DEFAULT_TEMPLATE

        assert await ok(client, "update_working_memory", thread_id="t1", memory=FILLED) == {"updated": True}
        assert await call(client, "get_working_memory", thread_id="t1") == FILLED

        # echoing the blank template would erase what is known: refused with a notice
        refused = await ok(client, "update_working_memory", thread_id="t1", memory=DEFAULT_TEMPLATE)
        assert not refused.get("updated") and "template" in refused["notice"]
        assert await call(client, "get_working_memory", thread_id="t1") == FILLED

        # resource scope: another thread of the resource sees the same memory, once, in its context
        await ok(client, "append_messages", thread_id="t2", messages=[msg("m2", "hello again")])
        assert await call(client, "get_working_memory", thread_id="t2") == FILLED
        system = (await ok(client, "get_context", thread_id="t2"))["system_text"]
        assert f"<working-memory>\n{FILLED}\n</working-memory>" in system
        assert system.count("First name: Ada") == 1 and system.count("<working-memory>") == 1
        assert "update_working_memory" in system
        assert (await read_json(client, "om://resources/default/working-memory"))["memory"] == FILLED
        assert (await read_json(client, "om://threads/t2/working-memory"))["memory"] == FILLED

        one_line_naming(
            await fail(client, "update_working_memory", thread_id="t1", memory="# wiped", read_only=True), "read-only"
        )
        one_line_naming(
            await fail(client, "update_working_memory", thread_id="t1", memory={"name": "Ada"}), "memory", "string"
        )
        one_line_naming(
            await fail(client, "update_working_memory", thread_id="t1", memory="x" * 40_001), "memory", "40000"
        )
        assert await call(client, "get_working_memory", thread_id="t1") == FILLED


async def test_thread_scoped_working_memory(make_server):
    server = make_server(working_memory={"scope": "thread"})
    async with connect(server) as client:
        one_line_naming(await fail(client, "update_working_memory", thread_id="t1", memory=FILLED), "thread_id")
        await ok(client, "append_messages", thread_id="t1", user="hi")
        await ok(client, "append_messages", thread_id="t2", user="hi")
        assert await ok(client, "update_working_memory", thread_id="t1", memory=FILLED) == {"updated": True}
        assert await call(client, "get_working_memory", thread_id="t1") == FILLED
        assert await call(client, "get_working_memory", thread_id="t2") == DEFAULT_TEMPLATE
        assert (await read_json(client, "om://threads/t1/working-memory"))["memory"] == FILLED
        assert (await read_json(client, "om://resources/default/working-memory"))["memory"] is None


async def test_read_only_working_memory_from_config(make_server):
    async with connect(make_server()) as client:
        await ok(client, "append_messages", thread_id="t1", messages=[msg("m1", "hi")])
        await ok(client, "update_working_memory", thread_id="t1", memory=FILLED)
    async with connect(make_server(working_memory={"read_only": True})) as client:
        assert await call(client, "get_working_memory", thread_id="t1") == FILLED
        one_line_naming(await fail(client, "update_working_memory", thread_id="t1", memory="# other"), "read-only")
        one_line_naming(
            await fail(client, "update_working_memory", thread_id="t1", memory="# x", read_only=False), "read-only"
        )
        system = (await ok(client, "get_context", thread_id="t1"))["system_text"]
        assert "read-only" in system and "update_working_memory" not in system
        assert FILLED in system
        assert (await read_json(client, "om://threads/t1/working-memory"))["read_only"] is True
        assert await call(client, "get_working_memory", thread_id="t1") == FILLED


@ERAS
async def test_schema_working_memory_merges_and_validates(make_server, mode):
    server = make_server(working_memory={"schema": PROFILE_SCHEMA})
    async with connect(server, mode) as client:
        await ok(client, "append_messages", thread_id="t1", messages=[msg("m1", "hi")])
        assert await ok(client, "get_working_memory", thread_id="t1") == {}

        await ok(
            client,
            "update_working_memory",
            thread_id="t1",
            memory={"name": "Ada", "prefs": {"theme": "dark"}, "tags": ["a", "b"]},
        )
        merged = await ok(client, "update_working_memory", thread_id="t1", memory={"prefs": {"size": 3}, "tags": ["c"]})
        assert merged == {"updated": True}
        assert await ok(client, "get_working_memory", thread_id="t1") == {
            "name": "Ada",
            "prefs": {"theme": "dark", "size": 3},
            "tags": ["c"],
        }
        # JSON text works as well as an object; null deletes
        await ok(client, "update_working_memory", thread_id="t1", memory='{"name": null}')
        expected = {"prefs": {"theme": "dark", "size": 3}, "tags": ["c"]}
        assert await ok(client, "get_working_memory", thread_id="t1") == expected

        one_line_naming(
            await fail(client, "update_working_memory", thread_id="t1", memory={"prefs": {"size": "big"}}),
            "memory.prefs.size",
        )
        one_line_naming(
            await fail(client, "update_working_memory", thread_id="t1", memory={"tags": [1]}), "memory.tags[0]"
        )
        one_line_naming(
            await fail(client, "update_working_memory", thread_id="t1", memory="{not json"), "memory", "JSON"
        )
        assert await ok(client, "get_working_memory", thread_id="t1") == expected
        assert (await read_json(client, "om://resources/default/working-memory"))["memory"] == expected
        system = (await ok(client, "get_context", thread_id="t1"))["system_text"]
        assert system.count("<working-memory>") == 1 and '"theme":"dark"' in system and "<schema>" in system


@ERAS
async def test_working_memory_seeded_from_thread_metadata(server, mode):
    seed = "# About the User\n- First name: Bo"
    async with connect(server, mode) as client:
        await ok(
            client,
            "append_messages",
            thread_id="t1",
            messages=[msg("m1", "hi")],
            thread_metadata={"working_memory": seed},
        )
        assert await call(client, "get_working_memory", thread_id="t1") == seed
        # only the append that creates the thread seeds
        await ok(
            client,
            "append_messages",
            thread_id="t1",
            messages=[msg("m2", "hi")],
            thread_metadata={"working_memory": "# About the User\n- First name: Other"},
        )
        assert await call(client, "get_working_memory", thread_id="t1") == seed
        # a new thread of the same resource never erases what the resource already holds
        await ok(
            client,
            "append_messages",
            thread_id="t2",
            messages=[msg("m3", "hi")],
            thread_metadata={"working_memory": "# About the User\n- First name: Cy"},
        )
        assert await call(client, "get_working_memory", thread_id="t2") == seed
        # but it fills a resource that holds nothing yet
        await ok(
            client,
            "append_messages",
            thread_id="t3",
            resource_id="fresh",
            messages=[msg("m4", "hi")],
            thread_metadata={"working_memory": "# About the User\n- First name: Di"},
        )
        assert await call(client, "get_working_memory", thread_id="t3") == "# About the User\n- First name: Di"


async def test_invalid_seed_writes_nothing(make_server):
    server = make_server(working_memory={"schema": PROFILE_SCHEMA})
    async with connect(server) as client:
        text = await fail(
            client,
            "append_messages",
            thread_id="t1",
            messages=[msg("m1", "hi")],
            thread_metadata={"working_memory": {"prefs": {"size": "big"}}},
        )
        one_line_naming(text, "thread_metadata.working_memory", "size")
        assert await read_json(client, "om://resources/default/threads") == []
        assert (await read_json(client, "om://resources/default/working-memory"))["memory"] is None
        await ok(
            client,
            "append_messages",
            thread_id="t1",
            messages=[msg("m1", "hi")],
            thread_metadata={"working_memory": {"name": "Ada"}},
        )
        assert await ok(client, "get_working_memory", thread_id="t1") == {"name": "Ada"}
