"""Resource scope (several threads, batching, attribution, hashed ids), the
other-conversations block, isolation between resources, durable range pointers
through reflection, lexical search (context, dates, authors, escaping, scope)
and vector indexing with the deterministic hashing embedder.

Everything runs against `Memory` with a ScriptedModel; a few checks go through
the MCP server with `Client(build_server(config, memory=...))`.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from mcp import Client
from support.backends import location, rows, scalar
from support.engine import Memory, prompts, role_of, text_of
from support.timeouts import scaled

from om_mcp.config import Config
from om_mcp.engine import InputError, NotFound, RecallQuery
from om_mcp.engine.observation.resource import thread_label
from om_mcp.engine.observation.selection import batches
from om_mcp.engine.search import Retrieval
from om_mcp.models.embeddings import HashingEmbedder
from om_mcp.server import build_server
from om_mcp.testing import ScriptedModel

# On SQLite: what the engine relies on of each backend is tests/test_store_conformance.py's.
pytestmark = pytest.mark.anyio

HEX8 = re.compile(r"[0-9a-f]{8}")
SECTION = re.compile(r'<thread id="([^"]+)">\n(.*?)\n</thread>', re.S)
MSG_ID = re.compile(r"\b([A-Z]\d+)\b")
RANGE_LINE = re.compile(r"_range: `([^`:]+):([^`]+)`_")
OTHERS_BLOCK = re.compile(r"<other-conversations>\n(.*?)\n</other-conversations>", re.S)


# -- helpers ----------------------------------------------------------------------------

HEADER_ID = re.compile(r"^\*\*\w+ \([^)]*\)\*\* \[([^\]]+)\]:", re.M)


async def recall(memory: Memory, thread_id: str, **options: Any):
    return await memory.recall(RecallQuery(thread_id=thread_id, **options))


async def recall_ids(memory: Memory, thread_id: str, **options: Any) -> list[str]:
    """The message ids of a recall page, in order."""
    return HEADER_ID.findall((await recall(memory, thread_id, **options)).text)


async def search(memory: Memory, thread_id: str, resource_id: str, query: str, **options: Any):
    """Search results as data, with the recall tool's rendering of them (text, count)."""
    results = await memory.search(thread_id, query, resource_id=resource_id, **options)
    out = await recall(memory, thread_id, mode="search", resource_id=resource_id, query=query, **options)
    return SimpleNamespace(results=results, text=out.text, count=out.count, mode=out.mode)


def _merge(base: dict, extra: dict) -> dict:
    out = dict(base)
    for key, value in extra.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def make_config(*, scope: str = "thread", om: dict | None = None, **top: Any) -> Config:
    """No automatic observation (a huge threshold) and no buffering: tests observe explicitly."""
    data = {
        "observational_memory": {
            "scope": scope,
            "model": "default",
            "observation": {"buffer_tokens": False, "message_tokens": 1_000_000},
            "call_policy": {"backoff_initial_seconds": 0, "backoff_max_seconds": 0},
        }
    }
    data = _merge(data, {"observational_memory": om or {}})
    return Config.model_validate(_merge(data, top))


def observer_body(messages: list[dict]) -> str:
    """The Observer's conversation message (the last user message of the call)."""
    return text_of(messages[-1])


def sections(messages: list[dict]) -> dict[str, str]:
    """label -> transcript of each `<thread id>` section of an Observer call."""
    return {label: body for label, body in SECTION.findall(observer_body(messages))}


class MultiThreadObserver:
    """Answers a resource-scope Observer call thread by thread, naming the message
    ids it saw (ids are capital letter + digits inside the message text).

    Labels in `skip` get no section in the reply (the model "forgot" them)."""

    def __init__(self) -> None:
        self.skip: set[str] = set()
        self.observer_calls: list[dict[str, str]] = []
        self.reflector_calls: list[list[dict]] = []
        self.model = ScriptedModel(self._reply)

    def _reply(self, messages: list[dict], target) -> str:
        role = role_of(messages)
        if role == "reflector":
            self.reflector_calls.append(messages)
            return (
                "<observations>\nDate: Mar 2, 2026\n"
                "* 🔴 (10:00) reflected: the user has several projects\n</observations>"
            )
        assert role == "observer", role
        found = sections(messages)
        self.observer_calls.append(found)
        out = []
        for label, body in found.items():
            if label in self.skip:
                continue
            ids = " ".join(dict.fromkeys(MSG_ID.findall(body)))
            out.append(
                f'<thread id="{label}">\nDate: Mar 2, 2026\n* 🔴 (10:00) saw {ids}\n'
                f"<current-task>task of {label}</current-task>\n</thread>"
            )
        return "<observations>\n" + "\n".join(out) + "\n</observations>"


def single_thread_observer(messages: list[dict], target) -> str:
    role = role_of(messages)
    if role == "reflector":
        return "<observations>\nDate: Mar 2, 2026\n* 🔴 (10:00) reflected: everything so far\n</observations>"
    ids = " ".join(dict.fromkeys(re.findall(r"\bm\d+\b", observer_body(messages))))
    return f"<observations>\nDate: Mar 2, 2026\n* 🔴 (10:00) saw {ids}\n</observations>"


def say(id: str, text: str, role: str = "user", **extra: Any) -> dict:
    return {"id": id, "role": role, "content": text, **extra}


def words(n: int, word: str = "filler") -> str:
    return " ".join([word] * n)


async def thread_tokens(memory: Memory, thread_id: str) -> int:
    return sum(m.tokens for m in await memory.store.message_page(thread_id, limit=10_000))


async def count(memory: Memory, sql: str, params: tuple = ()) -> int:
    return await scalar(memory.store, sql, params)


