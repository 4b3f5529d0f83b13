"""The `Store` protocol, called directly, on both backends: every operation the engine and the
commands use answers the same on SQLite and on PostgreSQL.

Each test runs twice (`store_location`: SQLite in memory, then a fresh PostgreSQL database).
The engine's and the MCP tools' tests run on SQLite only; what they rely on of the store is
held here, once per backend, along with what only a database can tell (a commit that loses
its race writes nothing, a deletion leaves nothing behind, an export imports back whole).
"""

from __future__ import annotations

import asyncio
import io
import json
from contextlib import asynccontextmanager
from dataclasses import replace

import pytest
from support.backends import location

from om_mcp.engine.search.query import parse_query
from om_mcp.store import (
    EVERY_RESOURCE,
    Access,
    BufferedReflection,
    Chunk,
    IngestState,
    ModelHealth,
    NewGroup,
    NewMessage,
    NotFound,
    Store,
    StoreError,
    open_store,
)
from om_mcp.store.operations import Operations
from om_mcp.store.rows import Reservation, Rewrite

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("store_location")]

T0 = "2026-01-01T00:00:00+00:00"


def new(mid: str, text: str | None = None, *, tokens: int = 10, role: str = "user", **fields) -> NewMessage:
    text = text or f"message {mid}"
    values = dict(
        id=mid,
        role=role,
        parts=[{"type": "text", "text": text}],
        created_at=fields.pop("created_at", T0),
        metadata={},
        body=text,
        tokens=tokens,
    )
    values.update(fields)
    return NewMessage(**values)


@asynccontextmanager
async def opened():
    store = await open_store(location())
    try:
        yield store
    finally:
        await store.close()


async def filled(store: Store, thread: str = "t", count: int = 4, resource: str = "r", **options) -> list[int]:
    """`count` messages in a thread (record key thread:<thread>); their seqs."""
    result = await store.append_messages(
        thread, resource, f"thread:{thread}", [new(f"{thread}-{i}") for i in range(count)], **options
    )
    return [m.seq for m in result.appended]


def group(text: str, first: int, last: int, **fields) -> NewGroup:
    return NewGroup(
        text=text,
        tokens=len(text.split()),
        first_seq=first,
        last_seq=last,
        **{"first_message_id": None, "last_message_id": None, **fields},
    )


def chunk(cid: str, thread: str, first: int, last: int, tokens: int = 20) -> Chunk:
    return Chunk(
        id=cid,
        cycle_id=f"cycle-{cid}",
        thread_id=thread,
        first_seq=first,
        last_seq=last,
        first_message_id=f"{thread}-a",
        last_message_id=f"{thread}-b",
        message_count=last - first + 1,
        message_tokens=tokens,
        text=f"observed {cid}",
        tokens=3,
        hints={"current_task": f"task {cid}"},
        last_message_at=T0,
        created_at=T0,
    )


# -- threads, resources, working memory ----------------------------------------------------------


@pytest.mark.slow
async def test_the_store_supplies_every_operation_and_what_the_interface_leaves_to_a_backend():
    """The operations come from `Operations` (their rules' signatures); what `Store` leaves to each
    backend (search, the file or server, the channel to other processes) this backend supplies."""
    async with opened() as store:
        assert isinstance(store, Store) and isinstance(store, Operations)
        assert store.backend in ("sqlite", "postgres")
        left = [name for name, value in vars(Store).items() if callable(value) and name != "transaction"]
        assert {"close", "search_messages", "stats", "listen"} <= set(left)
        for name in [*left, "_read", "_write"]:
            assert getattr(type(store), name) is not getattr(Store, name, None), name


async def test_an_append_creates_the_thread_and_its_resource_once():
    async with opened() as store:
        result = await store.append_messages(
            "t",
            "r",
            "thread:t",
            [new("a"), new("b", role="assistant", metadata={"model": "m1"})],
            thread_metadata={"title": "Lisbon", "host": "x"},
        )
        assert result.thread_created and [m.id for m in result.appended] == ["a", "b"]
        assert result.thread and result.thread.title == "Lisbon" and result.thread.title_pinned
        thread = await store.get_thread("t")
        assert thread and thread.message_count == 2 and thread.metadata == {"host": "x"}
        assert (thread.last_assistant_id, thread.last_model) == ("b", "m1")
        assert result.state and result.state.pending_tokens == 20 and result.state.pending_messages == 2
        [summary] = await store.list_resources()
        assert (summary.id, summary.threads, summary.messages) == ("r", 1, 2)
        again = await store.append_messages("t", "r", "thread:t", [new("c")])
        assert not again.thread_created
        with pytest.raises(StoreError, match="belongs to resource 'r'"):
            await store.append_messages("t", "other", "thread:t", [new("d")])
        assert await store.get_thread("nobody") is None


async def test_threads_list_newest_first_in_pages():
    async with opened() as store:
        for name in ("t1", "t2", "t3"):
            await filled(store, name, 1)
        page, more = await store.list_threads("r", limit=2)
        assert [t.id for t in page] == ["t3", "t2"] and more
        rest, more = await store.list_threads("r", limit=2, offset=2)
        assert [t.id for t in rest] == ["t1"] and not more
        assert (await store.list_threads("nobody"))[0] == []


async def test_a_thread_is_updated_and_a_pinned_title_kept():
    async with opened() as store:
        await filled(store, "t", 1)
        updated = await store.update_thread("t", title="Trip", metadata={"a": 1, "b": 2})
        assert updated.title == "Trip" and updated.metadata == {"a": 1, "b": 2}
        updated = await store.update_thread("t", metadata={"a": None}, pin_title=True)
        assert updated.metadata == {"b": 2} and updated.title_pinned
        assert await store.set_generated_title("t", "Model title") == ("Trip", False)
        await store.update_thread("t", pin_title=False)
        assert await store.set_generated_title("t", "Model title") == ("Trip", True)
        await store.set_thread_metadata_paths("t", {"om.values.city": "Porto", "ended_at": T0})
        thread = await store.get_thread("t")
        assert thread and thread.title == "Model title"
        assert thread.metadata == {"b": 2, "om": {"values": {"city": "Porto"}}, "ended_at": T0}
        with pytest.raises(NotFound):
            await store.update_thread("nobody", title="x")


