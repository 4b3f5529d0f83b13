"""Every tool and resource through an in-process MCP client (`Client(build_server(config))`).

Core cases run in both protocol eras: "auto" lands on 2026-07-28, "legacy"
runs the 2025-11-25 initialize handshake.
"""

from __future__ import annotations

import json
import re
import sqlite3
from datetime import datetime, timedelta, timezone

import pytest
from mcp.shared.exceptions import MCPError

from conftest import connect, fail, ok
from om_mcp.engine.tokens import get_token_counter
from om_mcp.engine.working_memory import DEFAULT_TEMPLATE

pytestmark = pytest.mark.anyio

ERAS = pytest.mark.parametrize("mode", ["auto", "legacy"])

TOOLS = {
    "append_messages", "get_context", "recall", "get_working_memory", "update_working_memory",
    "update_thread", "delete_thread",
}

PROFILE_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "prefs": {
            "type": "object",
            "properties": {"theme": {"type": "string"}, "size": {"type": "integer"}},
        },
        "tags": {"type": "array", "items": {"type": "string"}},
    },
}


def msg(id: str, content, role: str = "user", **extra):
    return {"id": id, "role": role, "content": content, **extra}


def ids(recall_out: dict) -> list[str]:
    return [m["id"] for m in recall_out["messages"]]


async def read_json(client, uri: str):
    result = await client.read_resource(uri)
    assert len(result.contents) == 1
    return json.loads(result.contents[0].text)


# -- discovery -------------------------------------------------------------------


@ERAS
async def test_every_tool_has_annotations(server, mode):
    async with connect(server, mode) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert TOOLS <= set(tools)
    for tool in tools.values():
        assert tool.annotations is not None, tool.name
        assert tool.annotations.read_only_hint is not None, tool.name
        assert tool.annotations.destructive_hint is not None, tool.name
        assert tool.output_schema is not None, tool.name
        assert tool.description, tool.name
    for name in TOOLS:
        assert tools[name].annotations.open_world_hint is False, name
    for name in ("get_context", "recall", "get_working_memory"):
        assert tools[name].annotations.read_only_hint is True, name
        assert tools[name].annotations.destructive_hint is False, name
    for name in ("append_messages", "update_working_memory", "update_thread", "delete_thread"):
        assert tools[name].annotations.read_only_hint is False, name
    assert tools["append_messages"].annotations.idempotent_hint is True
    assert tools["append_messages"].annotations.destructive_hint is False
    assert tools["delete_thread"].annotations.destructive_hint is True
    assert tools["delete_thread"].annotations.idempotent_hint is False


@ERAS
async def test_resource_templates_listed(server, mode):
    async with connect(server, mode) as client:
        templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
    assert templates >= {
        "om://resources/{resource_id}/threads",
        "om://threads/{thread_id}/messages",
        "om://resources/{resource_id}/working-memory",
        "om://threads/{thread_id}/working-memory",
    }


# -- append and context ------------------------------------------------------------


@ERAS
async def test_append_then_get_context(server, mode):
    async with connect(server, mode) as client:
        out = await ok(client, "append_messages", thread_id="t1", messages=[
            msg("m1", "I live in Lisbon and work as a baker."),
            msg("m2", "Nice, noted.", role="assistant"),
        ])
        assert out["appended"] == 2
        assert out["skipped_duplicates"] == 0
        assert out["thread_id"] == "t1"
        assert out["resource_id"] == "default"
        assert out["thread_created"] is True
        assert out["status"]["message_count"] == 2

        context = await ok(client, "get_context", thread_id="t1")
        assert [m["id"] for m in context["messages"]] == ["m1", "m2"]
        assert context["messages"][0]["parts"] == [{"type": "text", "text": "I live in Lisbon and work as a baker."}]
        assert context["messages"][1]["role"] == "assistant"
        assert context["truncated"] is False
        assert context["omitted_messages"] == 0
        assert "working_memory" in context["system_text"]  # the working memory block is in the system text
        assert context["status"]["message_count"] == 2

        more = await ok(client, "append_messages", thread_id="t1", messages=[msg("m3", "And I bake sourdough.")])
        assert more["thread_created"] is False
        assert more["status"]["message_count"] == 3


