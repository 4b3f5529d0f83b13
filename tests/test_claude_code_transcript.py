"""Claude Code transcripts -> messages: conversion rules and incremental reading.

`session.jsonl` (and its subagent file, `after_clear.jsonl`) were written by
Claude Code 2.1.197 itself, run against a scripted local API; paths were
rewritten to /home/user. `legacy_session.jsonl` holds entry kinds of older
versions (summary titles, file-history snapshots, in-file sidechains,
synthetic API errors, bash-mode markup).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from om_mcp.hosts.claude_code import (
    ConvertOptions,
    TranscriptState,
    read_messages,
    read_new,
    read_transcript,
    to_messages,
)
from om_mcp.messages import MessageIn
from om_mcp.trim import TRIM_MARKER, TrimRule, trim_text, trim_value

FIXTURES = Path(__file__).parent / "fixtures" / "claude_code"
SESSION = FIXTURES / "session.jsonl"
LEGACY = FIXTURES / "legacy_session.jsonl"
SUBAGENT = next((FIXTURES / "session" / "subagents").glob("agent-*.jsonl"))


def texts(message: dict) -> list[str]:
    return [p.get("text", "") for p in message["content"] if p["type"] == "text"]


def all_text(messages: list[dict]) -> str:
    return json.dumps(messages, ensure_ascii=False)


def validate(messages: list[dict]) -> None:
    for message in messages:
        MessageIn.model_validate(message)


# --------------------------------------------------------------------------------------
# Conversion of a real session
# --------------------------------------------------------------------------------------


def test_real_session_becomes_the_conversation_and_nothing_else() -> None:
    messages, state = read_messages(SESSION)
    validate(messages)
    assert state.offset == SESSION.stat().st_size
    roles = [m["role"] for m in messages]
    assert roles[:5] == ["user", "assistant", "assistant", "tool", "assistant"]
    assert texts(messages[0]) == ["please run ls for me"]
    # the assistant turn was written as one entry per block: text, then tool call
    assert texts(messages[1]) == ["Let me list the files."]
    call = messages[2]["content"][0]
    assert call == {
        "type": "tool-call",
        "tool_name": "Bash",
        "tool_call_id": "toolu_bash001",
        "args": {"command": "ls /home/user/project", "description": "List files"},
    }
    assert messages[1]["metadata"]["claude_message_id"] == messages[2]["metadata"]["claude_message_id"]
    result = messages[3]["content"][0]
    assert result["tool_name"] == "Bash" and result["tool_call_id"] == "toolu_bash001"
    assert result["result"] == "a.txt\nb.txt\nbig.txt\nc.txt\nsub"
    # every id is the entry uuid, every time the entry timestamp
    raw = {e["uuid"]: e for e in map(json.loads, SESSION.read_text().splitlines()) if "uuid" in e}
    for message in messages:
        assert message["created_at"] == raw[message["id"]]["timestamp"]
        assert message["metadata"]["host"] == "claude-code"


def test_bookkeeping_thinking_meta_and_our_own_context_are_skipped() -> None:
    messages, _ = read_messages(SESSION)
    text = all_text(messages)
    assert "OM_CONTEXT_MARKER" not in text  # the SessionStart context we injected (attachment entries)
    assert "The user wants a listing" not in text  # a thinking block
    assert "local-command" not in text and "command-name" not in text
    assert "Continue from where you left off" not in text  # isMeta
    assert "No response requested" not in text  # synthetic assistant entry
    assert "This session is being continued" not in text  # compact summary (default: skipped)
    assert "example-skill" not in text
    assert [texts(m) for m in messages if m["role"] == "user"] == [
        ["please run ls for me"],
        ["now show big file"],
        ["describe the image please"],
        ["please delegate this to a subagent"],
        ["now fail tool please"],
        ["after compact hello"],
    ]


def test_large_tool_output_is_trimmed_and_the_cut_recorded() -> None:
    messages, _ = read_messages(SESSION)
    big = next(m for m in messages if m["role"] == "tool" and "0000 the quick" in str(m["content"]))
    result = big["content"][0]["result"]
    original = (Path(__file__).parent / "fixtures" / "claude_code" / "session.jsonl").read_text()
    assert "0149 the quick brown fox" in original and "0149 the quick brown fox" in result  # the tail is kept
    assert result.startswith("0000 the quick brown fox")
    assert "characters omitted by om-mcp" in result
    (cut,) = big["metadata"]["trimmed"]
    assert cut["part"] == 0 and cut["field"] == "result" and cut["kept_chars"] == 2000
    assert cut["original_chars"] > 7000 and len(result) < 2100


def test_trim_rule_is_configurable() -> None:
    messages, _ = read_messages(SESSION, options=ConvertOptions(trim=TrimRule(head=100, tail=0)))
    big = next(m for m in messages if "trimmed" in m["metadata"])
    assert big["metadata"]["trimmed"][0]["kept_chars"] == 100
    assert big["content"][0]["result"].startswith("0000") and len(big["content"][0]["result"]) < 160


def test_images_errors_and_subagent_results() -> None:
    messages, _ = read_messages(SESSION)
    image_message = next(m for m in messages if any(p["type"] == "image" for p in m["content"]))
    image = next(p for p in image_message["content"] if p["type"] == "image")
    assert image["mime_type"] == "image/png" and image["data"].startswith("iVBOR")
    failed = next(m for m in messages if m["role"] == "tool" and m["content"][0]["tool_name"] == "Read")
    assert failed["content"][0]["is_error"] is True
    assert "File does not exist" in failed["content"][0]["result"]
    delegated = next(m for m in messages if m["role"] == "tool" and m["content"][0]["tool_name"] == "Agent")
    assert "SUBAGENT_TASK" in delegated["content"][0]["result"]  # the subagent's answer, as the tool result


def test_oversized_attachment_keeps_its_type_not_its_data() -> None:
    messages, _ = read_messages(SESSION, options=ConvertOptions(max_attachment_chars=10))
    image_message = next(m for m in messages if any(p["type"] == "image" for p in m["content"]))
    image = next(p for p in image_message["content"] if p["type"] == "image")
    assert "data" not in image and image["mime_type"] == "image/png"
    assert image_message["metadata"]["trimmed"] == [{"part": 1, "field": "data", "original_chars": 92, "kept_chars": 0}]
    validate(messages)


def test_compact_summary_can_be_kept_as_a_system_message() -> None:
    messages, _ = read_messages(SESSION, options=ConvertOptions(keep_compact_summaries=True))
    summaries = [m for m in messages if m["metadata"].get("compact_summary")]
    assert len(summaries) == 1 and summaries[0]["role"] == "system"
    assert "This session is being continued" in texts(summaries[0])[0]
    validate(messages)


def test_clear_leaves_a_session_with_nothing_to_remember() -> None:
    messages, state = read_messages(FIXTURES / "after_clear.jsonl")
    assert messages == [] and state.offset > 0


def test_conversion_is_deterministic() -> None:
    first, _ = read_messages(SESSION)
    second, _ = read_messages(SESSION)
    assert first == second  # message ids are immutable in the store: same entry, same message


# --------------------------------------------------------------------------------------
# Older entry kinds, sidechains
# --------------------------------------------------------------------------------------


def test_legacy_entries() -> None:
    messages, _ = read_messages(LEGACY)
    validate(messages)
    text = all_text(messages)
    assert 'Fix the login timeout"' not in text  # the `summary` title entry
    assert "system-reminder" not in text and "opened auth/session.py in the IDE" not in text
    assert texts(messages[0]) == ["Fix the login timeout in auth/session.py"]
    for skipped in (
        "Request interrupted",
        "git status",
        "On branch main",
        "Overloaded",
        "Retrying",
        "EuYBCkQ",
        "Replace the constant",
    ):
        assert skipped not in text, skipped
    # the sidechain's own steps are not in the parent thread by default...
    assert "toolu_grep1" not in text
    # ...but its answer is, as the Task tool's result
    task = next(m for m in messages if m["role"] == "tool" and m["content"][0]["tool_name"] == "Task")
    assert "TIMEOUT = 300" in task["content"][0]["result"]
    shot = next(m for m in messages if m["role"] == "tool" and "screenshot" in m["content"][0]["tool_name"])
    assert shot["content"][0]["result"] == "Screenshot taken\n[image: image/png]"
    edit = next(m for m in messages if any(p["type"] == "tool-call" and p["tool_name"] == "Edit" for p in m["content"]))
    assert [p["type"] for p in edit["content"]] == ["text", "tool-call"]  # the thinking block is gone
    # a custom slash command is what the person asked for; its expansion and /model are not
    assert texts(messages[-1]) == ["/fix-issue 123 --quick"]
    assert "reproduce, test, patch" not in text and "haiku" not in text


def test_sidechains_can_be_included_and_are_marked() -> None:
    messages, _ = read_messages(LEGACY, options=ConvertOptions(include_sidechains=True))
    validate(messages)
    side = [m for m in messages if m["metadata"].get("sidechain")]
    assert [m["id"] for m in side] == ["s-0001", "s-0002", "s-0003", "s-0004"]
    grep_result = next(m for m in side if m["role"] == "tool")
    assert grep_result["content"][0]["tool_name"] == "Grep"

    sub, _ = read_messages(SUBAGENT, options=ConvertOptions(include_sidechains=True))
    assert sub and all(m["metadata"]["sidechain"] and m["metadata"]["agent_id"] for m in sub)
    assert read_messages(SUBAGENT)[0] == []  # default: skipped


# --------------------------------------------------------------------------------------
# Incremental reading
# --------------------------------------------------------------------------------------


def test_reading_line_by_line_gives_the_same_messages_once(tmp_path: Path) -> None:
    lines = SESSION.read_bytes().splitlines(keepends=True)
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"")
    state = TranscriptState()
    collected: list[dict] = []
    for line in lines:
        with path.open("ab") as f:
            f.write(line)
        new, state = read_messages(path, TranscriptState.from_dict(json.loads(json.dumps(state.to_dict()))))
        collected += new
    assert collected == read_messages(SESSION)[0]
    assert state.rescans == 0


def test_a_half_written_last_line_is_left_for_the_next_read(tmp_path: Path) -> None:
    lines = SESSION.read_bytes().splitlines(keepends=True)
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"".join(lines[:5]) + lines[5][:40])
    entries, state = read_new(path)
    assert len(entries) == 5 and state.offset == len(b"".join(lines[:5]))
    assert read_new(path, state)[0] == []
    with path.open("ab") as f:
        f.write(lines[5][40:])
    entries, state = read_new(path, state)
    assert len(entries) == 1 and entries[0] == json.loads(lines[5])


def test_tool_names_carry_across_reads(tmp_path: Path) -> None:
    lines = SESSION.read_bytes().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if b'"toolu_bash001","type":"tool_result"' in line)
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"".join(lines[:cut]))
    _, state = read_messages(path)
    assert state.pending_tools == {"toolu_bash001": "Bash"}
    with path.open("ab") as f:
        f.write(lines[cut])
    new, state = read_messages(path, state)
    assert new[0]["content"][0]["tool_name"] == "Bash"
    assert state.pending_tools == {}


def test_missing_file_yields_nothing_and_keeps_the_state(tmp_path: Path) -> None:
    state = TranscriptState(offset=10, last_uuid="x", last_uuid_offset=0)
    assert read_new(tmp_path / "absent.jsonl", state) == ([], state)


def test_a_truncated_file_is_read_again_from_the_top(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    shutil.copy(SESSION, path)
    _, state = read_new(path)
    lines = SESSION.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:10]))
    result = read_transcript(path, state)
    assert result.rescanned and len(result.entries) == 10 and result.state.rescans == 1


def test_a_rewritten_file_is_read_again_from_the_top(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    shutil.copy(LEGACY, path)
    _, state = read_new(path)
    shutil.copy(SESSION, path)  # a different, longer file under the same name
    result = read_transcript(path, state)
    assert result.rescanned
    assert result.entries[0] == json.loads(SESSION.read_text().splitlines()[0])


def test_same_first_line_but_changed_history_is_noticed(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    shutil.copy(SESSION, path)
    _, state = read_new(path)
    lines = SESSION.read_text().splitlines(keepends=True)
    # the last entry with a uuid now carries another uuid; same length, same first line
    index = max(i for i, line in enumerate(lines) if '"uuid"' in line)
    old = json.loads(lines[index])["uuid"]
    lines[index] = lines[index].replace(old, old[::-1])
    path.write_text("".join(lines))
    result = read_transcript(path, state)
    assert result.rescanned and len(result.entries) == len(lines)


def test_a_corrupt_line_is_skipped_and_reading_goes_on(tmp_path: Path) -> None:
    lines = SESSION.read_bytes().splitlines(keepends=True)
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"".join(lines[:4]) + b'{"type": "user", "trunc\n' + b"".join(lines[4:]))
    result = read_transcript(path)
    assert result.bad_lines == [len(b"".join(lines[:4]))]
    assert len(result.entries) == len(lines)
    assert to_messages(result.entries) == read_messages(SESSION)[0]


def test_state_survives_json() -> None:
    _, state = read_new(SESSION)
    assert TranscriptState.from_dict(json.loads(json.dumps(state.to_dict()))) == state
    assert TranscriptState.from_dict(None) == TranscriptState()
    assert TranscriptState.from_dict({"offset": 5, "future_field": 1}).offset == 5


# --------------------------------------------------------------------------------------
# The trimming rule itself
# --------------------------------------------------------------------------------------


def test_trim_text() -> None:
    rule = TrimRule(head=10, tail=5)
    assert trim_text("short", rule) == ("short", None)
    just_over = "x" * (rule.keep + len(TRIM_MARKER) + 8)
    assert trim_text(just_over, rule) == (just_over, None)  # cutting would save nothing
    text = "H" * 10 + "m" * 500 + "T" * 5
    out, info = trim_text(text, rule)
    assert out.startswith("H" * 10) and out.endswith("T" * 5) and "500 characters omitted" in out
    assert info == {"original_chars": 515, "kept_chars": 15}
    with pytest.raises(ValueError):
        TrimRule(head=-1)


def test_trim_value_reaches_nested_strings() -> None:
    record: list[dict] = []
    value = {"file_path": "a.py", "content": "x" * 5000, "edits": [{"new": "y" * 5000}], "n": 3}
    out = trim_value(value, TrimRule(head=100, tail=100), "args", record)
    assert out["file_path"] == "a.py" and out["n"] == 3 and len(out["content"]) < 300
    assert [r["field"] for r in record] == ["args.content", "args.edits[0].new"]
