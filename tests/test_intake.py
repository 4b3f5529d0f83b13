"""Messages on their way in: validation that names the field, derived ids, counts,
search text, and the pause markers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from om_mcp.config import Config
from om_mcp.engine.errors import InputError
from om_mcp.engine.intake import (
    MAX_METADATA_CHARS,
    MAX_TITLE_CHARS,
    check_id,
    check_metadata,
    check_text,
    check_thread_metadata,
    index_text,
    prepare,
    with_gap_markers,
)
from om_mcp.engine.tokens import get_token_counter
from om_mcp.store.rows import NewMessage

COUNTER = get_token_counter()


def run(messages, **config) -> list[NewMessage]:
    return prepare(Config.model_validate(config), COUNTER, messages)


def refused(messages, **config) -> InputError:
    with pytest.raises(InputError) as info:
        run(messages, **config)
    return info.value


# --------------------------------------------------------------------------------------
# Validation: every error names the field
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "messages, field, words",
    [
        ([], "messages", "non-empty list"),
        ("hello", "messages", "non-empty list"),
        ([{"role": "robot", "content": "x"}], "messages[0].role", "'user', 'assistant', 'system' or 'tool'"),
        ([{"role": "user"}], "messages[0].content", "required"),
        ([{"role": "user", "content": "x", "bogus": 1}], "messages[0].bogus", "Extra inputs"),
        ([{"role": "user", "content": "x", "created_at": "yesterday"}], "messages[0].created_at", "datetime"),
        ([{"role": "user", "content": "ok"}, "not a message"], "messages[1]", "dictionary"),
        ([{"role": "user", "content": "x", "id": ""}], "messages[0].id", "at least 1 character"),
        ([{"role": "user", "content": "x", "id": "   "}], "messages[0].id", "non-empty string"),
        ([{"role": "user", "content": "x", "id": "a\nb"}], "messages[0].id", "control characters"),
        ([{"role": "user", "content": "x", "id": "x" * 201}], "messages[0].id", "at most 200"),
        ([{"role": "user", "content": "bad \ud800"}], "messages[0].content", "lone surrogate"),
        (
            [{"role": "user", "content": "x", "metadata": {"k": ["ok", "bad \udfff"]}}],
            "messages[0].metadata.k[1]",
            "lone surrogate",
        ),
        ([{"role": "user", "content": "x", "metadata": "text"}], "messages[0].metadata", "dictionary"),
        (
            [{"role": "user", "content": "x", "metadata": {"big": "y" * MAX_METADATA_CHARS}}],
            "messages[0].metadata",
            f"the limit is {MAX_METADATA_CHARS}",
        ),
    ],
)
def test_bad_input_is_refused_naming_the_field(messages, field, words):
    error = refused(messages)
    assert error.field == field
    assert str(error).startswith(field)
    assert words in str(error)


def test_errors_inside_content_parts_name_the_content():
    error = refused([{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image"}]}])
    assert error.field.startswith("messages[0].content")


def test_batch_and_message_size_limits():
    error = refused([{"role": "user", "content": "x"}] * 3, max_batch_messages=2)
    assert error.field == "messages" and "3 items" in str(error) and "2" in str(error)
    error = refused(
        [{"role": "user", "content": "short"}, {"role": "user", "content": "y" * 200}], max_message_chars=100
    )
    assert error.field == "messages[1].content" and "the limit is 100" in str(error)


def test_check_id():
    assert check_id("thread-1", "thread_id") == "thread-1"
    for bad, words in [
        (5, "non-empty string"),
        (None, "non-empty string"),
        ("", "non-empty string"),
        ("x" * 201, "limit is 200"),
        ("tab\there", "control"),
        ("\udc00", "invalid Unicode"),
    ]:
        with pytest.raises(InputError) as info:
            check_id(bad, "thread_id")
        assert info.value.field == "thread_id" and words in str(info.value), bad


def test_check_text_walks_nested_values():
    check_text({"a": ["fine", {"b": "fine"}]}, "metadata")
    with pytest.raises(InputError) as info:
        check_text({"a": [{"b": "x"}, {"c": "\ud83d"}]}, "metadata")
    assert info.value.field == "metadata.a[1].c"
    with pytest.raises(InputError) as info:
        check_text({"\ud83d": 1}, "metadata")  # a bad key: blamed on its container
    assert info.value.field == "metadata"


def test_check_metadata():
    assert check_metadata(None, "m") == {}
    assert check_metadata({"a": 1}, "m") == {"a": 1}
    with pytest.raises(InputError) as info:
        check_metadata([1], "m")
    assert info.value.field == "m"


def test_check_thread_metadata():
    assert check_thread_metadata(None) == {}
    assert check_thread_metadata({"title": "Trip", "x": 1}) == {"title": "Trip", "x": 1}
    for bad, field in [
        (5, "thread_metadata"),
        ({"title": 5}, "thread_metadata.title"),
        ({"title": "t" * (MAX_TITLE_CHARS + 1)}, "thread_metadata.title"),
    ]:
        with pytest.raises(InputError) as info:
            check_thread_metadata(bad)
        assert info.value.field == field, bad


# --------------------------------------------------------------------------------------
# What a valid message becomes
# --------------------------------------------------------------------------------------


def test_plain_content_becomes_one_text_part_counted_and_searchable():
    [row] = run(
        [
            {
                "id": "m1",
                "role": "user",
                "content": "hello there",
                "created_at": "2026-05-20T10:00:00+02:00",
                "metadata": {"speaker": "Ana"},
            }
        ]
    )
    assert row.id == "m1"
    assert row.parts == [{"type": "text", "text": "hello there"}]
    assert row.created_at == "2026-05-20T10:00:00+02:00"  # the time zone is kept
    assert row.created_at_given is True
    assert row.metadata == {"speaker": "Ana"}
    assert row.body == "Ana: hello there"
    expected, cache = COUNTER.count_message({"role": "user", "parts": row.parts})
    assert row.tokens == expected and row.part_tokens == cache["parts"]
    assert row.observable is True


def test_naive_times_are_utc_and_missing_times_are_now():
    [naive] = run([{"role": "user", "content": "x", "created_at": "2026-05-20T10:00:00"}])
    assert naive.created_at == "2026-05-20T10:00:00+00:00"
    before = datetime.now(UTC)
    [now] = run([{"role": "user", "content": "x"}])
    assert now.created_at_given is False
    assert before <= datetime.fromisoformat(now.created_at) <= datetime.now(UTC)


def test_parts_are_stored_without_empty_fields():
    [row] = run(
        [
            {
                "role": "assistant",
                "content": [
                    {"type": "tool-call", "tool_name": "search", "args": {"q": "x"}, "tool_call_id": "c1"},
                    {"type": "tool-result", "tool_name": "search", "result": "ok", "tool_call_id": "c1"},
                    {"type": "tool-result", "tool_name": "book", "result": "no", "is_error": True},
                    {"type": "image", "mime_type": "image/png", "name": "a.png", "width": 10, "height": 20},
                ],
            }
        ]
    )
    assert row.parts == [
        {"type": "tool-call", "tool_name": "search", "args": {"q": "x"}, "tool_call_id": "c1"},
        {"type": "tool-result", "tool_name": "search", "result": "ok", "tool_call_id": "c1"},
        {"type": "tool-result", "tool_name": "book", "result": "no", "is_error": True},
        {"type": "image", "mime_type": "image/png", "name": "a.png", "width": 10, "height": 20},
    ]
    assert len(row.part_tokens) == 4
    assert 'search {"q": "x"}' in row.body and "a.png image/png" in row.body


def test_system_messages_are_stored_but_never_observed():
    [row] = run([{"role": "system", "content": "You are helpful."}])
    assert row.observable is False


def test_index_text_speaker_prefix():
    parts = [{"type": "text", "text": "hello"}]
    assert index_text(parts, None) == "hello"
    assert index_text(parts, {"name": "Bo"}) == "Bo: hello"
    assert index_text([{"type": "text", "text": "Bo: hello"}], {"name": "Bo"}) == "Bo: hello"
    assert index_text(parts, {"speaker": 7}) == "hello"


# --------------------------------------------------------------------------------------
# Derived ids
# --------------------------------------------------------------------------------------


def test_a_message_without_an_id_gets_a_deterministic_one():
    message = {"role": "user", "content": "same words", "created_at": "2026-05-20T10:00:00Z"}
    [first] = run([message])
    [again] = run([dict(message)])
    assert first.id == again.id and first.id.startswith("m-")
    [later] = run([{**message, "created_at": "2026-05-20T10:00:01Z"}])
    [other_role] = run([{**message, "role": "assistant"}])
    [other_text] = run([{**message, "content": "other words"}])
    assert len({first.id, later.id, other_role.id, other_text.id}) == 4


def test_a_resend_without_a_time_gets_the_same_id():
    # The stored time defaults to now, but the id must not depend on it.
    [first] = run([{"role": "user", "content": "no time given"}])
    [again] = run([{"role": "user", "content": "no time given"}])
    assert first.id == again.id
    assert first.id != run([{"role": "user", "content": "no time given", "created_at": first.created_at}])[0].id


def test_identical_messages_in_one_batch_get_distinct_ids():
    rows = run(
        [
            {"role": "user", "content": "ok"},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "ok"},
            {"role": "user", "content": "ok"},
        ]
    )
    assert rows[2].id == rows[0].id + "-1" and rows[3].id == rows[0].id + "-2"
    assert len({r.id for r in rows}) == 4
    # The same batch again gives the same ids, so a re-send is recognised.
    assert [
        r.id
        for r in run(
            [
                {"role": "user", "content": "ok"},
                {"role": "assistant", "content": "ok"},
                {"role": "user", "content": "ok"},
                {"role": "user", "content": "ok"},
            ]
        )
    ] == [r.id for r in rows]


# --------------------------------------------------------------------------------------
# Pause markers
# --------------------------------------------------------------------------------------


T0 = datetime(2026, 5, 20, 10, 0, tzinfo=UTC)


def at(role: str, minutes: float, text: str = "x") -> NewMessage:
    created = (T0 + timedelta(minutes=minutes)).isoformat()
    return NewMessage(
        id=f"{role}{minutes}",
        role=role,
        parts=[{"type": "text", "text": text}],
        created_at=created,
        metadata={},
        body=text,
        tokens=5,
    )


def test_a_user_message_after_a_pause_gets_a_marker_before_it():
    rows = with_gap_markers(COUNTER, T0.isoformat(), [at("user", 180)])
    marker, message = rows
    assert message.id == "user180"
    assert marker.id == "user180~gap"
    assert marker.role == "system" and marker.observable is True  # the Observer must see the pause
    assert marker.metadata == {"om_kind": "temporal-gap"}
    assert marker.parts == [{"type": "text", "text": "[3 hours passed since the previous message]"}]
    assert marker.created_at == message.created_at
    assert marker.tokens == COUNTER.count_message({"role": "system", "parts": marker.parts})[0]
    assert marker.body == ""  # not searchable


def test_pause_markers_only_for_user_messages_after_ten_minutes():
    rows = with_gap_markers(
        COUNTER, T0.isoformat(), [at("user", 9.9), at("assistant", 30), at("user", 39.9), at("user", 50)]
    )
    assert [r.id for r in rows] == ["user9.9", "assistant30", "user39.9", "user50~gap", "user50"]
    assert rows[3].parts[0]["text"] == "[10 minutes passed since the previous message]"


def test_no_marker_without_a_previous_message_and_none_for_older_times():
    assert [r.id for r in with_gap_markers(COUNTER, None, [at("user", 0), at("user", 5)])] == ["user0", "user5"]
    # A message dated earlier than the newest one does not reset the clock.
    rows = with_gap_markers(COUNTER, None, [at("user", 60), at("user", 0), at("user", 65)])
    assert [r.id for r in rows] == ["user60", "user0", "user65"]


def test_a_resent_message_takes_its_pause_marker_with_it():
    from om_mcp.store.resends import settle
    from om_mcp.store.rows import Message

    stored = [
        Message(1, "x", "t", "r", "user", [{"type": "text", "text": "hello"}], "2026-01-01T09:00:00+00:00", {}, 3)
    ]
    marker = NewMessage(
        id="p~gap",
        role="system",
        parts=[{"type": "text", "text": "[20 minutes later]"}],
        created_at="2026-01-01T09:20:00+00:00",
        metadata={"om_kind": "temporal-gap"},
        body="",
        tokens=5,
        created_at_given=False,
        id_given=False,
    )
    [hello, later] = run([{"role": "user", "content": "hello"}, {"role": "user", "content": "later"}])
    settled, resent = settle(stored, "x", [marker, hello, later])
    assert resent == 1
    assert [m.parts[0]["text"] for m in settled] == ["later"]
    # a marker before a new message is renamed after it
    settled, resent = settle(stored, "x", [hello, marker, later])
    assert resent == 1 and [m.role for m in settled] == ["system", "user"]
    assert settled[0].id == f"{settled[1].id}~gap"