@ERAS
async def test_resend_is_idempotent_and_counted(server, mode):
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
        assert "'a'" in await fail(client, "append_messages", thread_id="t1", messages=[msg("d", "new"), moved])
        page = await ok(client, "recall", thread_id="t1", limit=50)
    assert (first["appended"], first["skipped_duplicates"]) == (2, 0)
    assert (again["appended"], again["skipped_duplicates"]) == (0, 2)
    assert (mixed["appended"], mixed["skipped_duplicates"]) == (1, 2)
    assert ids(page) == ["a", "b", "c"]


async def test_resend_without_timestamp_is_idempotent(server):
    """A client that never sends created_at must be able to retry a batch: the
    server-filled time must not make the re-sent message look different."""
    batch = [msg("a", "first"), msg("b", [{"type": "text", "text": "second"}], role="assistant")]
    async with connect(server) as client:
        first = await ok(client, "append_messages", thread_id="t1", messages=batch)
        again = await ok(client, "append_messages", thread_id="t1", messages=batch)
        page = await ok(client, "recall", thread_id="t1")
    assert (first["appended"], first["skipped_duplicates"]) == (2, 0)
    assert (again["appended"], again["skipped_duplicates"]) == (0, 2)
    assert ids(page) == ["a", "b"]


async def test_missing_id_and_timestamp_are_filled_in(server):
    before = datetime.now(timezone.utc) - timedelta(seconds=5)
    async with connect(server) as client:
        await ok(client, "append_messages", thread_id="t1", messages=[{"role": "user", "content": "no id here"}])
        await ok(client, "append_messages", thread_id="t1", messages=[{"role": "user", "content": "nor here"}])
        context = await ok(client, "get_context", thread_id="t1")
    first, second = context["messages"]
    assert first["id"] and second["id"] and first["id"] != second["id"]
    stamp = datetime.fromisoformat(first["created_at"])
    assert stamp.utcoffset() == timedelta(0)
    assert before <= stamp <= datetime.now(timezone.utc) + timedelta(seconds=5)


@ERAS
async def test_time_zone_is_kept(server, mode):
    async with connect(server, mode) as client:
        await ok(client, "append_messages", thread_id="t1", messages=[
            msg("m1", "morning in Berlin", created_at="2024-05-01T10:00:00+02:00"),
            msg("m2", "evening in New York", created_at="2024-05-01T19:30:00-04:00"),
        ])
        context = await ok(client, "get_context", thread_id="t1")
        page = await ok(client, "recall", thread_id="t1")
        resource = await read_json(client, "om://threads/t1/messages")
    stamps = [m["created_at"] for m in context["messages"]]
    assert stamps == ["2024-05-01T10:00:00+02:00", "2024-05-01T19:30:00-04:00"]
    assert [m["created_at"] for m in page["messages"]] == stamps
    assert [m["created_at"] for m in resource["messages"]] == stamps


# -- input errors ---------------------------------------------------------------------


@ERAS
async def test_invalid_messages_are_rejected_and_nothing_is_written(make_server, mode):
    server = make_server(max_message_chars=200)
    async with connect(server, mode) as client:
        assert "role" in await fail(client, "append_messages", thread_id="t1", messages=[msg("m1", "x", role="robot")])
        text = await fail(client, "append_messages", thread_id="t1", messages=[msg("m1", "x", created_at="last tuesday")])
        assert "created_at" in text
        assert "messages" in await fail(client, "append_messages", thread_id="t1", messages=[])
        text = await fail(client, "append_messages", thread_id="t1", messages=[msg("m1", "y" * 500)])
        assert "messages[0]" in text and "200" in text
        # an oversized message later in the batch sinks the whole batch
        text = await fail(client, "append_messages", thread_id="t1", messages=[msg("ok", "fine"), msg("big", "z" * 500)])
        assert "messages[1]" in text
        text = await fail(client, "append_messages", thread_id="t1",
                          messages=[msg("m1", [{"type": "hologram", "text": "x"}])])
        assert "messages" in text
        assert await read_json(client, "om://resources/default/threads") == []