def others_block(system_text: str) -> str:
    match = OTHERS_BLOCK.search(system_text)
    assert match, "no <other-conversations> block in the context"
    return match.group(1)


# -- 1. resource scope: batches, attribution, cursors, hashed ids ----------------------

RS_THREADS = {
    # thread id: (message ids, words per message); C is bigger than a whole batch
    "conv-apple": (["A1", "A2"], 12),
    "conv-birch": (["B1", "B2"], 12),
    "conv-cedar": (["C1", "C2"], 150),
    "conv-dune": (["D1", "D2"], 12),
    "conv-elm": (["E1", "E2"], 12),
}
BATCH_LIMIT = 100


async def _resource_memory(observer: MultiThreadObserver) -> Memory:
    cfg = make_config(scope="resource", om={"observation": {"max_tokens_per_batch": BATCH_LIMIT}})
    memory = await Memory.open(cfg, db_path=location(), client=observer.model)
    for tid, (ids, n) in RS_THREADS.items():
        for i, mid in enumerate(ids):
            role = "user" if i % 2 == 0 else "assistant"
            await memory.append_messages(tid, [say(mid, f"{mid} {words(n, 'note')}", role)], "u1")
    return memory


async def test_resource_scope_batches_attribution_cursors_and_hashed_ids():
    observer = MultiThreadObserver()
    memory = await _resource_memory(observer)
    try:
        assert observer.observer_calls == [], "nothing may be observed below the threshold"
        sizes = {tid: await thread_tokens(memory, tid) for tid in RS_THREADS}
        small = [t for t in sizes if t != "conv-cedar"]
        # the layout this test relies on: two small threads fit a batch, three do not, C is oversized
        assert all(2 * sizes[t] <= BATCH_LIMIT < 3 * sizes[t] for t in small), sizes
        assert sizes["conv-cedar"] > BATCH_LIMIT, sizes

        labels = {tid: thread_label(tid, True) for tid in RS_THREADS}
        assert all(HEX8.fullmatch(label) for label in labels.values()), labels
        assert len(set(labels.values())) == len(labels)
        observer.skip = {labels["conv-elm"]}

        outcome = await memory.observe("conv-apple", "u1")
        assert outcome.ran and outcome.error is None, outcome

        # one Observer call per batch, oldest-first greedy packing, C alone (then the manual
        # run tries the thread the model skipped once more, alone; its empty answer is asked
        # once more, for less, in the same call)
        elm = labels["conv-elm"]
        assert observer.observer_calls[3:4] == [{elm: observer.observer_calls[3][elm]}]
        assert len(observer.observer_calls) == 5
        seen = sorted(sorted(call) for call in observer.observer_calls[:3])
        expected = sorted(
            sorted(labels[t] for t in batch)
            for batch in [["conv-apple", "conv-birch"], ["conv-cedar"], ["conv-dune", "conv-elm"]]
        )
        assert seen == expected
        by_label = {v: k for k, v in labels.items()}
        for call in observer.observer_calls[:3]:
            tids = [by_label[label] for label in call]
            assert len(tids) == 1 or sum(sizes[t] for t in tids) <= BATCH_LIMIT, tids
            if "conv-cedar" in tids:
                assert tids == ["conv-cedar"], "an oversized thread gets its own batch"
            # each section holds exactly that thread's messages
            for label, body in call.items():
                assert MSG_ID.findall(body) == RS_THREADS[by_label[label]][0]

        # raw thread ids never reach the model
        for scripted in observer.model.calls:
            prompt = "\n".join(text_of(m) for m in scripted.messages)
            for tid in RS_THREADS:
                assert tid not in prompt, f"raw thread id {tid!r} leaked into the Observer prompt"

        # every observed thread has its own group, attributed to it, with its real range
        obs = await memory.observations("conv-apple", "u1")
        groups = {g["thread_id"]: g for g in obs["groups"]}
        assert set(groups) == {"conv-apple", "conv-birch", "conv-cedar", "conv-dune"}
        for tid, group in groups.items():
            ids = RS_THREADS[tid][0]
            assert group["range"] == f"{ids[0]}:{ids[-1]}"
            assert group["kind"] == "observation"
        texts = {g.thread_id: g.text for g in await memory.store.groups("resource:u1")}
        for tid, text in texts.items():
            assert all(mid in text for mid in RS_THREADS[tid][0]), (tid, text)
            assert not any(mid in text for other in RS_THREADS if other != tid for mid in RS_THREADS[other][0])

        # per-thread cursors: at each observed thread's last message; the skipped thread has none
        record = await memory.store.record("resource:u1")
        for tid in groups:
            last = (await memory.store.message_page(tid, limit=1000))[-1]
            assert record.cursors.get(tid) == last.seq, tid
        assert record.cursors.get("conv-elm", 0) == 0
        assert [m.id for m in await memory.store.unobserved("resource:u1", "conv-elm")] == ["E1", "E2"]
        assert await memory.store.unobserved("resource:u1", "conv-dune") == []

        # per-thread hints went to each thread, under its hashed label
        hints = await memory.store.thread_hints("resource:u1", ["conv-apple"])
        assert hints["conv-apple"].current_task == f"task of {labels['conv-apple']}"

        # get_context shows hashed ids, never the raw ones
        ctx = await memory.get_context("conv-apple", "u1")
        for tid in ("conv-apple", "conv-birch", "conv-cedar", "conv-dune"):
            assert f'<thread id="{labels[tid]}">' in ctx.system_text
        # the skipped thread is still raw: it shows in the other-conversations block
        assert f'<other-conversation id="{labels["conv-elm"]}">' in others_block(ctx.system_text)
        for tid in RS_THREADS:
            assert tid not in ctx.system_text

        # the skipped thread is retried on the next run, alone
        observer.skip = set()
        again = await memory.observe("conv-elm", "u1")
        assert again.ran, again
        assert observer.observer_calls[-1].keys() == {labels["conv-elm"]}
        assert await memory.store.unobserved("resource:u1", "conv-elm") == []
        final = await memory.observations("conv-apple", "u1")
        assert {g["thread_id"] for g in final["groups"]} == set(RS_THREADS)
    finally:
        await memory.close()