async def test_working_memory_per_thread_and_per_resource():
    async with opened() as store:
        seed = ("resource", lambda stored: stored or "# Notes")
        await store.append_messages("t", "r", "thread:t", [new("a")], working_memory=seed)
        assert await store.get_working_memory("resource", "r") == "# Notes"
        assert await store.update_working_memory("resource", "r", lambda old: old + "\n- tea") == (
            "# Notes\n- tea",
            True,
        )
        assert await store.update_working_memory("resource", "r", lambda old: None) == ("# Notes\n- tea", False)
        assert await store.update_working_memory("thread", "t", lambda old: "thread note") == ("thread note", True)
        assert await store.get_working_memory("thread", "t") == "thread note"
        assert await store.update_working_memory("resource", "new-r", lambda old: "fresh") == ("fresh", True)
        with pytest.raises(NotFound):
            await store.update_working_memory("thread", "nobody", lambda old: "x")


# -- messages -------------------------------------------------------------------------------------


async def test_a_resend_is_skipped_and_a_clash_changes_nothing():
    async with opened() as store:
        await filled(store, "t", 2)
        again = await store.append_messages("t", "r", "thread:t", [new("t-1"), new("t-2")])
        assert again.skipped_duplicates == 1 and [m.id for m in again.appended] == ["t-2"]
        with pytest.raises(StoreError, match="already exists"):
            await store.append_messages("t", "r", "thread:t", [new("t-3"), new("t-0", "other words")])
        assert [m.id for m in await store.message_page("t")] == ["t-0", "t-1", "t-2"]
        # Untimed, id-less messages that repeat the thread's tail are a re-send, not new.
        untimed = [replace(new("x1", "hello"), id_given=False, created_at_given=False)]
        await store.append_messages("t", "r", "thread:t", untimed)
        resent = await store.append_messages(
            "t", "r", "thread:t", [replace(new("x2", "hello"), id_given=False, created_at_given=False)]
        )
        assert resent.skipped_duplicates == 1 and not resent.appended


async def test_message_pages_lookups_and_times():
    async with opened() as store:
        seqs = await filled(store, "t", 5)
        tool = new(
            "tool",
            "ran ls",
            parts=[{"type": "text", "text": "ran"}, {"type": "tool-call", "tool_name": "ls", "args": {}}],
            created_at="2026-01-02T00:00:00+00:00",
        )
        [tool_row] = (await store.append_messages("t", "r", "thread:t", [tool])).appended
        page = await store.message_page("t", after_seq=seqs[0], before_seq=seqs[4], limit=2, offset=1)
        assert [m.seq for m in page] == seqs[2:4]
        assert [m.id for m in await store.message_page("t", newest_first=True, limit=2)] == ["tool", "t-4"]
        assert [m.id for m in await store.message_page("t", part_filter=("tool-call", "ls"))] == ["tool"]
        assert [m.id for m in await store.message_page("t", part_filter=("tool-call", "cat"))] == []
        assert len(await store.message_page("t", part_filter=("text", None), limit=50)) == 6
        assert await store.count_messages_before("t", seqs[3]) == 3
        found = await store.find_message("r", "t-2")
        assert found and found.seq == seqs[2] and found.parts == [{"type": "text", "text": "message t-2"}]
        assert await store.find_message("r", "t-2", thread_id="t") == found
        assert await store.find_message("other", "t-2") is None
        assert set(await store.messages_by_seq([seqs[1], tool_row.seq])) == {seqs[1], tool_row.seq}
        assert await store.last_message_time("t") == "2026-01-02T00:00:00+00:00"
        assert await store.last_seq() == tool_row.seq


async def test_a_recount_moves_the_running_totals():
    async with opened() as store:
        seqs = await filled(store, "t", 3)
        mine = await store.tokenizer_id("mine@1")
        assert await store.tokenizer_id("mine@1") == mine
        stale = await store.stale_token_counts(mine)
        assert [r["seq"] for r in stale] == seqs and stale[0]["parts"] == [{"type": "text", "text": "message t-0"}]
        await store.set_token_counts(mine, [(seqs[0], 25, [25])])
        state = await store.record_state("thread:t", "t")
        assert state.pending_tokens == 45 and state.thread_pending_tokens == 45
        assert [r["seq"] for r in await store.stale_token_counts(mine)] == seqs[1:]


async def test_a_nul_byte_is_kept_exactly():
    async with opened() as store:
        text = "before\x00after"
        await store.append_messages("t", "r", "thread:t", [new("nul", text)])
        [stored] = await store.message_page("t")
        assert stored.parts == [{"type": "text", "text": text}]


# -- records, windows, the context --------------------------------------------------------------


async def test_the_context_reads_one_snapshot_within_its_budget():
    async with opened() as store:
        await filled(store, "t", 6)
        read = await store.context("thread:t", "t", 35, ("threads", "t"))
        assert read and [m.id for m in read.window] == ["t-3", "t-4", "t-5"]
        assert read.groups == [] and read.working_memory is None and read.other_threads == {}
        assert read.snapshot.record.scope == "thread" and read.snapshot.thread and read.snapshot.thread.id == "t"
        assert [m.id for m in (await store.context("thread:t", "t", 1, None)).window] == ["t-5"]  # at least one
        assert await store.context("thread:none", "none", 100, None) is None
        snap = await store.snapshot("thread:t", "t")
        assert snap and snap.state.pending_messages == 6 and snap.chunks == [] and snap.buffered_reflection is None


async def test_unobserved_messages_busy_threads_and_due_work():
    async with opened() as store:
        for name, count in (("a", 3), ("b", 6)):
            await store.append_messages(name, "r", "resource:r", [new(f"{name}-{i}") for i in range(count)])
        assert [m.id for m in await store.unobserved("resource:r", "b", max_tokens=25)] == ["b-0", "b-1"]
        assert [m.id for m in await store.unobserved("resource:r", "b", max_tokens=1)] == ["b-0"]
        assert [t for t, _, _ in await store.busy_threads("resource:r")] == ["b", "a"]
        [due] = await store.due_work(80, 10_000)
        assert (due.record_key, due.resource_id, due.thread_id, due.pending_tokens) == ("resource:r", "r", "b", 90)
        assert await store.due_work(100, 10_000) == []
        read = await store.context("resource:r", "a", 1000, ("resources", "r"))
        assert read and [m.id for m in read.other_threads["b"]] == [f"b-{i}" for i in range(6)]