@ERAS
async def test_duplicate_id_with_other_content_leaves_batch_unwritten(server, mode):
    async with connect(server, mode) as client:
        await ok(client, "append_messages", thread_id="t1", messages=[msg("m1", "original")])
        text = await fail(client, "append_messages", thread_id="t1", messages=[
            msg("m2", "new one"), msg("m1", "rewritten"), msg("m3", "another new one"),
        ])
        assert "m1" in text
        text = await fail(client, "append_messages", thread_id="t1", messages=[msg("x", "one"), msg("x", "two")])
        assert "'x'" in text
        page = await ok(client, "recall", thread_id="t1", limit=50)
        context = await ok(client, "get_context", thread_id="t1")
    assert ids(page) == ["m1"]
    assert context["messages"][0]["parts"][0]["text"] == "original"
    assert context["status"]["message_count"] == 1


@ERAS
async def test_thread_belongs_to_one_resource(server, mode):
    async with connect(server, mode) as client:
        await ok(client, "append_messages", thread_id="t1", resource_id="alice", messages=[msg("m1", "hi")])
        text = await fail(client, "append_messages", thread_id="t1", resource_id="bob", messages=[msg("m2", "hi")])
        assert "alice" in text and "bob" in text
        assert "alice" in await fail(client, "get_context", thread_id="t1", resource_id="bob")
        # without a resource id the thread's own resource is used
        out = await ok(client, "append_messages", thread_id="t1", messages=[msg("m2", "again")])
        assert out["resource_id"] == "alice"
        assert (await ok(client, "get_context", thread_id="t1"))["resource_id"] == "alice"
        assert [t["id"] for t in await read_json(client, "om://resources/alice/threads")] == ["t1"]
        assert await read_json(client, "om://resources/bob/threads") == []


@ERAS
async def test_unknown_thread_is_an_error(server, mode):
    async with connect(server, mode) as client:
        await ok(client, "append_messages", thread_id="real", messages=[msg("m1", "hello")])
        assert "nope" in await fail(client, "recall", thread_id="nope")
        assert "nope" in await fail(client, "update_thread", thread_id="nope", title="x")
        assert "nope" in await fail(client, "delete_thread", thread_id="nope")
        assert "nope" in await fail(client, "recall", thread_id="real", target_thread_id="nope")
        assert "ghost" in await fail(client, "recall", thread_id="real", cursor="ghost")
        for uri in ("om://threads/nope/messages", "om://threads/nope/working-memory"):
            with pytest.raises(MCPError, match="nope"):
                await client.read_resource(uri)


async def test_argument_bounds_are_enforced(server):
    async with connect(server) as client:
        await ok(client, "append_messages", thread_id="t1", messages=[msg("m1", "hello")])
        assert "max_tokens" in await fail(client, "get_context", thread_id="t1", max_tokens=5)
        assert "limit" in await fail(client, "recall", thread_id="t1", limit=0)
        assert "mode" in await fail(client, "recall", thread_id="t1", mode="everything")
        assert "query" in await fail(client, "recall", thread_id="t1", mode="search")
        assert "thread_id" in await fail(client, "get_context", thread_id="")


# -- recall: messages ----------------------------------------------------------------


@ERAS
async def test_recall_pages_from_cursor_and_anchor(server, mode):
    async with connect(server, mode) as client:
        await ok(client, "append_messages", thread_id="t1",
                 messages=[msg(f"m{i}", f"message number {i}") for i in range(10)])

        first = await ok(client, "recall", thread_id="t1", limit=3)
        assert ids(first) == ["m0", "m1", "m2"]
        assert (first["has_prev_page"], first["has_next_page"]) == (False, True)

        last = await ok(client, "recall", thread_id="t1", anchor="end", limit=3)
        assert ids(last) == ["m7", "m8", "m9"]
        assert (last["has_prev_page"], last["has_next_page"]) == (True, False)

        # the cursor message itself is part of page 1 and of page -1
        forward = await ok(client, "recall", thread_id="t1", cursor="m5", page=1, limit=3)
        assert ids(forward) == ["m5", "m6", "m7"]
        assert (await ok(client, "recall", thread_id="t1", cursor="m5", page=2, limit=3))["messages"][0]["id"] == "m8"

        back = await ok(client, "recall", thread_id="t1", cursor="m5", page=-1, limit=3)
        assert ids(back) == ["m3", "m4", "m5"]
        assert back["has_prev_page"] is True
        back2 = await ok(client, "recall", thread_id="t1", cursor="m5", page=-2, limit=3)
        assert ids(back2) == ["m0", "m1", "m2"]
        assert back2["has_prev_page"] is False

        # the last page from the end, then paging backward from its first message
        back_from_end = await ok(client, "recall", thread_id="t1", cursor=ids(last)[0], page=-1, limit=3)
        assert ids(back_from_end) == ["m5", "m6", "m7"]

        # the whole thread, read in pages forward from the start, is complete and in order
        seen, cursor = [], None
        for _ in range(10):
            args = {"cursor": cursor} if cursor else {}
            page = await ok(client, "recall", thread_id="t1", limit=4, **args)
            seen += ids(page)
            if not page["has_next_page"]:
                break
            cursor, seen = ids(page)[-1], seen[:-1]  # the cursor message opens the next page
        assert seen == [f"m{i}" for i in range(10)]