async def test_automatic_resource_observation_takes_largest_threads_until_threshold():
    observer = MultiThreadObserver()
    cfg = make_config(scope="resource", om={"observation": {"message_tokens": 300, "max_tokens_per_batch": 10_000}})
    memory = await Memory.open(cfg, db_path=location(), client=observer.model)
    try:
        await memory.append_messages("small", [say("S1", "S1 " + words(20, "tiny"))], "u1")
        await memory.append_messages("large", [say("L1", "L1 " + words(150, "huge"))], "u1")
        sizes = {t: await thread_tokens(memory, t) for t in ("small", "large")}
        assert observer.observer_calls == []
        # the third thread pushes the resource over the threshold; with large + middle it is covered
        await memory.append_messages(
            "middle", [say("M1", "M1 " + words(140, "mid")), say("M2", "M2 " + words(10, "mid"), "assistant")], "u1"
        )
        sizes["middle"] = await thread_tokens(memory, "middle")
        assert sizes["large"] < 300 <= sizes["large"] + sizes["middle"] < sum(sizes.values()) + 1
        assert len(observer.observer_calls) == 1, "a single batch under max_tokens_per_batch"
        observed = {label for label in observer.observer_calls[0]}
        assert observed == {thread_label("large", True), thread_label("middle", True)}
        # the smallest thread was not needed to cover the threshold and stays raw
        assert [m.id for m in await memory.store.unobserved("resource:u1", "small")] == ["S1"]
    finally:
        await memory.close()


def test_batches_packing_is_greedy_in_order_with_oversized_alone():
    class M:
        def __init__(self, tokens):
            self.tokens = tokens

    by_thread = {t: [M(n)] for t, n in {"a": 40, "b": 50, "c": 500, "d": 30, "e": 30, "f": 45}.items()}
    assert batches(list(by_thread), {t: sum(m.tokens for m in ms) for t, ms in by_thread.items()}, 100) == [
        ["a", "b"],
        ["c"],
        ["d", "e"],
        ["f"],
    ]
    assert batches(["c"], {t: sum(m.tokens for m in ms) for t, ms in by_thread.items()}, 100) == [["c"]]
    assert batches([], by_thread, 100) == []


# -- 2. the other-conversations block ----------------------------------------------------


async def test_context_shows_other_threads_unobserved_messages_in_a_marked_block():
    observer = MultiThreadObserver()
    memory = await Memory.open(make_config(scope="resource"), db_path=location(), client=observer.model)
    try:
        await memory.append_messages("here", [say("H1", "H1 my kayak needs a new paddle")], "u1")
        await memory.append_messages("there", [say("T1", "T1 the violin lesson moved to friday")], "u1")
        await memory.append_messages("yonder", [say("Y1", "Y1 planting tulips along the fence")], "u1")

        ctx = await memory.get_context("here", "u1")
        assert prompts.OTHER_CONVERSATIONS_INTRO in ctx.system_text
        block = others_block(ctx.system_text)
        assert "violin lesson" in block and "planting tulips" in block
        assert "kayak" not in block, "the current thread is not an 'other' conversation"
        assert f'<other-conversation id="{thread_label("there", True)}">' in block
        assert 'id="there"' not in block and 'id="yonder"' not in block
        # the current thread's messages come as messages, not in the block
        assert [m.id for m in ctx.messages] == ["H1"]
        assert "kayak" not in ctx.system_text

        # once observed, other threads' messages leave the block; only new ones show
        assert (await memory.observe("here", "u1")).ran
        await memory.append_messages("there", [say("T2", "T2 bring the rosin for the bow", "assistant")], "u1")
        ctx = await memory.get_context("here", "u1")
        block = others_block(ctx.system_text)
        assert "rosin" in block
        assert "violin lesson" not in block and "tulips" not in block
        assert 'id="' + thread_label("yonder", True) + '"' not in block

        # thread scope never shows other conversations
        plain = await Memory.open(make_config(scope="thread"), db_path=location(), client=observer.model)
        try:
            await plain.append_messages("here", [say("H1", "H1 kayak")], "u1")
            await plain.append_messages("there", [say("T1", "T1 violin")], "u1")
            assert "<other-conversations>" not in (await plain.get_context("here", "u1")).system_text
        finally:
            await plain.close()
    finally:
        await memory.close()


async def test_imported_history_never_floods_a_new_threads_context():
    from om_mcp.importers import claude_export

    export = Path(__file__).parent / "fixtures" / "exports" / "claude" / "conversations.json"
    observer = MultiThreadObserver()
    memory = await Memory.open(make_config(scope="resource"), db_path=location(), client=observer.model)
    try:
        empty = await memory.get_context("fresh", "u1")
        imported = []
        for thread in claude_export.iter_conversations(export):  # as `om-mcp import` appends them
            if not thread.messages:
                continue
            await memory.append_messages(thread.id, thread.messages, "u1", thread_metadata=thread.metadata)
            imported.append(thread.id)
        assert imported  # real conversations, unobserved, their threads active just now
        await memory.append_messages("fresh", [say("F1", "F1 hello, a new conversation")], "u1")
        ctx = await memory.get_context("fresh", "u1")
        assert "<other-conversations>" not in ctx.system_text  # none of the imported history, raw
        assert len(ctx.system_text) == len(empty.system_text)
        # a conversation of today is there; within its budget, the most recent first
        live = [say(f"L{n}", f"L{n} the quarterly plan, part {n}") for n in range(40)]
        await memory.append_messages("live", live, "u1")
        block = others_block((await memory.get_context("fresh", "u1")).system_text)
        assert "L39 the quarterly" in block and "L0 the quarterly" not in block
        assert not [t for t in imported if thread_label(t, True) in block]
        # and the imported threads stay searchable
        assert await memory.search("fresh", "sourdough starter", resource_id="u1")
    finally:
        await memory.close()