async def test_other_threads_in_the_context_are_the_recently_active_ones_newest_first():
    async with opened() as store:
        for name in ("old", "a", "b"):
            await store.append_messages(name, "r", "resource:r", [new(f"{name}-0")])
        await store.set_thread_times("old", None, "2020-01-01T00:00:00+00:00")
        await store.set_thread_times("a", None, "2026-01-01T00:00:00+00:00")
        await store.set_thread_times("b", None, "2026-01-02T00:00:00+00:00")
        read = await store.context("resource:r", "new", 1000, None)
        assert read and list(read.other_threads) == ["b", "a", "old"]
        read = await store.context("resource:r", "new", 1000, None, others_since="2025-06-01T00:00:00+00:00")
        assert read and list(read.other_threads) == ["b", "a"]
        read = await store.context("resource:r", "new", 1000, None, others_since="2027-01-01T00:00:00+00:00")
        assert read and read.other_threads == {}


# -- the conditional commits ------------------------------------------------------------------------


async def test_an_observation_commits_once_from_the_state_it_saw():
    async with opened() as store:
        seqs = await filled(store, "t", 4)
        commit = dict(
            lease=None,
            expected_cursors={"t": 0},
            new_cursors={"t": seqs[1]},
            groups=[group("user likes tea", seqs[0], seqs[1], thread_id="t")],
            hints={"t": {"current_task": "tea", "suggested_response": "ask"}},
            extracted={"city": "Porto"},
            observed_at=T0,
            events=[{"type": "data-om-observation-end", "record_id": "thread:t", "windows": {}}],
        )
        assert await store.commit_observation("thread:t", **commit)
        assert not await store.commit_observation("thread:t", **commit)  # the cursor moved: nothing written
        record = await store.record("thread:t")
        assert record and record.cursors == {"t": seqs[1]} and record.extracted == {"city": "Porto"}
        assert record.observation_tokens == 3 and record.last_observed_at == T0
        state = await store.record_state("thread:t", "t")
        assert state.pending_messages == 2 and state.pending_tokens == 20
        assert [g.text for g in await store.groups("thread:t")] == ["user likes tea"]
        assert (await store.thread_hints("thread:t", ["t"]))["t"].current_task == "tea"
        assert await store.tail("thread:t", "t") == seqs[1]
        [event] = await store.events(record_key="thread:t")
        assert event.payload["windows"] == {"unobserved_tokens": 20, "observation_tokens": 3, "seq": seqs[3]}


async def test_a_commit_needs_its_lease():
    async with opened() as store:
        seqs = await filled(store, "t", 2)
        assert await store.acquire_lease("thread:t", "observe", "me", 30)
        args = dict(
            expected_cursors={"t": 0}, new_cursors={"t": seqs[1]}, groups=[], hints={}, extracted=None, observed_at=None
        )
        assert not await store.commit_observation("thread:t", lease=("observe", "someone"), **args)
        assert await store.commit_observation("thread:t", lease=("observe", "me"), **args)


async def test_a_lease_that_lapsed_with_nobody_taking_it_still_commits():
    async with opened() as store:
        seqs = await filled(store, "t", 3)
        args = dict(groups=[], hints={}, extracted=None, observed_at=None)
        assert await store.acquire_lease("thread:t", "observe", "me", -1)  # a renewal came too late
        assert await store.expire_leases() == 1  # and the sweep dropped it
        first = dict(expected_cursors={"t": 0}, new_cursors={"t": seqs[0]}, **args)
        assert await store.commit_observation("thread:t", lease=("observe", "me"), **first)
        assert await store.acquire_lease("thread:t", "observe", "other", 30)  # taken over: the work is theirs
        second = dict(expected_cursors={"t": seqs[0]}, new_cursors={"t": seqs[1]}, **args)
        assert not await store.commit_observation("thread:t", lease=("observe", "me"), **second)
        assert await store.tail("thread:t", "t") == seqs[0]


async def test_leases_that_exclude_each_other_are_never_held_at_once():
    async with opened() as store:
        assert await store.acquire_lease("k", "observe", "a", 30, excluding=("buffer",))
        assert not await store.acquire_lease("k", "buffer", "b", 30, excluding=("observe",))
        assert not await store.acquire_lease("k", "buffer", "a", 30, excluding=("observe",))  # its own too
        assert await store.acquire_lease("k", "buffer", "b", 30)  # without exclusion it is free
        assert await store.acquire_lease("j", "buffer", "b", 30, excluding=("observe",))  # another key
        await store.release_lease("k", "observe", "a")
        await store.release_lease("k", "buffer", "b")
        assert await store.acquire_lease("k", "observe", "c", -1)  # lapsed: excludes nothing
        assert await store.acquire_lease("k", "buffer", "b", 30, excluding=("observe",))
        assert await store.acquire_lease("k", "buffer", "b", 30, excluding=("observe",))  # renewed
        assert await store.lease_holder("k", "buffer") == "b"


async def test_takers_that_exclude_each_other_racing_for_a_key_leave_one_holder():
    async with opened() as store:
        for i in range(10):
            won = await asyncio.gather(
                store.acquire_lease(f"k{i}", "observe", "a", 30, excluding=("buffer",)),
                store.acquire_lease(f"k{i}", "buffer", "b", 30, excluding=("observe",)),
            )
            assert sorted(won) == [False, True]


async def test_buffered_chunks_activate_as_a_prefix_with_no_gap():
    async with opened() as store:
        seqs = await filled(store, "t", 6)
        chunks = [chunk("c1", "t", seqs[0], seqs[1]), chunk("c2", "t", seqs[2], seqs[3])]
        stored = dict(lease=None, extracted={"k": 1}, buffered_at_tokens=40)
        assert await store.append_chunks("thread:t", expected_tails={"t": 0}, chunks=chunks, **stored)
        assert not await store.append_chunks("thread:t", expected_tails={"t": 0}, chunks=chunks, **stored)
        assert await store.tail("thread:t", "t") == seqs[3]
        state = await store.record_state("thread:t", "t")
        assert state.chunk_count == 2 and state.chunk_message_tokens == 40 and state.last_buffered_at_tokens == 40
        assert not await store.activate_chunks("thread:t", ["c2"])  # not a prefix
        assert await store.activate_chunks("thread:t", ["c1"])
        assert [c.id for c in await store.chunks("thread:t")] == ["c2"]
        record = await store.record("thread:t")
        assert record and record.cursors["t"] == seqs[1] and record.last_buffered_at_tokens == 20
        assert [g.text for g in await store.groups("thread:t")] == ["observed c1"]
        assert (await store.thread_hints("thread:t", ["t"]))["t"].current_task == "task c1"
        # An observation past a chunk's start makes the chunk stale: it is dropped.
        assert await store.commit_observation(
            "thread:t",
            lease=None,
            expected_cursors={"t": seqs[1]},
            new_cursors={"t": seqs[2]},
            groups=[],
            hints={},
            extracted=None,
            observed_at=None,
        )
        assert await store.chunks("thread:t") == []


