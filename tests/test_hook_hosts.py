"""`om-mcp hook codex|cursor|vscode` as those hosts run it: a process, the hook JSON on stdin in the
host's documented shape, its transcript in its format; exit 0 whatever happens.

Each host: a session is recorded once (a second run of the same hooks adds nothing), the next session
starts with the project's memory in the host's output shape, and a locked database costs the agent
nothing. The payload shapes and transcript lines below follow each adapter's docstring, which cites the
host's documentation.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from support.hooks import Box

pytestmark = pytest.mark.slow

CODEX_SESSION = "0199a213-81c0-7800-8aa1-bbab2a035a53"


PROMPT = "Decision: the cache lives in Redis. List the files."


def codex_rollout(path: Path, cwd: str, turn: bool = True) -> Path:
    """A Codex rollout in the shape `codex-rs/protocol` writes: session meta, injected context, a turn
    with a shell call and its output, and the UI's event lines (which repeat the turn). Without `turn`,
    as it is when UserPromptSubmit runs: the turn's lines come after the hook (Codex 0.171)."""

    def line(kind: str, payload: dict, second: int) -> str:
        return json.dumps({"timestamp": f"2026-11-30T10:00:{second:02d}.000Z", "type": kind, "payload": payload})

    def text(role: str, kind: str, value: str) -> dict:
        return {"type": "message", "role": role, "content": [{"type": kind, "text": value}]}

    lines = [
        line("session_meta", {"id": CODEX_SESSION, "cwd": cwd, "cli_version": "0.171.0"}, 0),
        line("response_item", text("developer", "input_text", "<permissions instructions>sandbox</permissions>"), 1),
        line("response_item", text("user", "input_text", f"<environment_context>\n  <cwd>{cwd}</cwd>"), 1),
    ]
    turn_lines = [
        line("turn_context", {"turn_id": "t1", "cwd": cwd, "model": "gpt-5-codex"}, 2),
        line("response_item", text("user", "input_text", PROMPT), 3),
        line("event_msg", {"type": "user_message", "message": "Decision: the cache lives in Redis."}, 3),
        line("response_item", {"type": "reasoning", "summary": [], "encrypted_content": "secret"}, 4),
        line(
            "response_item",
            {"type": "function_call", "name": "shell", "arguments": '{"command":["ls"]}', "call_id": "call_1"},
            5,
        ),
        line("response_item", {"type": "function_call_output", "call_id": "call_1", "output": "README.md\nsrc"}, 6),
        line("response_item", text("assistant", "output_text", "There are two entries: README.md and src."), 7),
        line("event_msg", {"type": "agent_message", "message": "There are two entries."}, 7),
    ]
    path.write_text("\n".join(lines + (turn_lines if turn else [])) + "\n")
    return path


def codex_event(box: Box, name: str, transcript: Path | None, session: str = CODEX_SESSION, **extra) -> dict:
    return {
        "session_id": session,
        "transcript_path": str(transcript) if transcript else None,
        "cwd": str(box.project),
        "hook_event_name": name,
        "model": "gpt-5-codex",
        "permission_mode": "default",
        **extra,
    }


def messages(box: Box) -> list[tuple]:
    return box.query("SELECT id, role, body FROM messages ORDER BY seq")