@ERAS
async def test_low_detail_clips_and_high_detail_continues(server, mode):
    words = " ".join(f"w{i:05d}" for i in range(3500))  # 24,499 characters, one part
    async with connect(server, mode) as client:
        await ok(client, "append_messages", thread_id="t1",
                 messages=[msg("long", [{"type": "text", "text": words}], role="assistant"), msg("after", "short")])

        low = await ok(client, "recall", thread_id="t1")
        line = low["messages"][0]["parts"][0]
        assert len(line) < len(words) // 10
        assert 'cursor="long"' in line and "part_index=0" in line and 'detail="high"' in line
        assert low["messages"][1]["parts"] == ["[p0] short"]

        pieces, offset, calls = [], 0, 0
        while True:
            calls += 1
            high = await ok(client, "recall", thread_id="t1", cursor="long", part_index=0, char_offset=offset,
                            detail="high")
            assert high["detail"] == "high"
            assert high["part_index"] == 0
            pieces.append(re.sub(r"^\[p0[^\]]*\] ", "", high["messages"][0]["parts"][0]))
            if high["next_char_offset"] is None:
                assert "next message" in high["text"]
                break
            assert high["next_char_offset"] > offset
            assert f"char_offset={high['next_char_offset']}" in high["text"]
            offset = high["next_char_offset"]
        assert calls > 1
        assert "".join(pieces) == words


@ERAS
async def test_recall_filters_by_part_type_and_tool_name(server, mode):
    async with connect(server, mode) as client:
        await ok(client, "append_messages", thread_id="t1", messages=[
            msg("u1", "find me flights to Oslo"),
            msg("c1", [{"type": "text", "text": "Searching."},
                       {"type": "tool-call", "tool_name": "search_web", "args": {"q": "Oslo flights"},
                        "tool_call_id": "call1"}], role="assistant"),
            msg("r1", [{"type": "tool-result", "tool_name": "search_web", "result": {"hits": 3},
                        "tool_call_id": "call1"}], role="tool"),
            msg("c2", [{"type": "tool-call", "tool_name": "calculator", "args": {"expr": "2+2"}}], role="assistant"),
            msg("a1", [{"type": "reasoning", "text": "cheapest is Tuesday"}, {"type": "text", "text": "Tuesday."}],
                role="assistant"),
        ])
        calls = await ok(client, "recall", thread_id="t1", part_type="tool-call")
        assert ids(calls) == ["c1", "c2"]
        assert calls["messages"][0]["parts"] == [calls["messages"][0]["parts"][0]]  # only the matching part
        assert "search_web" in calls["messages"][0]["parts"][0]

        assert ids(await ok(client, "recall", thread_id="t1", tool_name="search_web")) == ["c1", "r1"]
        assert ids(await ok(client, "recall", thread_id="t1", part_type="tool-call", tool_name="calculator")) == ["c2"]
        reasoning = await ok(client, "recall", thread_id="t1", part_type="reasoning")
        assert ids(reasoning) == ["a1"]
        assert len(reasoning["messages"][0]["parts"]) == 1 and "cheapest" in reasoning["messages"][0]["parts"][0]
        assert (await ok(client, "recall", thread_id="t1", part_type="image"))["messages"] == []


# -- recall: threads ------------------------------------------------------------------