async def test_a_reflection_starts_a_generation_keeping_what_came_after():
    async with opened() as store:
        seqs = await filled(store, "t", 4)
        for i, text in enumerate(["one", "two", "three"]):
            assert await store.commit_observation(
                "thread:t",
                lease=None,
                expected_cursors={"t": 0 if i == 0 else seqs[i - 1]},
                new_cursors={"t": seqs[i]},
                groups=[group(text, seqs[i], seqs[i], thread_id="t")],
                hints={},
                extracted=None,
                observed_at=None,
            )
        reflection = BufferedReflection("cycle-r", 0, 2, 50, "one and two", 3, {"current_task": "later"})
        assert await store.store_buffered_reflection("thread:t", reflection, lease=None)
        assert (await store.snapshot("thread:t", "t")).buffered_reflection == reflection
        await store.discard_buffered_reflection("thread:t")
        assert (await store.snapshot("thread:t", "t")).buffered_reflection is None
        reflected = dict(lease=None, covered=2, groups=[group("one and two", seqs[0], seqs[1], kind="reflection")])
        assert await store.commit_reflection("thread:t", generation=0, extracted=None, blocked_at=None, **reflected)
        assert not await store.commit_reflection("thread:t", generation=0, extracted=None, blocked_at=None, **reflected)
        assert [g.text for g in await store.groups("thread:t")] == ["one and two", "three"]
        assert [g.text for g in await store.groups("thread:t", generation=0)] == ["one", "two", "three"]
        assert [gen for gen, _ in await store.generations("thread:t")] == [1, 0]
        record = await store.record("thread:t")
        assert record and record.generation == 1 and record.observation_tokens == 4 and record.last_reflection_at
        stale = replace(reflection, generation=0)
        assert not await store.store_buffered_reflection("thread:t", stale, lease=None)


async def test_the_retired_pile_is_outside_every_log_and_found_by_search():
    async with opened() as store:
        seqs = await filled(store, "t", 2)
        assert await store.commit_observation(
            "thread:t",
            lease=None,
            expected_cursors={"t": 0},
            new_cursors={"t": seqs[1]},
            groups=[
                group("Date: Mar 2, 2026\n* the quokka lives in Lisbon\n* tortoise", seqs[0], seqs[1], thread_id="t")
            ],
            hints={},
            extracted=None,
            observed_at=None,
        )
        retired = [
            group(
                "Date: Mar 2, 2026\n* the quokka lives in Lisbon",
                seqs[0],
                seqs[1],
                thread_id="t",
                retired_reason="superseded",
                replaced_by="abc123",
            )
        ]
        reflected = dict(lease=None, covered=1, groups=[group("* quokka moved to Porto", seqs[0], seqs[1])])
        assert await store.commit_reflection(
            "thread:t", generation=0, extracted=None, blocked_at=None, retired=retired, **reflected
        )
        [pile] = await store.retired_groups("thread:t")
        assert pile.retired and pile.retired_by == 1 and pile.retired_reason == "superseded"
        assert pile.replaced_by == "abc123" and pile.thread_id == "t" and (pile.first_seq, pile.last_seq) == tuple(seqs)
        assert [gen for gen, _ in await store.generations("thread:t")] == [1, 0]  # the pile is no generation
        assert [g.text for g in await store.groups("thread:t")] == ["* quokka moved to Porto"]
        record = await store.record("thread:t")
        assert record and record.observation_tokens == 5  # only the active log counts
        hits = await store.search_groups("r", "lisbon")
        assert [(h.group.id, h.group.retired) for h in hits] == [(pile.id, True)]
        assert {h.group.retired for h in await store.search_groups("r", "quokka")} == {True, False}
        # Restored: off the pile, at the end of the log, as the user's change.
        version = record.version
        back = group("Date: Mar 2, 2026\n* the quokka lives in Lisbon", seqs[0], seqs[1], thread_id="t")
        assert not await store.restore_lines(
            "thread:t", version=version - 1, group=back, unretired=[pile.id], events=[]
        )
        assert await store.restore_lines("thread:t", version=version, group=back, unretired=[pile.id], events=[])
        assert await store.retired_groups("thread:t") == []
        assert [g.text for g in await store.groups("thread:t")][-1] == back.text
        after = await store.record("thread:t")
        assert after and after.edits == record.edits + 1
        assert [h.group.retired for h in await store.search_groups("r", "lisbon")] == [False]


async def test_remembered_lines_are_written_with_their_messages_and_alone():
    from om_mcp.store import Remembered

    async with opened() as store:

        def lines(stored):
            return [Remembered(m.id, f"* {m.id} said to remember [user-stated]", 6) for m in stored]

        result = await store.append_messages("t", "r", "thread:t", [new("a"), new("b")])
        assert await store.remember_with_messages("thread:t", "t", result.appended, lines(result.appended)) == 2
        assert await store.remember_with_messages("thread:t", "t", [], lines(result.appended)) == 0  # not stored now
        texts = [(g.text, g.first_message_id) for g in await store.groups("thread:t")]
        assert texts == [("* a said to remember [user-stated]", "a"), ("* b said to remember [user-stated]", "b")]
        gid = await store.remember("resource:~user", "~user", None, group("* I use tabs [user-stated]", 0, 0), [])
        [alone] = await store.groups("resource:~user")
        assert alone.id == gid and alone.first_message_id is None
        assert "~user" in {r.id for r in await store.list_resources()}