def assert_fails_open_on_a_locked_database(box: Box, host: str, event: dict) -> None:
    holder = sqlite3.connect(box.db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        done = box.hook(event, "--no-worker", host=host)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    assert "locked" in box.log_lines()[-1]


def test_codex_records_the_rollout_once_and_starts_the_next_session_with_it(tmp_path: Path) -> None:
    box = Box(tmp_path)
    path = tmp_path / f"rollout-2026-11-30T10-00-00-{CODEX_SESSION}.jsonl"
    rollout = codex_rollout(path, str(box.project), turn=False)
    prompt = codex_event(box, "UserPromptSubmit", rollout, prompt=PROMPT, turn_id="t1")
    assert box.hook(prompt, "--no-worker", host="codex").returncode == 0
    # the prompt is stored from the hook's own payload: a turn that never ends keeps it
    assert [(r[0], r[1]) for r in messages(box)] == [("t1:prompt", "user")] and PROMPT in messages(box)[0][2]
    codex_rollout(path, str(box.project))  # the turn reaches the rollout
    stop = codex_event(box, "Stop", rollout, turn_id="t1", last_assistant_message="Two entries.")
    done = box.hook(stop, "--no-worker", host="codex")
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    stored = messages(box)
    # no injected context, no UI echo, and the rollout's copy of the prompt left out
    assert [r[1] for r in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[0][0] == "t1:prompt" and "README.md" in stored[2][2]
    assert box.query("SELECT DISTINCT thread_id, resource_id FROM messages") == [(CODEX_SESSION, str(box.project))]
    assert box.hook(stop, "--no-worker", host="codex").returncode == 0
    assert messages(box) == stored  # the same hooks again add nothing
    start = box.hook(codex_event(box, "SessionStart", None, "next", source="startup"), "--no-worker", host="codex")
    output = json.loads(start.stdout)["hookSpecificOutput"]
    assert output["hookEventName"] == "SessionStart"
    assert f'"{CODEX_SESSION}"' in output["additionalContext"] and "4 messages" in output["additionalContext"]
    assert box.log_lines() == []
    assert_fails_open_on_a_locked_database(box, "codex", stop)


def cursor_event(box: Box, name: str, transcript: Path | None, **extra) -> dict:
    return {
        "conversation_id": "c-42",
        "generation_id": extra.pop("generation_id", "g-1"),
        "model": "auto",
        "hook_event_name": name,
        "cursor_version": "2.4.0",
        "workspace_roots": [str(box.project)],
        "user_email": None,
        "transcript_path": str(transcript) if transcript else None,
        **extra,
    }


def test_cursor_records_the_transcript_or_else_the_payloads(tmp_path: Path) -> None:
    box = Box(tmp_path)
    transcript = tmp_path / "c-42.jsonl"
    transcript.write_text(
        "\n".join(
            json.dumps(line)
            for line in [
                {
                    "role": "user",
                    "message": {
                        "content": [{"type": "text", "text": "<user_query>\nDecision: ship on Fridays.\n</user_query>"}]
                    },
                },
                {
                    "role": "assistant",
                    "message": {
                        "content": [
                            {"type": "text", "text": "Noted: Fridays."},
                            {"type": "tool_use", "name": "Shell", "input": {"command": "git log -1"}},
                        ]
                    },
                },
            ]
        )
        + "\n"
    )
    assert (
        box.hook(
            cursor_event(box, "stop", transcript, status="completed", loop_count=0), "--no-worker", host="cursor"
        ).returncode
        == 0
    )
    stored = messages(box)
    assert [r[1] for r in stored] == ["user", "assistant"] and stored[0][2].startswith("Decision: ship on Fridays.")
    assert (
        box.hook(cursor_event(box, "stop", transcript, status="completed"), "--no-worker", host="cursor").returncode
        == 0
    )
    assert messages(box) == stored

    # Transcripts off (transcript_path null): the prompt and the reply come from the hooks' own fields.
    off = {"conversation_id": "c-43"}
    for event in (
        cursor_event(box, "beforeSubmitPrompt", None, prompt="Decision: use Postgres 18.", attachments=[], **off),
        cursor_event(box, "afterAgentResponse", None, text="Postgres 18 it is.", **off),
        cursor_event(box, "afterAgentResponse", None, text="Postgres 18 it is.", **off),  # sent twice: stored once
    ):
        assert box.hook(event, "--no-worker", host="cursor").returncode == 0
    assert box.query("SELECT id, role, body FROM messages WHERE thread_id = 'c-43' ORDER BY seq") == [
        ("g-1:prompt", "user", "Decision: use Postgres 18."),
        ("g-1:reply", "assistant", "Postgres 18 it is."),
    ]
    start = box.hook(
        cursor_event(
            box,
            "sessionStart",
            None,
            session_id="c-44",
            conversation_id="c-44",
            is_background_agent=False,
            composer_mode="agent",
        ),
        "--no-worker",
        host="cursor",
    )
    context = json.loads(start.stdout)["additional_context"]  # Cursor's sessionStart output field
    assert '"c-42"' in context and '"c-43"' in context and "Decision: use Postgres 18." in context
    assert box.log_lines() == []
    assert_fails_open_on_a_locked_database(box, "cursor", cursor_event(box, "stop", transcript))


def vscode_event(box: Box, name: str, **extra) -> dict:
    return {
        "timestamp": "2026-11-30T10:30:00.000Z",
        "cwd": str(box.project),
        "sessionId": "vs-1",
        "hookEventName": name,
        "transcript_path": None,
        **extra,
    }


def test_vscode_records_the_prompts_and_reads_through_the_claude_settings_too(tmp_path: Path) -> None:
    box = Box(tmp_path)
    prompt = vscode_event(box, "UserPromptSubmit", prompt="Decision: the API is versioned under /v2.")
    assert box.hook(prompt, "--no-worker", host="vscode").returncode == 0
    # VS Code runs the hooks of ~/.claude/settings.json too, with its own payload: read as VS Code's.
    again = box.hook(prompt, "--no-worker", host="claude-code")
    assert (again.returncode, again.stderr) == (0, b"")
    assert box.query("SELECT thread_id, role, body, json_extract(metadata, '$.host') FROM messages") == [
        ("vs-1", "user", "Decision: the API is versioned under /v2.", "vscode")
    ]
    transcript = tmp_path / "vs-2.jsonl"
    transcript.write_text(
        json.dumps({"type": "user.message", "id": "e1", "data": {"content": "Rename the module."}})
        + "\n"
        + json.dumps({"type": "assistant.message", "id": "e2", "data": {"content": "Renamed to core."}})
        + "\n"
        + json.dumps({"type": "tool.execution_start", "id": "e3", "data": {"toolName": "edit"}})
        + "\n"
    )
    stop = vscode_event(box, "Stop", sessionId="vs-2", transcript_path=str(transcript), stop_hook_active=False)
    assert box.hook(stop, "--no-worker", host="vscode").returncode == 0
    assert box.hook(stop, "--no-worker", host="vscode").returncode == 0
    assert box.query("SELECT id, role FROM messages WHERE thread_id = 'vs-2' ORDER BY seq") == [
        ("e1", "user"),
        ("e2", "assistant"),
    ]
    start = box.hook(vscode_event(box, "SessionStart", sessionId="vs-3", source="new"), "--no-worker", host="vscode")
    output = json.loads(start.stdout)["hookSpecificOutput"]
    assert output["hookEventName"] == "SessionStart" and '"vs-2"' in output["additionalContext"]
    assert box.log_lines() == []
    assert_fails_open_on_a_locked_database(box, "vscode", stop)
