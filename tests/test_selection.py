"""Which messages a cycle takes, and which threads a resource-scope run observes together."""

from __future__ import annotations

from om_mcp.engine.observation.selection import (
    batches,
    choose_threads,
    first_visible,
    last_visible,
    leave_turn_raw,
    safe_prefix,
)
from om_mcp.store.rows import Message

_seq = 0


def message(role: str, *parts: dict, tokens: int = 10) -> Message:
    global _seq
    _seq += 1
    return Message(
        seq=_seq,
        id=f"m{_seq}",
        thread_id="t",
        resource_id="r",
        role=role,
        parts=list(parts) or [{"type": "text", "text": f"{role} {_seq}"}],
        created_at="2026-05-20T10:00:00+00:00",
        metadata={},
        tokens=tokens,
    )


def call(call_id: str | None, name: str = "search") -> dict:
    part = {"type": "tool-call", "tool_name": name, "args": {"q": "x"}}
    if call_id is not None:
        part["tool_call_id"] = call_id
    return part


def result(call_id: str | None, name: str = "search") -> dict:
    part = {"type": "tool-result", "tool_name": name, "result": "found"}
    if call_id is not None:
        part["tool_call_id"] = call_id
    return part


def ids(messages: list[Message]) -> list[str]:
    return [m.id for m in messages]


# --------------------------------------------------------------------------------------
# The turn in progress
# --------------------------------------------------------------------------------------


def test_the_last_user_message_and_what_follows_stay_raw():
    history = [message("user"), message("assistant"), message("user"), message("assistant")]
    assert ids(leave_turn_raw(history)) == ids(history[:2])


def test_a_lone_turn_is_observed_rather_than_nothing():
    only = [message("user"), message("assistant"), message("tool")]
    assert ids(leave_turn_raw(only)) == ids(only)
    no_user = [message("assistant"), message("assistant")]
    assert ids(leave_turn_raw(no_user)) == ids(no_user)
    assert leave_turn_raw([]) == []


# --------------------------------------------------------------------------------------
# Never split a tool call from its result
# --------------------------------------------------------------------------------------


def test_a_trailing_call_without_its_result_is_left_for_later():
    history = [message("user"), message("assistant", call("c1"))]
    assert ids(safe_prefix(history)) == ids(history[:1])


def test_a_call_with_its_result_is_kept():
    history = [message("user"), message("assistant", call("c1")), message("tool", result("c1"))]
    assert ids(safe_prefix(history)) == ids(history)


def test_a_call_and_its_result_in_one_message_are_kept():
    history = [message("user"), message("assistant", call(None), result(None))]
    assert ids(safe_prefix(history)) == ids(history)


def test_several_pending_calls_are_all_dropped():
    history = [message("user"), message("assistant", call("c1")), message("assistant", call("c2"))]
    assert ids(safe_prefix(history)) == ids(history[:1])


def test_one_answered_and_one_pending_call_in_the_last_message_waits():
    history = [message("user"), message("tool", result("c1")), message("assistant", call("c1"), call("c2"))]
    assert ids(safe_prefix(history)) == ids(history[:2])


def test_a_call_without_an_id_at_the_end_waits():
    history = [message("user"), message("tool", result(None)), message("assistant", call(None))]
    assert ids(safe_prefix(history)) == ids(history[:2])


def test_plain_messages_pass_through_and_the_input_is_not_changed():
    history = [message("user"), message("assistant")]
    assert ids(safe_prefix(history)) == ids(history)
    pending = [message("user"), message("assistant", call("x"))]
    safe_prefix(pending)
    assert len(pending) == 2
    assert safe_prefix([]) == []


# --------------------------------------------------------------------------------------
# Visible ends of a range
# --------------------------------------------------------------------------------------


def test_first_and_last_visible_skip_system_messages():
    history = [message("system"), message("user"), message("assistant"), message("system")]
    assert first_visible(history).id == history[1].id
    assert last_visible(history).id == history[2].id
    only_system = [message("system"), message("system")]
    assert first_visible(only_system).id == only_system[0].id
    assert last_visible(only_system).id == only_system[1].id


# --------------------------------------------------------------------------------------
# Resource scope: threads and batches
# --------------------------------------------------------------------------------------


def test_choose_threads_takes_the_busiest_until_the_threshold_is_covered():
    sizes = {"a": 100, "b": 500, "c": 300, "d": 300}
    assert choose_threads(sizes, 700, everything=False) == ["b", "c"]
    assert choose_threads(sizes, 800, everything=False) == ["b", "c"]  # 800 reached exactly
    assert choose_threads(sizes, 801, everything=False) == ["b", "c", "d"]  # ties by id
    assert choose_threads(sizes, 1, everything=True) == ["b", "c", "d", "a"]
    assert choose_threads({}, 10, everything=False) == []
    assert choose_threads(sizes, 0, everything=False) == []


def test_batches_packing_is_greedy_in_order_with_oversized_alone():
    sizes = {"a": 40, "b": 50, "c": 500, "d": 30, "e": 30, "f": 45}
    assert batches(list(sizes), sizes, 100) == [["a", "b"], ["c"], ["d", "e"], ["f"]]
    assert batches(["c"], sizes, 100) == [["c"]]
    assert batches([], sizes, 100) == []
    assert batches(["a", "b"], sizes, 90) == [["a", "b"]]  # the limit is inclusive
    assert batches(["c", "a"], sizes, 100) == [["c"], ["a"]]