async def test_the_log_and_working_memory_as_they_were():
    import datetime as dt

    async with opened() as store:
        seqs = await filled(store, "t", 3)
        empty = dt.datetime.now(dt.UTC).isoformat()
        assert await store.log_at("thread:t", empty) == (None, [])
        await store.update_working_memory("thread", "t", lambda _: "first note")
        assert await store.commit_observation(
            "thread:t",
            lease=None,
            expected_cursors={"t": 0},
            new_cursors={"t": seqs[1]},
            groups=[group("seen", seqs[0], seqs[1], thread_id="t")],
            hints={},
            extracted=None,
            observed_at=None,
        )
        middle = dt.datetime.now(dt.UTC).isoformat()
        await store.update_working_memory("thread", "t", lambda _: "second note")
        reflected = dict(lease=None, covered=1, groups=[group("reflected", seqs[0], seqs[1])])
        assert await store.commit_reflection("thread:t", generation=0, extracted=None, blocked_at=None, **reflected)
        generation, groups = await store.log_at("thread:t", middle)
        assert generation == 0 and [g.text for g in groups] == ["seen"]
        assert await store.working_memory_at("thread", "t", middle) == "first note"
        assert await store.working_memory_at("thread", "t", empty) is None
        later = dt.datetime.now(dt.UTC)
        assert (await store.log_at("thread:t", later.isoformat()))[0] == 1
        assert await store.working_memory_at("thread", "t", later.isoformat()) == "second note"
        window = await store.messages_at("t", seqs[1], later, 1000)
        assert [m.seq for m in window] == [seqs[2]]
        assert await store.messages_at("t", seqs[1], dt.datetime(2020, 1, 1, tzinfo=dt.UTC), 1000) == []
        # Deleting the thread takes the history of its working memory too.
        await store.delete_thread("t")
        assert await store.working_memory_at("thread", "t", later.isoformat()) is None


# -- coordination between processes -------------------------------------------------------------


async def test_leases_events_health_and_ingest_positions():
    async with opened() as store:
        assert await store.acquire_lease("k", "observe", "a", 30, cycle_id="c1")
        assert not await store.acquire_lease("k", "observe", "b", 30)
        assert await store.acquire_lease("k", "observe", "a", 30)  # renewed
        assert await store.lease_holder("k", "observe") == "a"
        await store.release_lease("k", "observe", "b")  # not b's: stays
        assert await store.lease_holder("k", "observe") == "a"
        await store.release_lease("k", "observe", "a")
        assert await store.lease_holder("k", "observe") is None
        assert await store.acquire_lease("k", "observe", "b", -1)  # already expired
        assert await store.lease_holder("k", "observe") is None
        assert await store.acquire_lease("k", "observe", "c", 30)  # an expired lease is taken over
        assert await store.acquire_lease("j", "observe", "d", -1)
        assert await store.expire_leases() == 1

        await store.add_events([{"type": "x", "thread_id": "t", "cycle_id": "c1"}, {"type": "y", "thread_id": "u"}])
        events = await store.events()
        assert [e.type for e in events] == ["x", "y"] and events[0].id < events[1].id
        assert [e.type for e in await store.events(thread_id="u")] == ["y"]
        assert [e.type for e in await store.events(cycle_id="c1")] == ["x"]
        assert [e.type for e in await store.events(after_id=events[0].id)] == ["y"]
        assert [e.type for e in await store.events(limit=1)] == ["y"]

        health = ModelHealth("m", "backoff", 2, 123.5, "timeout", T0, "h")
        await store.put_model_health(health)
        assert await store.model_health("m") == health
        await store.put_model_health(replace(health, state="ok", failures=0))
        assert (await store.model_health("m")).state == "ok"
        assert await store.model_health("other") is None

        assert await store.ingest_state("claude-code:s") == IngestState("claude-code:s")
        await store.put_ingest_state(IngestState("claude-code:s", 10, "u1", '{"offset": 10}'))
        saved = await store.ingest_state("claude-code:s")
        assert (saved.offset, saved.last_id, saved.fingerprint) == (10, "u1", '{"offset": 10}') and saved.updated_at


async def test_host_sessions_that_are_over_still_holding_messages():
    async with opened() as store:
        await filled(store, "t", 3, thread_metadata={"host": "claude-code"})
        await filled(store, "u", 1)  # not a host session
        assert await store.settled_threads("2000-01-01T00:00:00+00:00") == []
        [quiet] = await store.settled_threads("2999-01-01T00:00:00+00:00")
        assert (quiet.thread_id, quiet.record_key, quiet.pending_messages) == ("t", "thread:t", 3)
        await store.set_thread_metadata_paths("t", {"ended_at": "2999-01-01T00:00:00+00:00"})
        assert [s.thread_id for s in await store.settled_threads("2000-01-01T00:00:00+00:00")] == ["t"]
        assert await store.settled_threads("2999-01-01T00:00:00+00:00", record_key="thread:u") == []


# -- search and vectors ----------------------------------------------------------------------------


async def test_search_finds_messages_and_groups_and_vectors_fill_in():
    async with opened() as store:
        await store.append_messages("t", "r", "thread:t", [new("a", "we deploy on fly.io"), new("b", "the cat sleeps")])
        hits, stats = await store.search_messages("r", parse_query("deploy"))
        assert max(hits, key=lambda h: h.score).body == "we deploy on fly.io" and stats.rows == 2
        assert (await store.search_messages("other", parse_query("deploy")))[0] == []
        seqs = [m.seq for m in await store.message_page("t")]
        assert await store.commit_observation(
            "thread:t",
            lease=None,
            expected_cursors={"t": 0},
            new_cursors={"t": seqs[1]},
            groups=[group("hosting decided: a small provider", seqs[0], seqs[1], thread_id="t")],
            hints={},
            extracted=None,
            observed_at=None,
        )
        [hit] = await store.search_groups("r", parse_query("hosting").match)
        assert hit.group.text == "hosting decided: a small provider" and hit.resource_id == "r"
        assert await store.groups_by_id([hit.group.id]) == {hit.group.id: hit.group}
        pending = await store.pending_vectors("r", "test-embedder")
        assert {p.kind for p in pending} == {"message", "group"}
        await store.put_vectors(
            "r", "test-embedder", [(p, [1.0, 0.0] if p.kind == "group" else [0.0, 1.0]) for p in pending]
        )
        assert await store.pending_vectors("r", "test-embedder") == []
        nearest = await store.nearest_vectors("r", "test-embedder", [1.0, 0.1], limit=1)
        assert [kind for kind, _, _ in nearest] == ["group"]


# -- deleting for good -------------------------------------------------------------------------------


async def test_a_deleted_thread_and_resource_leave_nothing_behind():
    async with opened() as store:
        await filled(store, "t", 3)
        await filled(store, "u", 2)
        seqs = [m.seq for m in await store.message_page("t")]
        assert await store.commit_observation(
            "thread:t",
            lease=None,
            expected_cursors={"t": 0},
            new_cursors={"t": seqs[0]},
            groups=[group("secret plans", seqs[0], seqs[0], thread_id="t")],
            hints={},
            extracted=None,
            observed_at=None,
        )
        assert await store.delete_thread("t") == 3
        assert await store.get_thread("t") is None and await store.record("thread:t") is None
        assert await store.search_groups("r", "secret") == []
        assert (await store.search_messages("r", parse_query("message")))[1].rows == 2
        with pytest.raises(NotFound):
            await store.delete_thread("t")
        assert await store.delete_resource("r") == (1, 2)
        assert await store.list_resources() == [] and (await store.stats()).messages == 0
        with pytest.raises(NotFound):
            await store.delete_resource("r")