@ERAS
async def test_threads_listing(server, mode):
    async with connect(server, mode) as client:
        for name in ("old", "mid", "new"):
            await ok(client, "append_messages", thread_id=name, resource_id="r", messages=[msg(f"{name}-1", name)])
        await ok(client, "append_messages", thread_id="elsewhere", resource_id="other", messages=[msg("e", "e")])

        listing = await ok(client, "recall", thread_id="mid", mode="threads")
        assert [t["id"] for t in listing["threads"]] == ["new", "mid", "old"]
        assert [t["current"] for t in listing["threads"]] == [False, True, False]
        assert "current" in listing["text"]
        assert all(t["message_count"] == 1 for t in listing["threads"])

        created = {t["id"]: t["created_at"] for t in listing["threads"]}
        after = await ok(client, "recall", thread_id="mid", mode="threads", after=created["mid"])
        assert [t["id"] for t in after["threads"]] == ["new"]
        before = await ok(client, "recall", thread_id="mid", mode="threads", before=created["mid"])
        assert [t["id"] for t in before["threads"]] == ["old"]
        future = (datetime.now(timezone.utc) + timedelta(days=1)).date().isoformat()
        assert len((await ok(client, "recall", thread_id="mid", mode="threads", before=future))["threads"]) == 3

        paged = await ok(client, "recall", thread_id="mid", mode="threads", limit=2)
        assert [t["id"] for t in paged["threads"]] == ["new", "mid"] and paged["has_next_page"] is True
        page2 = await ok(client, "recall", thread_id="mid", mode="threads", limit=2, page=2)
        assert [t["id"] for t in page2["threads"]] == ["old"] and page2["has_next_page"] is False

        assert "before" in await fail(client, "recall", thread_id="mid", mode="threads", before="not-a-date")
        assert "after" in await fail(client, "recall", thread_id="mid", mode="threads", after="2024-13-45")


# -- recall: search ------------------------------------------------------------------


@ERAS
async def test_search_ranks_the_more_relevant_message_first(server, mode):
    async with connect(server, mode) as client:
        await ok(client, "append_messages", thread_id="t1", messages=[
            msg("weak", "The database was slow yesterday, and lunch was late as well today."),
            msg("noise", "We talked about the weather and a walk in the park."),
            msg("strong", "The database migration failed: the migration script hit a database lock."),
        ])
        await ok(client, "append_messages", thread_id="t2", messages=[msg("other", "unrelated gardening notes")])
        await ok(client, "append_messages", thread_id="x", resource_id="someone-else",
                 messages=[msg("foreign", "database migration database migration")])

        found = await ok(client, "recall", thread_id="t2", mode="search", query="database migration")
        hits = [r["message_id"] for r in found["results"]]
        # Ranked; no foreign resource. "noise" may follow: it is indexed with the
        # message before it, which mentions the database.
        assert hits[:2] == ["strong", "weak"] and set(hits) <= {"strong", "weak", "noise"}
        assert found["results"][0]["score"] > found["results"][1]["score"]
        assert found["results"][0]["thread_id"] == "t1"
        assert "migration" in found["results"][0]["snippet"]

        scoped = await ok(client, "recall", thread_id="t2", mode="search", query="database migration", scope="thread")
        assert scoped["results"] == []
        scoped = await ok(client, "recall", thread_id="t1", mode="search", query="database", scope="thread")
        assert {"strong", "weak"} <= {r["message_id"] for r in scoped["results"]} <= {"strong", "weak", "noise"}

        # the search hint leads to recall around the match
        around = await ok(client, "recall", thread_id="t2", cursor="strong", page=-1)
        assert ids(around) == ["weak", "noise", "strong"]


@ERAS
async def test_search_accepts_any_query(server, mode):
    awkward = ['"', '""', "AND OR NOT", "NEAR(", "NEAR(a b", "col:x", "body:", "*", "-", "^", "(", ")",
               "a OR", "🙂🎉", "the and of to", "'", "'); DROP TABLE messages; --", "\x00", "∑∫≈"]
    async with connect(server, mode) as client:
        await ok(client, "append_messages", thread_id="t1", messages=[msg("m1", "The database migration failed")])
        for query in awkward:
            out = await ok(client, "recall", thread_id="t1", mode="search", query=query)
            assert out["results"] == [], query
        for query in ['database"', "body:database", "database*", "NEAR(database", "(migration)", "-database"]:
            out = await ok(client, "recall", thread_id="t1", mode="search", query=query)
            assert [r["message_id"] for r in out["results"]] == ["m1"], query
        stop_words = await ok(client, "recall", thread_id="t1", mode="search", query="the and of to")
        assert "no searchable words" in stop_words["text"]
        assert (await ok(client, "get_context", thread_id="t1"))["status"]["message_count"] == 1


