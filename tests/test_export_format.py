"""om-mcp's JSONL export: a whole memory round-trips, and every broken file is refused by line and field."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime

import pytest

from om_mcp.importers.jsonl_format import ExportFormatError, read_records, write_records
from om_mcp.importers.jsonl_records import MINOR, VERSION

T = "2025-05-01T09:00:00+00:00"


def memory() -> list[dict]:
    """A small but complete memory: a resource, two threads, a record with two generations."""
    return [
        {
            "type": "resource",
            "id": "alice",
            "working_memory": "# User\n- Name: Alice\n- Diet: vegetarian",
            "created_at": T,
            "updated_at": "2025-05-03T10:00:00+00:00",
        },
        {
            "type": "thread",
            "id": "t-lisbon",
            "resource_id": "alice",
            "title": "Trip to Lisbon",
            "title_pinned": True,
            "metadata": {"import": {"source": "claude"}},
            "working_memory": None,
            "created_at": T,
            "updated_at": "2025-05-01T09:20:00+00:00",
        },
        {
            "type": "message",
            "id": "m1",
            "thread_id": "t-lisbon",
            "role": "user",
            "parts": [{"type": "text", "text": "Plan three days in Lisbon; I don't eat fish."}],
            "created_at": "2025-05-01T09:00:05+00:00",
            "metadata": {},
        },
        {
            "type": "message",
            "id": "m2",
            "thread_id": "t-lisbon",
            "role": "assistant",
            "parts": [
                {"type": "reasoning", "text": "vegetarian"},
                {"type": "tool-call", "tool_name": "search", "args": {"q": "vegetarian tasca"}, "tool_call_id": "c1"},
                {"type": "tool-result", "tool_name": "search", "result": {"hits": [1, None]}, "tool_call_id": "c1"},
                {"type": "text", "text": "Day 1: Alfama..."},
            ],
            "created_at": "2025-05-01T09:00:30+00:00",
            "metadata": {"model": "claude-sonnet-4-5"},
        },
        {
            "type": "message",
            "id": "m0",
            "thread_id": "t-lisbon",
            "role": "user",  # out of time order: file order wins
            "parts": [
                {"type": "image", "mime_type": "image/png", "name": "map.png", "width": 800, "height": 600},
                {"type": "file", "mime_type": "application/pdf", "name": "tickets.pdf"},
            ],
            "created_at": "2025-05-01T08:59:00+00:00",
            "metadata": {},
        },
        {
            "type": "thread",
            "id": "t-empty",
            "resource_id": "alice",
            "title": None,
            "title_pinned": False,
            "metadata": {},
            "working_memory": "thread notes",
            "created_at": T,
            "updated_at": T,
        },
        {
            "type": "observation_record",
            "key": "thread:t-lisbon",
            "scope": "thread",
            "resource_id": "alice",
            "thread_id": "t-lisbon",
            "generation": 1,
            "observed_through": {"t-lisbon": "m2"},
            "hints": {"t-lisbon": {"current_task": "planning day 2", "suggested_response": None}},
            "extracted": {"thread_title": "Trip to Lisbon", "nested": {"k": None}},
            "last_observed_at": "2025-05-01T09:00:30+00:00",
            "last_reflection_at": "2025-05-02T00:00:00+00:00",
            "created_at": T,
            "updated_at": "2025-05-02T00:00:00+00:00",
        },
        {
            "type": "observation_group",
            "id": "g1",
            "record_key": "thread:t-lisbon",
            "generation": 0,
            "position": 0,
            "kind": "observation",
            "thread_id": "t-lisbon",
            "first_message_id": "m1",
            "last_message_id": "m1",
            "text": "* 🔴 (09:00) User does not eat fish.",
            "tokens": 12,
            "observed_at": "2025-05-01T09:00:05+00:00",
            "created_at": "2025-05-01T09:01:00+00:00",
        },
        {
            "type": "observation_group",
            "id": "g2",
            "record_key": "thread:t-lisbon",
            "generation": 0,
            "position": 1,
            "kind": "observation",
            "thread_id": "t-lisbon",
            "first_message_id": "m2",
            "last_message_id": "m2",
            "text": "* 🟡 (09:00) Assistant proposed Alfama for day 1.",
            "tokens": 14,
            "observed_at": "2025-05-01T09:00:30+00:00",
            "created_at": "2025-05-01T09:02:00+00:00",
        },
        {
            "type": "observation_group",
            "id": "g3",
            "record_key": "thread:t-lisbon",
            "generation": 1,
            "position": 0,
            "kind": "reflection",
            "thread_id": None,
            "first_message_id": "m1",
            "last_message_id": "m2",
            "text": "* 🔴 User is vegetarian; planning Lisbon, day 1 Alfama.",
            "tokens": 15,
            "observed_at": "2025-05-01T09:00:30+00:00",
            "created_at": "2025-05-02T00:00:00+00:00",
        },
    ]


def _write(records, **kw) -> str:
    out = io.StringIO()
    write_records(records, out, **kw)
    return out.getvalue()


def _lines(records) -> list[dict]:
    return [json.loads(line) for line in _write(records).splitlines()]


def test_a_memory_round_trips_in_order():
    records = memory()
    text = _write(records, source="om-mcp test (memory.db)", exported_at=datetime(2025, 6, 1, 12, 0, tzinfo=UTC))
    lines = text.splitlines()
    assert json.loads(lines[0]) == {
        "type": "om-mcp-export",
        "version": VERSION,
        "minor": MINOR,
        "exported_at": "2025-06-01T12:00:00+00:00",
        "source": "om-mcp test (memory.db)",
    }
    assert json.loads(lines[-1]) == {
        "type": "end",
        "counts": {"resource": 1, "thread": 2, "message": 3, "observation_record": 1, "observation_group": 3},
    }
    out = list(read_records(io.StringIO(text)))
    assert out[0]["type"] == "om-mcp-export" and out[0]["source"] == "om-mcp test (memory.db)"
    assert out[1:] == records  # every field, every part, file order kept (m0 after m2)


def test_writing_twice_gives_the_same_bytes():
    when = datetime(2025, 6, 1, tzinfo=UTC)
    assert _write(memory(), exported_at=when) == _write(memory(), exported_at=when)


def test_times_are_normalised_to_aware_iso():
    records = memory()
    records[2]["created_at"] = "2025-05-01T09:00:05"  # naive: read as UTC
    records[3]["created_at"] = "2025-05-01T11:00:30+02:00"  # the offset is kept
    out = list(read_records(io.StringIO(_write(records))))
    assert out[3]["created_at"] == "2025-05-01T09:00:05+00:00"
    assert out[4]["created_at"] == "2025-05-01T11:00:30+02:00"


def _broken(mutate) -> str:
    lines = _write(memory()).splitlines()
    mutate(lines)
    return "\n".join(lines) + "\n"


def _set(index, **changes):
    def mutate(lines):
        record = json.loads(lines[index])
        for key, value in changes.items():
            if value is ...:
                record.pop(key)
            else:
                record[key] = value
        lines[index] = json.dumps(record)

    return mutate


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (_set(3, role=...), r"line 4: message\.role: Field required"),
        (_set(3, role="robot"), r"line 4: message\.role: Input should be 'user', 'assistant', 'system' or 'tool'"),
        (_set(3, parts=[{"type": "text"}]), r"line 4: message\.parts\.0\.text\.text: Field required"),
        (_set(3, parts=[]), r"line 4: message\.parts: List should have at least 1 item"),
        (_set(3, thread_id="nope"), r"line 4: message\.thread_id: names thread 'nope', which no earlier record"),
        (_set(4, id="m1"), r"line 5: message\.id: message 'm1' appears twice in thread 't-lisbon'"),
        (_set(3, colour="red"), r"line 4: message\.colour: Extra inputs are not permitted"),
        (_set(2, type="chat"), r"line 3: type: unknown record type 'chat'"),
        (_set(7, key="thread:other"), r"line 8: observation_record: Value error, key 'thread:other' does not match"),
        (
            _set(7, observed_through={"t-lisbon": "m9"}),
            r"line 8: observation_record\.observed_through: names message of thread 't-lisbon' 'm9'",
        ),
        (_set(10, generation=2), r"line 11: observation_group\.generation: generation 2 is past"),
        (_set(9, position=0), r"line 10: observation_group\.position: two groups at generation 0, position 0"),
        (_set(8, record_key="thread:x"), r"line 9: observation_group\.record_key: names observation record"),
        (_set(0, version=VERSION + 1), rf"line 1: version: format version {VERSION + 1} is newer than this om-mcp"),
        (_set(0, type="something"), r"line 1: type: not an om-mcp export"),
        (lambda lines: lines.pop(), r"line 11: the file ends without its end record: it was cut short"),
        (lambda lines: lines.pop(5), r"line 11: counts: the file holds .* but says"),
        (lambda lines: lines.append(lines[1]), r"line 13: a record after the end record"),
        (lambda lines: lines.__setitem__(2, '{"type": "thread", '), r"line 3: not valid JSON"),
        (lambda lines: lines.__setitem__(2, "[1, 2]"), r"line 3: a record must be a JSON object"),
    ],
)
def test_broken_files_are_refused_by_line_and_field(mutate, expected):
    with pytest.raises(ExportFormatError, match=expected):
        list(read_records(io.StringIO(_broken(mutate))))


def test_an_empty_file_is_not_an_export():
    with pytest.raises(ExportFormatError, match="the file is empty"):
        list(read_records([]))


def test_a_newer_minor_version_may_add_fields():
    text = _broken(lambda lines: (_set(0, minor=3)(lines), _set(3, colour="red")(lines)))
    out = list(read_records(io.StringIO(text)))
    assert out[0]["minor"] == 3 and "colour" not in out[3]


def test_the_writer_refuses_what_the_reader_would_refuse():
    records = memory()
    records[2]["parts"] = [{"type": "image", "name": "no-mime.png"}]
    out = io.StringIO()
    with pytest.raises(ExportFormatError, match=r"record 3: message\.parts\.0\.image\.mime_type: Field required"):
        write_records(records, out)
    with pytest.raises(ExportFormatError, match=r"record 1: type: unknown record type 'om-mcp-export'"):
        write_records([{"type": "om-mcp-export"}], io.StringIO())


def test_a_retired_group_round_trips_and_the_pile_goes_with_retired_by():
    records = memory()
    group = next(r for r in records if r["type"] == "observation_group")
    retired = {**group, "id": "g-retired", "generation": -1, "position": 0}
    retired.update(retired_by=1, retired_reason="dropped", replaced_by=None)
    text = _write([*records, retired])
    out = list(read_records(io.StringIO(text)))
    back = next(r for r in out if r.get("id") == "g-retired")
    assert back["generation"] == -1 and back["retired_by"] == 1 and back["retired_reason"] == "dropped"
    assert "retired_by" not in next(r for r in out if r.get("id") == group["id"])
    broken = {**retired, "retired_by": None}
    with pytest.raises(ExportFormatError, match="retired_by"):
        list(read_records(io.StringIO(_write([*records, broken]))))
