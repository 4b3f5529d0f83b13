"""Gemini CLI: hook input and transcript conversion.

tests/fixtures/gemini_cli/ holds what gemini-cli 0.61.0 wrote and sent to a
hook command in four resumed runs of one session against a scripted local API
(paths rewritten to /home/user).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from om_mcp.hosts.common import HookInputError
from om_mcp.hosts.gemini_cli import GeminiOptions, GeminiState, fold, read_messages
from om_mcp.hosts.gemini_hooks import (
    GeminiAfterAgent,
    GeminiPreCompress,
    GeminiSessionEnd,
    GeminiSessionStart,
    parse_hook_input,
)
from om_mcp.messages import MessageIn
from om_mcp.trim import TrimRule

FIXTURES = Path(__file__).parent / "fixtures" / "gemini_cli"
SESSION = FIXTURES / "session.jsonl"


def hook(name: str) -> str:
    return (FIXTURES / "hooks" / f"{name}.json").read_text()


@pytest.mark.parametrize(
    ("name", "cls", "field", "value"),
    [
        ("SessionStart-startup", GeminiSessionStart, "source", "startup"),
        ("SessionStart-resume", GeminiSessionStart, "source", "resume"),
        ("SessionEnd-exit", GeminiSessionEnd, "reason", "exit"),
        ("PreCompress-auto", GeminiPreCompress, "trigger", "auto"),
        ("AfterAgent", GeminiAfterAgent, "prompt_response", "Let me look.\nListed the directory; it has a.txt."),
    ],
)
def test_real_hook_inputs_parse(name: str, cls: type, field: str, value: str) -> None:
    parsed = parse_hook_input(hook(name))
    assert type(parsed) is cls and getattr(parsed, field) == value
    assert parsed.cwd == "/home/user/project" and parsed.timestamp
    assert parsed.transcript_path.startswith("/home/user/.gemini/tmp/proj/chats/session-")
    with pytest.raises(HookInputError, match="session_id"):
        parse_hook_input('{"hook_event_name": "AfterAgent"}')


def test_session_becomes_the_conversation() -> None:
    messages, state = read_messages(SESSION, final=True)
    for message in messages:
        MessageIn.model_validate(message)
    users = [m["content"][0]["text"] for m in messages if m["role"] == "user"]
    # our own injected context (<hook_context>) and Gemini's <session_context> are gone
    assert users == ["please list files", "now show big file", "read missing file", "hello there"]
    assert "GEM_MARKER" not in json.dumps(messages) and "session_context" not in json.dumps(messages)
    first_reply = messages[1]
    assert first_reply["role"] == "assistant"
    assert [p["type"] for p in first_reply["content"]] == ["text", "tool-call"]
    call = first_reply["content"][1]
    results = messages[2]
    assert results["id"] == f"{first_reply['id']}:tool-results" and results["role"] == "tool"
    assert results["content"][0]["tool_call_id"] == call["tool_call_id"]
    assert results["content"][0]["result"].startswith("Directory listing for /home/user/project")
    assert "I'll list them." not in json.dumps(messages)  # thoughts are skipped
    assert state.emitted_through == messages[-1]["id"]


def test_errors_and_trimming() -> None:
    messages, _ = read_messages(SESSION, final=True)
    error = next(m for m in messages if m["role"] == "tool" and m["content"][0].get("is_error"))
    assert error["content"][0]["result"] == "File not found: /home/user/project/missing.txt"
    big = next(m for m in messages if "trimmed" in m["metadata"])
    assert big["metadata"]["trimmed"] == [{"part": 0, "field": "result", "original_chars": 5280, "kept_chars": 2000}]
    smaller, _ = read_messages(SESSION, final=True, options=GeminiOptions(trim=TrimRule(head=50, tail=50)))
    assert next(m for m in smaller if "trimmed" in m["metadata"])["metadata"]["trimmed"][0]["kept_chars"] == 100


def test_incremental_reads_hold_back_the_open_turn(tmp_path: Path) -> None:
    lines = SESSION.read_text().splitlines(keepends=True)
    path = tmp_path / "session.jsonl"
    path.write_text("")
    state = GeminiState()
    collected: list[dict] = []
    for line in lines:
        with path.open("a") as f:
            f.write(line)
        new, state = read_messages(path, GeminiState.from_dict(state.to_dict()), final=False)
        collected += new
    new, state = read_messages(path, state, final=True)
    collected += new
    assert collected == read_messages(SESSION, final=True)[0]
    assert len({m["id"] for m in collected}) == len(collected)


def test_a_tool_call_recorded_later_is_not_lost(tmp_path: Path) -> None:
    """The first version of a turn's reply has no tool calls; a later record adds them."""
    lines = SESSION.read_text().splitlines(keepends=True)
    first_reply = next(i for i, line in enumerate(lines) if '"type":"gemini"' in line)
    path = tmp_path / "session.jsonl"
    path.write_text("".join(lines[: first_reply + 1]))
    early, state = read_messages(path, final=False)
    assert [m["role"] for m in early] == ["user"]  # the reply is still open
    path.write_text("".join(lines))
    rest, _ = read_messages(path, state, final=True)
    assert rest[0]["content"][1]["type"] == "tool-call"