# -- 3. isolation between resources ---------------------------------------------------------


async def _two_resources(scope: str = "resource") -> tuple[Memory, MultiThreadObserver]:
    observer = MultiThreadObserver()
    cfg = make_config(scope=scope, om={"retrieval": {"vector": True, "embedder": "hashing"}})
    memory = await Memory.open(cfg, db_path=location(), client=observer.model)
    # similar content and even the same message ids in both resources
    await memory.append_messages(
        "alice-1",
        [
            say("X1", "X1 my dog Biscuit loves the beach at sunrise"),
            say("X2", "X2 Biscuit sounds like a happy dog", "assistant"),
        ],
        "alice",
    )
    await memory.append_messages("alice-2", [say("X3", "X3 the dog vet appointment is on monday")], "alice")
    await memory.append_messages(
        "bob-1",
        [
            say("X1", "X1 my dog Pepper loves the beach at sunset"),
            say("X2", "X2 Pepper sounds like a happy dog", "assistant"),
            say("Z9", "Z9 Pepper chased a seagull on the beach"),
        ],
        "bob",
    )
    return memory, observer


async def test_isolation_between_resources_in_the_engine():
    memory, observer = await _two_resources()
    try:
        await memory.retrieval.index("alice")
        await memory.retrieval.index("bob")
        alice_threads = {"alice-1", "alice-2"}

        # search: only the resource's own messages, lexical and vector
        for query in ("dog beach", "happy dog sounds", "Pepper", "seagull", "sunset"):
            out = await search(memory, "alice-1", "alice", query)
            assert {r.thread_id for r in out.results} <= alice_threads, query
            assert "Pepper" not in out.text and "seagull" not in out.text, query
        assert (await search(memory, "alice-1", "alice", "dog")).count > 0

        # recall: a cursor that only exists in the other resource is unknown here
        with pytest.raises(NotFound):
            await recall(memory, "alice-1", resource_id="alice", cursor="Z9")
        # a clashing id resolves inside the caller's resource
        page = await recall(memory, "alice-1", resource_id="alice", cursor="X1")
        assert HEADER_ID.findall(page.text) == ["X1", "X2"]
        assert "Biscuit" in page.text and "Pepper" not in page.text
        with pytest.raises(NotFound):
            await recall(memory, "alice-1", resource_id="alice", target_thread_id="bob-1")
        with pytest.raises(InputError):
            await recall(memory, "bob-1", resource_id="alice", cursor="X1")

        # threads listing
        listing = await recall(memory, "alice-1", mode="threads", resource_id="alice")
        assert set(re.findall(r"\[([^\]]+)\]", listing.text)) == alice_threads

        # observations: one record per resource, nothing of the other
        assert (await memory.observe("alice-1", "alice")).ran
        assert (await memory.observe("bob-1", "bob")).ran
        alice_obs = await memory.observations("alice-2", "alice")
        assert {g["thread_id"] for g in alice_obs["groups"]} == alice_threads
        assert "Z9" not in alice_obs["text"] and thread_label("bob-1", True) not in alice_obs["text"]
        ctx = await memory.get_context("alice-1", "alice")
        assert "Pepper" not in ctx.system_text and "Z9" not in ctx.system_text
        assert thread_label("bob-1", True) not in ctx.system_text
        # groups are searchable, still per resource
        await memory.retrieval.index("alice")
        out = await search(memory, "alice-1", "alice", "saw Z9 X1")
        assert {r.thread_id for r in out.results} <= alice_threads
        # no vector of one resource is stored under the other
        assert (
            await count(
                memory,
                "SELECT COUNT(*) FROM embeddings WHERE resource_id = 'alice'"
                " AND thread_id NOT IN ('alice-1', 'alice-2')",
            )
            == 0
        )
    finally:
        await memory.close()


async def test_isolation_through_the_mcp_server():
    memory, _ = await _two_resources()
    try:
        await memory.observe("alice-1", "alice")
        await memory.observe("bob-1", "bob")
        server = build_server(memory.config, memory=memory)
        async with Client(server, raise_exceptions=True) as client:
            found = await client.call_tool(
                "recall",
                {
                    "thread_id": "alice-1",
                    "resource_id": "alice",
                    "mode": "search",
                    "query": "Pepper seagull sunset dog",
                },
            )
            assert not found.is_error
            assert set(re.findall(r"thread (\S+):", found.content[0].text)) <= {"alice-1", "alice-2"}
            assert "Pepper" not in found.content[0].text

            foreign = await client.call_tool("recall", {"thread_id": "alice-1", "cursor": "Z9"})
            assert foreign.is_error and "Z9" in foreign.content[0].text

            threads = json.loads((await client.read_resource("om://resources/alice/threads")).contents[0].text)
            assert {t["id"] for t in threads} == {"alice-1", "alice-2"}
            observations = (await client.read_resource("om://resources/alice/observations")).contents[0].text
            assert "Z9" not in observations and "bob" not in observations
            via_thread = (await client.read_resource("om://threads/alice-2/observations")).contents[0].text
            assert json.loads(via_thread)["record_id"] == "resource:alice"
            assert "Z9" not in via_thread
            ctx = await client.call_tool("get_context", {"thread_id": "alice-1"})
            assert not ctx.is_error
            assert "Pepper" not in json.loads(ctx.content[0].text)["system_text"]
            # a thread cannot be read through another resource
            wrong = await client.call_tool("get_context", {"thread_id": "bob-1", "resource_id": "alice"})
            assert wrong.is_error
    finally:
        await memory.close()