async def test_deleting_a_thread_of_a_shared_log_forgets_what_its_cycles_carried():
    async with opened() as store:
        for name in ("a", "b"):
            await store.append_messages(name, "r", "resource:r", [new(f"{name}-0")], thread_metadata={"x": 1})
        await store.set_thread_metadata_paths("b", {"om.values": {"city": "Porto"}})
        events = [
            {"type": "data-om-observation-end", "record_id": "resource:r", "cycle_id": "c1", "thread_ids": ["a", "b"]},
            {
                "type": "data-om-observation-end",
                "record_id": "resource:r",
                "cycle_id": "c2",
                "thread_ids": ["b"],
                "extracted_values": {"city": "Porto"},
            },
        ]
        await store.add_events(events)
        await store.delete_thread("a")
        [kept] = await store.events(record_key="resource:r")
        assert kept.cycle_id == "c2" and "extracted_values" not in kept.payload
        thread = await store.get_thread("b")
        assert thread and thread.metadata == {"x": 1}


# -- forgetting one thing, spend, the sessions a SessionStart lists -------------------------------


async def observed(store: Store, key: str, thread: str, seqs: list[int], text: str) -> None:
    """One group over `seqs[0]..seqs[1]`, naming its first and last message."""
    assert await store.commit_observation(
        key,
        lease=None,
        expected_cursors={thread: 0},
        new_cursors={thread: seqs[1]},
        groups=[
            group(
                text, seqs[0], seqs[1], thread_id=thread, first_message_id=f"{thread}-0", last_message_id=f"{thread}-1"
            )
        ],
        hints={thread: {"current_task": "Ship the SECRET plan"}},
        extracted=None,
        observed_at=None,
    )


async def test_forgetting_a_message_takes_it_out_of_every_count_index_and_range():
    async with opened() as store:
        await store.append_messages(
            "t",
            "r",
            "thread:t",
            [new("t-0", "the Lighthouse code"), new("t-1", "noted"), new("t-2", "what about lighthouses"), new("t-3")],
        )
        seqs = [m.seq for m in await store.message_page("t")]
        await observed(store, "thread:t", "t", seqs, "user shared a code")
        assert await store.append_chunks(
            "thread:t",
            expected_tails={"t": seqs[1]},
            chunks=[chunk("c1", "t", seqs[2], seqs[3])],
            lease=None,
            extracted=None,
            buffered_at_tokens=20,
        )
        found = await store.find_text("LIGHTHOUSE", EVERY_RESOURCE)
        assert [m.id for m in found.messages] == ["t-0", "t-2"] and not found.truncated
        assert (await store.find_text("lighthouse", Access.to(["elsewhere"]))).messages == []
        record = await store.record("thread:t")
        assert record
        plan = Rewrite(expected={"thread:t": record.version - 1}, messages={"t": [seqs[0], seqs[2]]})
        assert await store.apply_rewrite(plan) is None  # made from an older state: nothing changes
        assert len(await store.message_page("t")) == 4
        plan.expected = {"thread:t": record.version}
        done = await store.apply_rewrite(plan)
        assert done and (done.messages, done.records) == (2, ["thread:t"])
        assert [m.id for m in await store.message_page("t")] == ["t-1", "t-3"]
        thread = await store.get_thread("t")
        assert thread and thread.message_count == 2
        assert await store.chunks("thread:t") == []  # observed from a forgotten message: buffered again
        state = await store.record_state("thread:t", "t")
        assert state.pending_tokens == 10  # t-3 alone
        [kept] = await store.groups("thread:t")
        assert (kept.first_message_id, kept.last_message_id) == ("t-1", "t-1")
        after = await store.record("thread:t")
        assert after and after.edits == record.edits + 1 and after.version > record.version
        hits, stats = await store.search_messages("r", parse_query("lighthouse code"))
        assert hits == [] and stats.rows == 2
        hits, _ = await store.search_messages("r", parse_query("noted"))
        assert max(hits, key=lambda h: h.score).body == "noted"  # and t-3, by the message before it
        assert (await store.find_text("lighthouse", EVERY_RESOURCE)).messages == []


async def test_a_corrected_group_is_found_by_its_new_words_and_a_removed_one_not_at_all():
    async with opened() as store:
        seqs = await filled(store, "t", 2)
        await observed(store, "thread:t", "t", seqs, "user likes green tea")
        [old] = await store.groups("thread:t")
        assert await store.group_records([old.id, "nobody"]) == {old.id: "thread:t"}
        [(key, quoted)] = (await store.find_text("GREEN TEA", EVERY_RESOURCE)).groups
        assert (key, quoted.id) == ("thread:t", old.id)
        record = await store.record("thread:t")
        assert record
        done = await store.apply_rewrite(
            Rewrite(expected={"thread:t": record.version}, groups={old.id: ("user likes black coffee", 4)})
        )
        assert done and (done.groups_changed, done.groups_removed) == (1, 0)
        assert await store.search_groups("r", parse_query("tea").match) == []
        [hit] = await store.search_groups("r", parse_query("coffee").match)
        assert hit.group.id == old.id and hit.group.tokens == 4
        after = await store.record("thread:t")
        assert after and after.observation_tokens == 4
        done = await store.apply_rewrite(Rewrite(expected={"thread:t": after.version}, groups={old.id: None}))
        assert done and done.groups_removed == 1
        assert (
            await store.groups("thread:t") == [] and await store.search_groups("r", parse_query("coffee").match) == []
        )
        record = await store.record("thread:t")
        assert record and record.observation_tokens == 0


async def test_a_phrase_is_scrubbed_from_what_the_models_derived():
    async with opened() as store:
        seqs = await filled(store, "t", 2, thread_metadata={"om": {"values": {"code": "secret plan"}, "keep": 1}})
        await store.update_thread("t", title="The secret plan")
        await store.update_working_memory("resource", "r", lambda old: "# Notes\n- the Secret Plan\n- tea")
        await observed(store, "thread:t", "t", seqs, "observed")
        await store.add_events([{"type": "data-om-observation-end", "record_id": "thread:t", "note": "SECRET PLAN"}])
        record = await store.record("thread:t")
        assert record
        done = await store.apply_rewrite(
            Rewrite(expected={"thread:t": record.version}, scrub="secret plan", scrub_within=Access.to(["r"]))
        )
        # the task, the metadata value, the title, a memory line and its copy in the memory's history, the event
        assert done and done.derived == 6
        thread = await store.get_thread("t")
        assert thread and thread.title is None and thread.metadata == {"om": {"values": {}, "keep": 1}}
        assert await store.get_working_memory("resource", "r") == "# Notes\n- tea"
        assert (await store.thread_hints("thread:t", ["t"]))["t"].current_task is None
        assert await store.events(record_key="thread:t") == []