def test_rewind_and_the_older_json_format(tmp_path: Path) -> None:
    records = [
        {"sessionId": "s", "projectHash": "h"},
        {"id": "a", "type": "user", "content": [{"text": "one"}], "timestamp": "2025-12-04T10:00:00Z"},
        {"id": "b", "type": "gemini", "content": "reply one", "timestamp": "2025-12-04T10:00:01Z"},
        {"id": "c", "type": "user", "content": "two", "timestamp": "2025-12-04T10:01:00Z"},
        {"$rewindTo": "c"},
        {"id": "d", "type": "user", "content": "two, reworded", "timestamp": "2025-12-04T10:02:00Z"},
        {"id": "e", "type": "info", "content": "Request cancelled."},
    ]
    assert [m["id"] for m in fold(records)] == ["a", "b", "d", "e"]
    legacy = tmp_path / "session-old.json"
    legacy.write_text(json.dumps({"sessionId": "s", "projectHash": "h", "messages": records[1:4]}))
    messages, _ = read_messages(legacy, final=True)
    assert [m["id"] for m in messages] == ["a", "b", "c"]
    assert read_messages(tmp_path / "absent.jsonl", final=True) == ([], GeminiState())


def test_what_each_event_does() -> None:
    from om_mcp.hosts.common import HookPlan
    from om_mcp.hosts.gemini_hooks import plan_for

    assert plan_for(parse_hook_input(hook("SessionStart-resume"))) == HookPlan(
        ingest=True, final=False, print_context=True
    )
    assert plan_for(parse_hook_input(hook("AfterAgent"))) == HookPlan(ingest=True, final=True)
    assert plan_for(parse_hook_input(hook("SessionEnd-exit"))) == HookPlan(ingest=True, final=True)
    assert plan_for(parse_hook_input(hook("PreCompress-auto"))) == HookPlan(ingest=True, final=False)
    # BeforeAgent carries the prompt: it is stored then, before the chat file has it (hosts.prompts)
    assert plan_for(parse_hook_input(hook("BeforeAgent"))) == HookPlan(ingest=True, final=False)
    assert plan_for(parse_hook_input(hook("BeforeTool"))) == HookPlan(ingest=False)


def test_the_prompt_is_stored_at_before_agent_and_once(tmp_path: Path) -> None:
    """The hook as Gemini CLI runs it: BeforeAgent's prompt is stored before the chat file records it
    (16:11:29.758 vs .973 in the recorded run), and the file's copy, read at AfterAgent, is not stored again."""
    from support.hooks import Box

    box = Box(tmp_path)
    lines = SESSION.read_text().splitlines(keepends=True)
    first_user = next(i for i, line in enumerate(lines) if '"type":"user"' in line and "please list" in line)
    chat = tmp_path / "session.jsonl"
    chat.write_text("".join(lines[:first_user]))  # as it is when BeforeAgent runs

    def event(name: str) -> dict:
        payload = json.loads(hook(name))
        return {**payload, "transcript_path": str(chat), "cwd": str(box.project)}

    assert box.hook(event("BeforeAgent"), "--no-worker", host="gemini-cli").returncode == 0
    stored = box.query("SELECT id, role, body FROM messages ORDER BY seq")
    assert [(r[1], "please list files" in r[2], "GEM_MARKER" in r[2]) for r in stored] == [("user", True, False)]
    assert stored[0][0].endswith(":prompt")
    chat.write_text("".join(lines))  # the turn reaches the chat file
    assert box.hook(event("AfterAgent"), "--no-worker", host="gemini-cli").returncode == 0
    users = [r[2] for r in box.query("SELECT id, role, body FROM messages ORDER BY seq") if r[1] == "user"]
    assert sum("please list files" in u for u in users) == 1  # stored once
    assert len(users) == 4 and box.log_lines() == []