# -- 4. range pointers, recall by cursor, reflection, instructions ---------------------------


async def test_ranges_survive_reflection_and_recall_uses_them():
    extra = "EXTRA: prefer recall over guessing when a number matters."
    cfg = make_config(om={"retrieval": {"instructions": extra}})
    model = ScriptedModel(single_thread_observer)
    memory = await Memory.open(cfg, db_path=location(), client=model)
    try:
        await memory.append_messages(
            "t1",
            [
                say(f"m{i}", f"m{i} we talked about item number {i}", "user" if i % 2 else "assistant")
                for i in range(1, 7)
            ],
        )
        assert (await memory.observe("t1")).ran
        ctx = await memory.get_context("t1")
        ranges = RANGE_LINE.findall(ctx.system_text)
        assert ranges == [("m1", "m6")]
        group_ids = re.findall(r"## Group `([0-9a-f]{16})`", ctx.system_text)
        assert len(group_ids) == 1
        for mid in ranges[0]:
            assert await memory.store.find_message("default", mid) is not None

        # instructions: the built-in recall guidance, then the configured extra text
        assert prompts.RECALL_INSTRUCTIONS in ctx.system_text
        assert ctx.system_text.index(prompts.RECALL_INSTRUCTIONS) < ctx.system_text.index(extra)

        # cursor = the range's start reads forward from it (inclusive), in order
        start, end = ranges[0]
        assert await recall_ids(memory, "t1", cursor=start, limit=20) == ["m1", "m2", "m3", "m4", "m5", "m6"]
        assert await recall_ids(memory, "t1", cursor=end, page=-1, limit=20) == ["m1", "m2", "m3", "m4", "m5", "m6"]

        # a whole range as cursor: a hint naming both ends, not a bare failure
        with pytest.raises(InputError) as error:
            await recall(memory, "t1", cursor=f"{start}:{end}")
        assert f"cursor={start!r}" in str(error.value) and f"cursor={end!r}" in str(error.value)

        # a second group, then a reflection over both
        await memory.append_messages(
            "t1", [say(f"m{i}", f"m{i} later item number {i}", "user" if i % 2 else "assistant") for i in range(7, 11)]
        )
        assert (await memory.observe("t1")).ran
        ctx = await memory.get_context("t1")
        assert RANGE_LINE.findall(ctx.system_text) == [("m1", "m6"), ("m7", "m10")]

        outcome = await memory.reflect("t1")
        assert outcome.ran, outcome
        obs = await memory.observations("t1")
        assert obs["generation"] == 1
        assert [(g["kind"], g["range"]) for g in obs["groups"]] == [("reflection", "m1:m10")]
        ctx = await memory.get_context("t1")
        assert RANGE_LINE.findall(ctx.system_text) == [("m1", "m10")]
        assert "reflected: everything so far" in ctx.system_text
        assert extra in ctx.system_text
        assert await recall_ids(memory, "t1", cursor="m10", page=-1, limit=3) == ["m8", "m9", "m10"]

        # through MCP: the range hint is the tool's error text
        server = build_server(memory.config, memory=memory)
        async with Client(server, raise_exceptions=True) as client:
            bad = await client.call_tool("recall", {"thread_id": "t1", "cursor": "m1:m10"})
            assert bad.is_error
            assert "cursor='m1'" in bad.content[0].text and "cursor='m10'" in bad.content[0].text
    finally:
        await memory.close()


async def test_recall_guidance_comes_with_observations_only():
    """An empty thread's context costs few tokens: the recall guidance (and the configured
    extra) arrive with the first observations, which are what it is about."""
    memory = await Memory.open(
        make_config(scope="resource", om={"retrieval": {"instructions": "XTRA-42"}}),
        db_path=location(),
        client=ScriptedModel(single_thread_observer),
    )
    try:
        await memory.append_messages("t1", [say("a1", "hello m1"), say("a2", "hi m2", "assistant")], "u1")
        text = (await memory.get_context("t1", "u1")).system_text
        assert prompts.RECALL_INSTRUCTIONS not in text and "XTRA-42" not in text
        assert (await memory.observe("t1", "u1")).ran
        text = (await memory.get_context("t1", "u1")).system_text
        assert prompts.RECALL_INSTRUCTIONS in text and "XTRA-42" in text
    finally:
        await memory.close()


async def test_resource_scope_reflection_range_spans_every_covered_message():
    """Batches commit in whatever order they finish; the reflection's range must
    still start at the earliest covered message and end at the latest."""
    observer = MultiThreadObserver()
    import anyio

    first = thread_label("early", True)

    async def reply(messages, target):
        if role_of(messages) == "observer" and first in sections(messages):
            with anyio.fail_after(scaled(30)):  # the batch of the oldest thread finishes last: once the other committed
                while not await memory.store.groups("resource:u1"):
                    await anyio.sleep(0.01)
        return observer._reply(messages, target)

    observer.model = ScriptedModel(reply)
    cfg = make_config(scope="resource", om={"observation": {"max_tokens_per_batch": 40}})
    memory = await Memory.open(cfg, db_path=location(), client=observer.model)
    try:
        await memory.append_messages("early", [say("E1", "E1 " + words(30, "early"))], "u1")
        await memory.append_messages("late", [say("L1", "L1 " + words(30, "late"))], "u1")
        assert (await memory.observe("early", "u1")).ran
        assert len(observer.observer_calls) == 2
        assert (await memory.reflect("early", "u1")).ran
        [group] = (await memory.observations("early", "u1"))["groups"]
        assert group["kind"] == "reflection"
        rows = await memory.store.groups("resource:u1")
        assert rows[0].first_seq <= rows[0].last_seq, "a reflection range must not run backwards"
        assert group["range"] == "E1:L1"
    finally:
        await memory.close()