# -- output budget ---------------------------------------------------------------------


async def test_outputs_respect_the_token_budget(make_server):
    counter = get_token_counter()
    budget = 500
    server = make_server(output_token_budget=budget)
    sentence = "Deployment notes for the quarterly release of the billing service, kept for reference. "
    async with connect(server) as client:
        for batch in range(4):
            await ok(client, "append_messages", thread_id="t1", messages=[
                msg(f"m{batch * 10 + i}", f"{sentence * 6} item {batch * 10 + i}", role="assistant")
                for i in range(10)
            ])

        page = await ok(client, "recall", thread_id="t1", limit=20)
        assert page["truncated"] is True
        assert 0 < page["count"] < 20
        assert page["has_next_page"] is True
        last = ids(page)[-1]
        next_id = f"m{int(last[1:]) + 1}"
        assert f"cursor={next_id!r}" in page["text"]
        assert counter.count_text(page["text"]) <= budget + 50
        # the hint's cursor continues exactly where the page stopped
        following = await ok(client, "recall", thread_id="t1", cursor=next_id, limit=20)
        assert ids(following)[0] == next_id

        found = await ok(client, "recall", thread_id="t1", mode="search", query="billing deployment", limit=20)
        assert found["truncated"] is True
        assert 0 < found["count"] < 20
        assert counter.count_text(found["text"]) <= budget + 50

        context = await ok(client, "get_context", thread_id="t1")
        assert context["truncated"] is True and context["omitted_messages"] > 0
        assert context["messages"][-1]["id"] == "m39"  # the newest messages are kept
        small = await ok(client, "get_context", thread_id="t1", max_tokens=300)
        assert len(small["messages"]) < len(context["messages"])
        assert small["omitted_messages"] == 40 - len(small["messages"])


# -- threads: update and delete ----------------------------------------------------------


@ERAS
async def test_update_thread(server, mode):
    async with connect(server, mode) as client:
        await ok(client, "append_messages", thread_id="t1", messages=[msg("m1", "hi")],
                 thread_metadata={"title": "First title", "project": "apollo", "tag": "x"})
        listing = await ok(client, "recall", thread_id="t1", mode="threads")
        assert listing["threads"][0]["title"] == "First title"

        out = await ok(client, "update_thread", thread_id="t1", title="Renamed", metadata={"tag": None, "owner": "ann"})
        assert out["id"] == "t1" and out["title"] == "Renamed"
        assert out["metadata"]["project"] == "apollo"
        assert out["metadata"]["owner"] == "ann"
        assert "tag" not in out["metadata"]
        threads = await read_json(client, "om://resources/default/threads")
        assert threads[0]["title"] == "Renamed"
        assert "blank" in await fail(client, "update_thread", thread_id="t1", title="   ")