async def test_spend_adds_up_per_day_and_model():
    async with opened() as store:
        await store.add_spend("2026-01-01", "m", 10, 2, 0.5)
        await store.add_spend("2026-01-02", "m", 1, 1, None)
        await store.add_spend("2026-01-02", "m", 4, 3, 0.25)
        await store.add_spend("2026-01-02", "local", 7, 7, None)
        assert [
            (d.day, d.model, d.calls, d.input_tokens, d.output_tokens, d.usd, d.unpriced_calls)
            for d in await store.spend_since("2026-01-02")
        ] == [("2026-01-02", "local", 1, 7, 7, 0.0, 1), ("2026-01-02", "m", 2, 5, 4, 0.25, 1)]
        assert len(await store.spend_since("2026-01-01")) == 3


async def test_reservations_hold_a_cap_for_every_writer_and_settle_to_what_was_used():
    """Many writers reserving at once (PostgreSQL: a pool of connections) never hold more than the cap;
    a settled call counts what it used, a released one nothing, an abandoned one its estimate, and a
    reservation never settled is folded in at its estimate once its time is up."""
    month = ("2026-01-01", "2026-02-01")
    caps = {"daily_tokens": 1000.0}

    def reservation(rid: str, tokens: int = 100, ttl: float = 600.0) -> Reservation:
        return Reservation(rid, "2026-01-02", "m", tokens - 20, 20, 0.001, ttl)

    async with opened() as store:
        outcomes = await asyncio.gather(*(store.reserve_spend(reservation(f"r{i}"), caps, month) for i in range(25)))
        made = [f"r{i}" for i, o in enumerate(outcomes) if o.made]
        assert len(made) == 10  # 10 x 100 fit under 1,000; the 15 others were refused
        refused = next(o for o in outcomes if not o.made)
        assert refused.refused_by == "daily_tokens" and refused.totals.day_tokens + 100 > 1000
        held = await store.open_reservations("2026-01-01")
        assert sum(r[2] for r in held) == 1000
        assert await store.settle_spend(made[0], 30, 10, 0.0004)
        assert await store.settle_spend(made[1], 0, 0, None, released=True)
        assert await store.settle_spend(made[2], 0, 0, None, abandoned=True)
        assert not await store.settle_spend(made[2], 0, 0, None)  # once
        [day] = await store.spend_since("2026-01-02")
        assert (day.calls, day.input_tokens + day.output_tokens, day.abandoned_calls, day.refused_calls) == (
            2,
            140,
            1,
            15,
        )
        assert day.refused_tokens == 100  # the last refused estimate: what every process's status reads
        # a reservation whose process died: folded in at its estimate by the next reservation
        assert (await store.reserve_spend(reservation("lost", ttl=-1.0), {}, month)).made
        assert (await store.reserve_spend(reservation("next"), {}, month)).made
        [day] = await store.spend_since("2026-01-02")
        assert (day.calls, day.abandoned_calls, day.refused_tokens) == (3, 2, 0)  # a call fitted: no reason to wait
        assert "lost" not in {r[1] for r in await store.open_reservations("2026-01-01")}


async def test_tombstones_refuse_what_was_forgotten_on_every_way_in():
    """A forgotten message is refused by its id in its thread and by its content (folded text of its
    text parts, role) anywhere in its resource; a deleted thread by its id at an import. What is kept
    is a keyed hash: no text, no id."""
    async with opened() as store:
        said = new("m1", "My old address is 12 Quokka Road")
        await store.append_messages("t", "r", "thread:t", [said, new("m2", "noted", role="assistant")])
        found = await store.find_text("quokka road", Access.to(["r"]))
        [gone] = found.messages
        done = await store.apply_rewrite(Rewrite({}, messages={"t": [gone.seq]}))
        assert done is not None and done.messages == 1
        again = await store.append_messages("t", "r", "thread:t", [said])
        assert (again.appended, again.forgotten) == ([], 1)
        spelled = new("other-id", "  my OLD address is\n12 quokka road ")  # another id, another thread
        copy = await store.append_messages("t2", "r", "thread:t2", [spelled, new("k", "kept")])
        assert copy.forgotten == 1 and [m.id for m in copy.appended] == ["k"]
        elsewhere = await store.append_messages("t3", "other", "thread:t3", [spelled])  # another resource
        assert elsewhere.forgotten == 0 and len(elsewhere.appended) == 1
        assert (await store.append_messages("t4", "r", "thread:t4", [said])).forgotten == 1
        assert await store.get_thread("t4") is None  # nothing to create a thread for
        summary = await store.forgotten_summary(Access.to(["r"]))  # the kinds are the whole database's
        assert (summary["tombstones"], summary["refused"]) == ({}, 3)
        summary = await store.forgotten_summary(EVERY_RESOURCE)
        assert (summary["tombstones"], summary["refused"]) == ({"content": 1, "message": 1}, 3)
        # a deleted thread: its ids are refused, its export is not imported back
        await filled(store, "gone", count=2)
        await store.delete_thread("gone")
        assert (await store.append_messages("gone", "r", "thread:gone", [new("gone-0")])).forgotten == 1
        items = [
            ("resource", {"id": "r", "working_memory": None, "created_at": T0, "updated_at": T0}),
            ("thread", {"id": "gone", "resource_id": "r", "title": "x", "created_at": T0, "updated_at": T0}),
            ("messages", ("gone", [new("gone-1")])),
        ]
        result = await store.import_records(items)
        assert result.skipped["forgotten thread"] == 1 and result.skipped["forgotten message"] == 1
        assert await store.get_thread("gone") is None
        assert (await store.forgotten_summary(EVERY_RESOURCE))["tombstones"] == {
            "content": 1,
            "message": 3,
            "thread": 1,
        }
        assert await store.erase_pending() is None and await store.finish_erase()