# -- 5. search: context, dates, authors, escaping, scope -------------------------------------


def _at(year: int, month: int, day: int) -> str:
    return datetime(year, month, day, 12, 0, tzinfo=UTC).isoformat()


async def _search_memory(**om: Any) -> Memory:
    return await Memory.open(make_config(om={"enabled": False, **om}), db_path=location())


async def test_search_finds_an_answer_by_the_question_before_it():
    memory = await _search_memory()
    try:
        await memory.append_messages(
            "pets",
            [
                say("q1", "What did you end up naming the new puppy?"),
                say("a1", "We went with Biscuit, after the cookies.", "assistant"),
                say("n1", "Also, the garden needs water."),
            ],
            "u1",
        )
        await memory.append_messages(
            "noise", [say(f"z{i}", f"unrelated chatter about trains and timetables {i}") for i in range(6)], "u1"
        )
        # messages that share one query word in their own text
        await memory.append_messages(
            "names",
            [
                say("w1", "the street name changed last year"),
                say("w2", "please print a name badge for the conference", "assistant"),
            ],
            "u1",
        )
        out = await search(memory, "pets", "u1", "puppy name")
        ids = [r.message_id for r in out.results]
        assert "a1" in ids, "the reply is found through the question it answers"
        assert ids.index("a1") <= 1
        assert ids.index("a1") < ids.index("w1") and ids.index("a1") < ids.index("w2")
        # the question two messages back counts less than the one just before
        assert ids.index("a1") < ids.index("n1")
        assert not {"z0", "z1", "z2"} & set(ids)
        # the answer's own words rank it first
        assert (await search(memory, "pets", "u1", "Biscuit")).results[0].message_id == "a1"
    finally:
        await memory.close()


async def test_search_prefers_messages_from_the_date_the_query_names():
    memory = await _search_memory()
    try:
        text = "we went hiking around the lake with the whole family"
        await memory.append_messages("spring", [say("may", text, created_at=_at(2023, 5, 8))], "u1")
        await memory.append_messages("summer", [say("july", text, created_at=_at(2023, 7, 14))], "u1")
        await memory.append_messages("other", [say("x", "the lake was cold", created_at=_at(2023, 5, 9))], "u1")

        may = await search(memory, "other", "u1", "hiking at the lake in May 2023")
        july = await search(memory, "other", "u1", "hiking at the lake in July 2023")
        assert may.results[0].message_id == "may"
        assert july.results[0].message_id == "july"
        day = await search(memory, "other", "u1", "lake hiking on 14 July 2023")
        assert day.results[0].message_id == "july"
        # the date words are not search terms: a date alone matches no words
        assert (await search(memory, "other", "u1", "May 2023")).count == 0
    finally:
        await memory.close()


async def test_search_boosts_the_author_the_query_names():
    memory = await _search_memory()
    try:
        text = "I painted a sunset over the harbour last weekend"
        await memory.append_messages("c", [say("c1", text, metadata={"speaker": "Caroline"})], "u1")
        await memory.append_messages("m", [say("m1", text, metadata={"speaker": "Melanie"})], "u1")
        for name, expected in (("Caroline", "c1"), ("Melanie", "m1")):
            out = await search(memory, "c", "u1", f"what did {name} paint at the harbour")
            assert out.results[0].message_id == expected, name
            assert len(out.results) == 2
    finally:
        await memory.close()


HOSTILE = [
    '"',
    '""',
    "'",
    "*",
    "-",
    "^",
    "(",
    ")",
    "()",
    "NEAR(a b)",
    "a AND OR NOT",
    "body:secret",
    "prev1:puppy",
    'puppy" OR "*',
    "puppy*",
    "-puppy",
    "puppy NOT biscuit",
    "{body prev1}: puppy",
    "puppy) OR (1=1",
    "'; DROP TABLE messages; --",
    "\\",
    "%",
    "_",
    "🐶 puppy",
    "  ",
    "the and of",
    "NEAR",
    "AND",
    ":",
    "\x00puppy",
    "a" * 500,
]


async def test_search_escapes_hostile_queries():
    memory = await _search_memory()
    try:
        await memory.append_messages(
            "t1", [say("p1", "the puppy chewed the sofa"), say("p2", "secret recipe: cookies", "assistant")], "u1"
        )
        for query in HOSTILE:
            if not query.strip():
                try:
                    blank = await search(memory, "t1", "u1", query)
                except InputError:
                    continue
                assert blank.count == 0, query
                continue
            out = await search(memory, "t1", "u1", query)
            assert out.mode == "search", query
            if "puppy" in query.lower():
                assert "p1" in [r.message_id for r in out.results], query
        only_stop = await search(memory, "t1", "u1", "the and of *")
        assert only_stop.count == 0 and "no searchable words" in only_stop.text
        assert (await search(memory, "t1", "u1", "body:secret")).results[0].message_id == "p2"
        # the table survived the SQL-looking query
        assert len(await memory.store.message_page("t1")) == 2

        server = build_server(memory.config, memory=memory)
        async with Client(server, raise_exceptions=True) as client:
            for query in ('puppy" OR "*', "NEAR(", "col:x AND (", "'; --"):
                result = await client.call_tool("recall", {"thread_id": "t1", "mode": "search", "query": query})
                assert not result.is_error, (query, result.content[0].text)
    finally:
        await memory.close()