@ERAS
async def test_delete_thread_leaves_nothing_findable(make_server, db_path, mode):
    server = make_server(working_memory={"scope": "thread"})
    async with connect(server, mode) as client:
        await ok(client, "append_messages", thread_id="doomed", messages=[
            msg("d1", "the zebracorn password is hunter2"), msg("d2", "zebracorn again", role="assistant"),
        ])
        await ok(client, "append_messages", thread_id="keep", messages=[msg("k1", "a zebracorn sighting")])
        await ok(client, "update_working_memory", thread_id="doomed", memory="# About the User\n- Facts: zebracorn")
        found = await ok(client, "recall", thread_id="keep", mode="search", query="zebracorn")
        assert {r["message_id"] for r in found["results"]} == {"d1", "d2", "k1"}

        out = await ok(client, "delete_thread", thread_id="doomed")
        assert out == {"thread_id": "doomed", "deleted_messages": 2}

        found = await ok(client, "recall", thread_id="keep", mode="search", query="zebracorn hunter2")
        assert [r["message_id"] for r in found["results"]] == ["k1"]
        assert "doomed" in await fail(client, "recall", thread_id="doomed")
        assert "doomed" in await fail(client, "recall", thread_id="keep", target_thread_id="doomed")
        assert "d1" in await fail(client, "recall", thread_id="keep", cursor="d1")
        assert "doomed" in await fail(client, "delete_thread", thread_id="doomed")
        threads = await ok(client, "recall", thread_id="keep", mode="threads")
        assert [t["id"] for t in threads["threads"]] == ["keep"]
        with pytest.raises(MCPError):
            await client.read_resource("om://threads/doomed/working-memory")

        # a new thread with the same id starts empty: no messages, fresh working memory
        await ok(client, "append_messages", thread_id="doomed", messages=[msg("n1", "fresh start")])
        assert ids(await ok(client, "recall", thread_id="doomed")) == ["n1"]
        assert (await ok(client, "get_working_memory", thread_id="doomed"))["memory"] == DEFAULT_TEMPLATE

    with sqlite3.connect(db_path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM messages_fts WHERE messages_fts MATCH 'hunter2'").fetchone()[0] == 0
        rows = conn.execute("SELECT COUNT(*) FROM messages_fts").fetchone()[0]
        assert rows == conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 2
        assert conn.execute("SELECT COUNT(*) FROM messages WHERE id IN ('d1', 'd2')").fetchone()[0] == 0


# -- working memory -----------------------------------------------------------------------


FILLED = "# About the User\n- First name: Ada\n- Location: London\n- Interests: engines"


@ERAS
async def test_template_working_memory(server, mode):
    async with connect(server, mode) as client:
        await ok(client, "append_messages", thread_id="t1", messages=[msg("m1", "I'm Ada from London")])
        fresh = await ok(client, "get_working_memory", thread_id="t1")
        assert fresh["mode"] == "template" and fresh["scope"] == "resource"
        assert fresh["memory"] == DEFAULT_TEMPLATE == fresh["template"]

        written = await ok(client, "update_working_memory", thread_id="t1", memory=FILLED)
        assert written["updated"] is True and written["memory"] == FILLED

        refused = await ok(client, "update_working_memory", thread_id="t1", memory=DEFAULT_TEMPLATE)
        assert refused["updated"] is False
        assert refused["notice"] and "template" in refused["notice"]
        assert (await ok(client, "get_working_memory", thread_id="t1"))["memory"] == FILLED

        # resource scope: another thread of the resource sees the same memory
        await ok(client, "append_messages", thread_id="t2", messages=[msg("m2", "hello again")])
        assert (await ok(client, "get_working_memory", thread_id="t2"))["memory"] == FILLED
        assert "Ada" in (await ok(client, "get_context", thread_id="t2"))["system_text"]
        assert (await read_json(client, "om://resources/default/working-memory"))["memory"] == FILLED
        assert (await read_json(client, "om://threads/t2/working-memory"))["memory"] == FILLED

        text = await fail(client, "update_working_memory", thread_id="t1", memory="# wiped", read_only=True)
        assert "read-only" in text
        assert (await ok(client, "get_working_memory", thread_id="t1"))["memory"] == FILLED

        assert "string" in await fail(client, "update_working_memory", thread_id="t1", memory={"name": "Ada"})


async def test_read_only_working_memory_from_config(make_server):
    writable = make_server()
    async with connect(writable) as client:
        await ok(client, "append_messages", thread_id="t1", messages=[msg("m1", "hi")])
        await ok(client, "update_working_memory", thread_id="t1", memory=FILLED)
    locked = make_server(working_memory={"read_only": True})
    async with connect(locked) as client:
        view = await ok(client, "get_working_memory", thread_id="t1")
        assert view["read_only"] is True and view["memory"] == FILLED
        assert "read-only" in await fail(client, "update_working_memory", thread_id="t1", memory="# other")
        assert "read-only" in await fail(client, "update_working_memory", thread_id="t1", memory="# x", read_only=False)
        assert "read-only" in (await ok(client, "get_context", thread_id="t1"))["system_text"]
        assert (await ok(client, "get_working_memory", thread_id="t1"))["memory"] == FILLED


@ERAS
async def test_schema_working_memory_merges_and_validates(make_server, mode):
    server = make_server(working_memory={"schema": PROFILE_SCHEMA})
    async with connect(server, mode) as client:
        await ok(client, "append_messages", thread_id="t1", messages=[msg("m1", "hi")])
        fresh = await ok(client, "get_working_memory", thread_id="t1")
        assert fresh["mode"] == "schema" and fresh["memory"] == {} and fresh["schema"] == PROFILE_SCHEMA

        await ok(client, "update_working_memory", thread_id="t1",
                 memory={"name": "Ada", "prefs": {"theme": "dark"}, "tags": ["a", "b"]})
        merged = await ok(client, "update_working_memory", thread_id="t1", memory={"prefs": {"size": 3}, "tags": ["c"]})
        assert merged["memory"] == {"name": "Ada", "prefs": {"theme": "dark", "size": 3}, "tags": ["c"]}
        deleted = await ok(client, "update_working_memory", thread_id="t1", memory={"name": None})
        assert deleted["memory"] == {"prefs": {"theme": "dark", "size": 3}, "tags": ["c"]}

        text = await fail(client, "update_working_memory", thread_id="t1", memory={"prefs": {"size": "big"}})
        assert "memory.prefs.size" in text
        text = await fail(client, "update_working_memory", thread_id="t1", memory={"tags": [1]})
        assert "memory.tags[0]" in text
        assert "JSON" in await fail(client, "update_working_memory", thread_id="t1", memory="{not json")
        after = await ok(client, "get_working_memory", thread_id="t1")
        assert after["memory"] == {"prefs": {"theme": "dark", "size": 3}, "tags": ["c"]}
        assert (await read_json(client, "om://resources/default/working-memory"))["memory"] == after["memory"]


@ERAS
async def test_working_memory_seeded_from_thread_metadata(server, mode):
    seed = "# About the User\n- First name: Bo"
    async with connect(server, mode) as client:
        await ok(client, "append_messages", thread_id="t1", messages=[msg("m1", "hi")],
                 thread_metadata={"working_memory": seed})
        assert (await ok(client, "get_working_memory", thread_id="t1"))["memory"] == seed
        # only the first append (the one creating the thread) seeds
        await ok(client, "append_messages", thread_id="t1", messages=[msg("m2", "hi")],
                 thread_metadata={"working_memory": "# About the User\n- First name: Other"})
        assert (await ok(client, "get_working_memory", thread_id="t1"))["memory"] == seed
        # a new thread of the same resource never erases what the resource already holds
        await ok(client, "append_messages", thread_id="t2", messages=[msg("m3", "hi")],
                 thread_metadata={"working_memory": "# About the User\n- First name: Cy"})
        assert (await ok(client, "get_working_memory", thread_id="t2"))["memory"] == seed


async def test_invalid_seed_in_schema_mode_writes_nothing(make_server):
    server = make_server(working_memory={"schema": PROFILE_SCHEMA})
    async with connect(server) as client:
        text = await fail(client, "append_messages", thread_id="t1", messages=[msg("m1", "hi")],
                          thread_metadata={"working_memory": {"prefs": {"size": "big"}}})
        assert "working_memory" in text
        assert await read_json(client, "om://resources/default/threads") == []
        await ok(client, "append_messages", thread_id="t1", messages=[msg("m1", "hi")],
                 thread_metadata={"working_memory": {"name": "Ada"}})
        assert (await ok(client, "get_working_memory", thread_id="t1"))["memory"] == {"name": "Ada"}


# -- resources --------------------------------------------------------------------------


@ERAS
async def test_resources(server, mode):
    async with connect(server, mode) as client:
        await ok(client, "append_messages", thread_id="t1", resource_id="ann",
                 messages=[msg(f"m{i}", f"note {i}") for i in range(25)])
        await ok(client, "append_messages", thread_id="t2", resource_id="ann", messages=[msg("x", "other")])
        threads = await read_json(client, "om://resources/ann/threads")
        assert [t["id"] for t in threads] == ["t2", "t1"]
        assert {t["id"]: t["message_count"] for t in threads} == {"t1": 25, "t2": 1}
        recent = await read_json(client, "om://threads/t1/messages")
        assert [m["id"] for m in recent["messages"]] == [f"m{i}" for i in range(5, 25)]
        assert recent["has_prev_page"] is True
        wm_view = await read_json(client, "om://threads/t1/working-memory")
        assert wm_view["resource_id"] == "ann" and wm_view["memory"] == DEFAULT_TEMPLATE
        await ok(client, "update_working_memory", thread_id="t1", memory=FILLED)
        assert (await read_json(client, "om://resources/ann/working-memory"))["memory"] == FILLED
        assert (await read_json(client, "om://threads/t2/working-memory"))["memory"] == FILLED
        assert (await read_json(client, "om://resources/nobody/working-memory"))["memory"] is None