async def test_recent_sessions_list_a_resources_threads_with_messages_newest_first():
    async with opened() as store:
        await store.append_messages(
            "old", "r", "thread:old", [new("o1", "first  question\nhere"), new("o2", "a", role="assistant")]
        )
        await store.append_messages("new", "r", "thread:new", [new("n1", "hello"), new("n2", "last one")])
        await store.append_messages("other", "elsewhere", "thread:other", [new("x1")])
        await store.update_thread("new", title="New work")
        [newer, older] = await store.recent_sessions("r")
        assert (newer.thread_id, newer.title, newer.messages) == ("new", "New work", 2)
        assert (newer.first_prompt, newer.last_prompt) == ("hello", "last one")
        assert (older.first_prompt, older.last_prompt, older.messages) == ("first question here",) * 2 + (2,)
        assert [s.thread_id for s in await store.recent_sessions("r", exclude_thread="new", limit=5)] == ["old"]
        assert len(await store.recent_sessions("r", limit=1)) == 1


# -- moving a memory --------------------------------------------------------------------------------


async def test_an_export_imports_back_whole_and_only_once():
    async with opened() as source:
        seqs = await filled(source, "t", 3, thread_metadata={"title": "T"})
        await source.update_working_memory("resource", "r", lambda old: "# notes")
        assert await source.commit_observation(
            "thread:t",
            lease=None,
            expected_cursors={"t": 0},
            new_cursors={"t": seqs[1]},
            groups=[group("observed", seqs[0], seqs[1], thread_id="t", first_message_id="t-0", last_message_id="t-1")],
            hints={"t": {"current_task": "go on"}},
            extracted={"k": "v"},
            observed_at=T0,
        )
        records = await source.export(list, EVERY_RESOURCE)
        assert [r["type"] for r in records] == [
            "resource",
            "thread",
            "message",
            "message",
            "message",
            "observation_record",
            "observation_group",
        ]
        assert records[5]["observed_through"] == {"t": "t-1"} and records[5]["hints"]["t"]["current_task"] == "go on"
        assert await source.export(list, Access.to(["nobody"])) == []

    async with opened() as target:
        items = []
        for r in records:
            if r["type"] == "message":
                items.append(("messages", (r["thread_id"], [new(r["id"], r["parts"][0]["text"])])))
            else:
                items.append(
                    ({"observation_record": "record", "observation_group": "group"}.get(r["type"], r["type"]), r)
                )
        result = await target.import_records(items)
        assert dict(result.added) == {
            "resource": 1,
            "thread": 1,
            "message": 3,
            "observation_record": 1,
            "observation_group": 1,
        }
        again = await target.import_records(items)
        assert not again.added and dict(again.skipped) == dict(result.added)
        await target.set_thread_times("t", "2020-01-01T00:00:00+00:00", "2020-01-02T00:00:00+00:00")
        thread = await target.get_thread("t")
        assert thread and (thread.created_at, thread.title) == ("2020-01-01T00:00:00+00:00", "T")
        record = await target.record("thread:t")
        assert record and record.extracted == {"k": "v"} and record.observation_tokens == 1
        state = await target.record_state("thread:t", "t")
        assert state.pending_messages == 1 and state.pending_tokens == 10  # recomputed, not trusted
        assert await target.get_working_memory("resource", "r") == "# notes"
        assert [g.text for g in await target.groups("thread:t")] == ["observed"]
        assert await target.integrity() == []


async def test_an_export_streams_to_a_writer_in_one_snapshot():
    async with opened() as store:
        await filled(store, "t", 200)
        out = io.StringIO()

        def write(records) -> int:
            count = 0
            for record in records:
                out.write(json.dumps(record) + "\n")
                count += 1
            return count

        assert await store.export(write, EVERY_RESOURCE) == 203  # resource, thread, 200 messages, observation record
        assert out.getvalue().count('"type": "message"') == 200


# -- looking at a memory -------------------------------------------------------------------------------


async def test_stats_integrity_and_the_overview_reads():
    async with opened() as store:
        await filled(store, "t", 3)
        stats = await store.stats()
        assert (stats.resources, stats.threads, stats.messages, stats.pending_tokens) == (1, 1, 3, 30)
        assert stats.backend == store.backend and await store.integrity() == []
        [state] = await store.thread_states("thread", access=EVERY_RESOURCE, resource_id="r")
        assert state.thread.id == "t"
        assert await store.pending_records() == [("thread:t", 30, 0)]
        inputs = await store.series_inputs("thread:t")
        assert len(inputs.messages) == 3


async def test_oauth_secrets_are_stored_as_digests_used_once_and_revoked_by_family():
    """OAuth's rules (store/oauth.py): a one-time secret is used once and its replacements stored
    with it; used again, it revokes its grant; every token of a revoked grant stops being live."""
    async with opened() as store:
        await store.oauth_put_client("c1", json.dumps({"client_name": "phone", "redirect_uris": ["https://x/cb"]}))
        assert json.loads(await store.oauth_client("c1"))["client_name"] == "phone"
        assert await store.oauth_client("c2") is None
        await store.oauth_new_grant("g1", "c1", ["alice"])
        await store.oauth_put_secret("sha256:code", "code", "g1", {"code_challenge": "x"}, 60)
        used = await store.oauth_redeem("sha256:code", "code", [("sha256:rt", "refresh", {}, 600.0)])
        assert used is not None and used.resources == ["alice"] and used.detail == {"code_challenge": "x"}
        assert await store.oauth_redeem("sha256:code", "wrong-kind") is None
        refresh = await store.oauth_secret("sha256:rt", "refresh")
        assert refresh is not None and refresh.live and refresh.grant_id == "g1"
        # The code presented again: nothing issued, and its grant (the refresh token with it) revoked.
        assert await store.oauth_redeem("sha256:code", "code", [("sha256:rt2", "refresh", {}, 600.0)]) is None
        assert await store.oauth_secret("sha256:rt2", "refresh") is None
        assert not (await store.oauth_secret("sha256:rt", "refresh")).live
        [grant] = await store.oauth_grants()
        assert grant.revoked and grant.client_name == "phone" and grant.live_tokens == 0
        assert not await store.oauth_revoke_grant("g1")  # already revoked
        # Consent codes: a wrong one counts a failure against every outstanding code.
        await store.oauth_put_secret("sha256:consent", "consent", None, {"resources": None}, 600)
        assert await store.oauth_consent_failed(2) == 1
        assert await store.oauth_consent_failed(2) == 0
        assert (await store.oauth_secret("sha256:consent", "consent")).failures == 2