async def test_search_thread_scope_versus_resource_scope():
    memory = await _search_memory()
    try:
        await memory.append_messages("mine", [say("a", "the marathon training plan starts soon")], "u1")
        await memory.append_messages("yours", [say("b", "my marathon shoes arrived today")], "u1")
        wide = await search(memory, "mine", "u1", "marathon")
        assert {r.message_id for r in wide.results} == {"a", "b"}
        narrow = await search(memory, "mine", "u1", "marathon", scope="thread")
        assert [r.message_id for r in narrow.results] == ["a"]
    finally:
        await memory.close()

    memory = await _search_memory(retrieval={"scope": "thread"})
    try:
        await memory.append_messages("mine", [say("a", "the marathon training plan starts soon")], "u1")
        await memory.append_messages("yours", [say("b", "my marathon shoes arrived today")], "u1")
        forced = await search(memory, "mine", "u1", "marathon", scope="resource")
        assert [r.message_id for r in forced.results] == ["a"], "retrieval.scope='thread' keeps search in the thread"
        with pytest.raises(InputError):
            await recall(memory, "mine", mode="threads", resource_id="u1")
    finally:
        await memory.close()


# -- 6. vectors with the hashing embedder ---------------------------------------------------


async def _embedded(memory: Memory, embedder: str = "hashing-256") -> dict[str, int]:
    found = await rows(
        memory.store, "SELECT kind, COUNT(*) FROM embeddings WHERE embedder = ? GROUP BY kind", (embedder,)
    )
    return {r[0]: r[1] for r in found}


async def _active_groups(memory: Memory, resource_id: str) -> int:
    return await count(
        memory,
        "SELECT COUNT(*) FROM om_groups g JOIN om_records r ON r.key = g.record_key AND r.generation = g.generation"
        " WHERE r.resource_id = ?",
        (resource_id,),
    )


async def test_vectors_are_built_in_the_background_and_used_by_search():
    cfg = make_config(om={"retrieval": {"vector": True, "embedder": "hashing"}})
    memory = await Memory.open(cfg, db_path=location(), client=ScriptedModel(single_thread_observer))
    try:
        async with memory.running():
            await memory.append_messages(
                "t1",
                [
                    say("m1", "my sister Clara moved to Lisbon in spring"),
                    say("m2", "Lisbon is lovely, does she like the tram rides?", "assistant"),
                    say("m3", "she adores the yellow trams and the pastries"),
                ],
                "u1",
            )
            await memory.append_messages("t2", [say("m4", "the quarterly budget spreadsheet is due friday")], "u1")
            # search never waits for vectors: words work straight away
            early = await search(memory, "t1", "u1", "spreadsheet")
            assert early.results[0].message_id == "m4"
            assert (await memory.observe("t1", "u1")).ran
            await memory.retrieval.index("u1")  # what the background job does; drains the rest
            assert await memory.retrieval.index("u1") == 0, "nothing left to embed"

        messages = await count(memory, "SELECT COUNT(*) FROM messages WHERE resource_id = 'u1'")
        assert await _embedded(memory) == {"message": messages, "group": await _active_groups(memory, "u1")}
        if memory.store.backend == "sqlite":
            blobs = [r[0] for r in await rows(memory.store, "SELECT vector FROM embeddings")]
            assert all(len(b) == 256 * 4 for b in blobs)
        else:  # pgvector's '[0.1,...]' or real[]'s '{0.1,...}'
            texts = [r[0] for r in await rows(memory.store, "SELECT vector::text FROM embeddings")]
            assert texts and all(t.count(",") == 255 for t in texts)

        # exact-word queries still put the lexical hit first with vectors on
        out = await search(memory, "t1", "u1", "quarterly budget")
        assert out.results[0].message_id == "m4"
        out = await search(memory, "t1", "u1", "yellow trams pastries")
        assert out.results[0].message_id == "m3"
        # the dense side on its own ranks by shared words
        [vector] = await memory.retrieval.embedder.embed(["pastries and yellow trams"], query=True)
        nearest = await memory.store.nearest_vectors("u1", "hashing-256", vector, limit=3)
        top = await memory.store.messages_by_seq([int(nearest[0][1])]) if nearest[0][0] == "message" else {}
        assert [m.id for m in top.values()] == ["m3"]
        # vectors are per resource
        assert await memory.store.nearest_vectors("someone-else", "hashing-256", vector) == []

        # a group reflected away is no longer found through its old vector
        assert (await memory.reflect("t1", "u1")).ran
        await memory.retrieval.index("u1")
        active = {g.id for g in await memory.store.groups("thread:t1")}
        [gvec] = await memory.retrieval.embedder.embed(["saw m1 m2 m3"], query=True)
        for kind, ref, _ in await memory.store.nearest_vectors("u1", "hashing-256", gvec, limit=50):
            if kind == "group":
                assert ref in active, "a superseded group came back from the vector index"
        results = await memory.retrieval.search("u1", "saw m1 m2 m3")
        for r in results:
            if r.source == "observation" and not r.retired:
                assert r.range == "m1:m3" and "reflected" in r.snippet
            elif r.source == "observation":  # what the reflection dropped: found, marked retired
                assert r.retired_by == 1 and "reflected" not in r.snippet

        # changing the embedder re-indexes everything under the new name
        other = Retrieval(memory.store, memory.config.observational_memory.retrieval_config, HashingEmbedder(64))
        built = await other.index("u1")
        assert built == messages + await _active_groups(memory, "u1")
        assert (await _embedded(memory, "hashing-64"))["message"] == messages
        assert (await other.search("u1", "quarterly budget"))[0].message_id == "m4"
    finally:
        await memory.close()


# -- 7. delete_thread leaves no trace -----------------------------------------------------


@pytest.mark.parametrize("scope", ["thread", "resource"])
async def test_delete_thread_leaves_no_trace(scope):
    observer = MultiThreadObserver()
    model = observer.model if scope == "resource" else ScriptedModel(single_thread_observer)
    cfg = make_config(scope=scope, om={"retrieval": {"vector": True, "embedder": "hashing"}})
    memory = await Memory.open(cfg, db_path=location(), client=model)
    try:
        await memory.append_messages(
            "doomed",
            [say("m1", "m1 the zeppelin blueprint is in the attic"), say("m2", "m2 zeppelin noted", "assistant")],
            "u1",
        )
        await memory.append_messages("kept", [say("m3", "m3 the garden gnome collection grows")], "u1")
        await memory.observe("doomed", "u1")
        await memory.observe("kept", "u1")
        if scope == "thread":
            assert (await memory.reflect("doomed", "u1")).ran  # a reflection group: thread_id NULL on the row
        await memory.retrieval.index("u1")
        assert await count(memory, "SELECT COUNT(*) FROM embeddings WHERE thread_id = 'doomed'") > 0
        before = await count(memory, "SELECT COUNT(*) FROM embeddings")

        out = await memory.delete_thread("doomed")
        assert out.deleted_messages == 2

        # search: no message, no group, no vector hit
        for query in ("zeppelin blueprint attic", "saw m1 m2", "m1"):
            results = await memory.retrieval.search("u1", query)
            assert all(r.thread_id != "doomed" for r in results), query
            assert all("zeppelin" not in r.snippet for r in results), query
        # groups attributed to it
        assert await count(memory, "SELECT COUNT(*) FROM om_groups WHERE thread_id = 'doomed'") == 0
        assert await count(memory, "SELECT COUNT(*) FROM om_groups_fts WHERE text LIKE '%m1 m2%'") == 0
        # vectors: none for its messages or its groups, and none orphaned
        assert await count(memory, "SELECT COUNT(*) FROM embeddings WHERE thread_id = 'doomed'") == 0
        orphans = await count(
            memory,
            "SELECT COUNT(*) FROM embeddings e WHERE (e.kind = 'message' AND NOT EXISTS"
            " (SELECT 1 FROM messages m WHERE CAST(m.seq AS TEXT) = e.ref)) OR (e.kind = 'group' AND NOT EXISTS"
            " (SELECT 1 FROM om_groups g WHERE g.id = e.ref))",
        )
        assert orphans == 0
        assert await count(memory, "SELECT COUNT(*) FROM embeddings") < before
        # the other thread is intact and still searchable
        assert (await search(memory, "kept", "u1", "gnome")).results[0].message_id == "m3"
        if scope == "resource":
            groups = (await memory.observations("kept", "u1"))["groups"]
            assert [g["thread_id"] for g in groups] == ["kept"]
            ctx = await memory.get_context("kept", "u1")
            assert thread_label("doomed", True) not in ctx.system_text
    finally:
        await memory.close()


async def test_search_resolves_last_month_against_today():
    memory = await _search_memory()
    try:
        now = datetime.now(UTC)
        year = now.year if 6 < now.month else now.year - 1  # the most recent June that has ended or is past
        # the older June has the better word match; only the date can put the recent one first
        await memory.append_messages("a", [say("old", "hiking trip today", created_at=_at(year - 1, 6, 10))], "u1")
        await memory.append_messages("b", [say("new", "hiking trip with friends", created_at=_at(year, 6, 10))], "u1")
        assert (await search(memory, "a", "u1", "hiking")).results[0].message_id == "old"
        out = await search(memory, "a", "u1", "hiking last June")
        assert out.results[0].message_id == "new"
    finally:
        await memory.close()


async def test_vector_search_ignores_queries_without_searchable_words():
    cfg = make_config(om={"enabled": False, "retrieval": {"vector": True, "embedder": "hashing"}})
    memory = await Memory.open(cfg, db_path=location())
    try:
        await memory.append_messages("t1", [say("a", "the cat sat on the mat and the dog"), say("b", "of the")], "u1")
        await memory.retrieval.index("u1")
        assert await count(memory, "SELECT COUNT(*) FROM embeddings") == 2
        for query in ("the and of", "*", '"', "of the"):
            out = await search(memory, "t1", "u1", query)
            assert out.count == 0 and "no searchable words" in out.text, query
        assert (await search(memory, "t1", "u1", "cat")).results[0].message_id == "a"
    finally:
        await memory.close()


async def test_indexing_stops_on_an_embedder_that_answers_short():
    import anyio

    class Short:
        name = "short-1"

        async def embed(self, texts, *, query=False):
            return [[1.0, 0.0]] * (len(texts) - 1)

    memory = await _search_memory()
    try:
        await memory.append_messages("t1", [say("a", "one"), say("b", "two")], "u1")
        retrieval = Retrieval(memory.store, memory.config.observational_memory.retrieval_config, Short())
        with anyio.fail_after(scaled(5)):
            with pytest.raises(RuntimeError, match="returned 1 vectors for 2 texts"):
                await retrieval.index("u1")
    finally:
        await memory.close()


async def test_vectors_of_a_thread_deleted_while_embedding_are_not_stored():
    memory = await _search_memory()
    try:
        await memory.append_messages("doomed", [say("a", "zeppelin plans")], "u1")
        await memory.append_messages("kept", [say("b", "garden plans")], "u1")
        inner = HashingEmbedder(32)

        class Racing:
            name = inner.name

            async def embed(self, texts, *, query=False):
                await memory.delete_thread("doomed")  # the user deletes it while vectors are built
                return await inner.embed(texts, query=query)

        retrieval = Retrieval(memory.store, memory.config.observational_memory.retrieval_config, Racing())
        await retrieval.index("u1")
        assert await count(memory, "SELECT COUNT(*) FROM embeddings WHERE thread_id = 'doomed'") == 0
        assert await count(memory, "SELECT COUNT(*) FROM embeddings WHERE thread_id = 'kept'") == 1
    finally:
        await memory.close()
