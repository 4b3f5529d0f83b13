"""One hook call, read lean: the few fields `om-mcp hook <host>` acts on, and
what it does for each event.

The hook runs on every prompt and every reply, so it reads its input without
pydantic; the typed models in `claude_code/hooks.py` and `gemini_cli.py`
describe every field of every event (and agree with this reader: the tests
check both on the recorded hook inputs).

Each host names its fields and events its own way (see its adapter module);
`read_event` turns them into one `HookEvent` whose `name` is the Claude-style
event name (Cursor's `beforeSubmitPrompt` is `UserPromptSubmit`, its
`sessionStart` is `SessionStart`), so the plan and the background rule are
written once. VS Code and Cursor also run the hooks they find in
`~/.claude/settings.json`: a payload in VS Code's shape (`sessionId`,
`hookEventName`) or Cursor's (`conversation_id`, `workspace_roots`) reaching
`om-mcp hook claude-code` is read as that host's, not as Claude Code's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, overload

from om_mcp.hosts.common import HookInputError, HookPlan

CLAUDE_CODE = "claude-code"
GEMINI_CLI = "gemini-cli"
CODEX = "codex"
CURSOR = "cursor"
VSCODE = "vscode"
HOSTS = (CLAUDE_CODE, GEMINI_CLI, CODEX, CURSOR, VSCODE)

# Claude Code: the events the om-mcp plugin registers for recording, and the
# SessionStart sources it matches.
CLAUDE_INGEST_EVENTS = ("UserPromptSubmit", "Stop", "SubagentStop", "PreCompact", "SessionEnd")
CLAUDE_SESSION_START_SOURCES = ("startup", "resume", "clear", "compact")
# Gemini CLI: BeforeAgent carries the prompt (`hosts.prompts`); AfterAgent and SessionEnd close a turn
# (its last reply is complete).
GEMINI_INGEST_EVENTS = ("BeforeAgent", "AfterAgent", "PreCompress", "SessionEnd")
GEMINI_FINAL_EVENTS = ("AfterAgent", "SessionEnd")
# Codex (codex-rs/hooks): UserPromptSubmit, Stop (the turn is over), PreCompact, PostCompact.
CODEX_INGEST_EVENTS = ("UserPromptSubmit", "Stop", "PreCompact", "PostCompact", "SubagentStop")
# Cursor's lowerCamel event names, as the canonical names the plan uses.
CURSOR_EVENTS = {
    "sessionStart": "SessionStart",
    "beforeSubmitPrompt": "UserPromptSubmit",
    "afterAgentResponse": "AfterAgentResponse",
    "stop": "Stop",
    "preCompact": "PreCompact",
    "sessionEnd": "SessionEnd",
}
CURSOR_INGEST_EVENTS = ("UserPromptSubmit", "AfterAgentResponse", "Stop", "PreCompact", "SessionEnd")
# VS Code agent hooks (Claude-compatible names; Copilot CLI's lowerCamel ones are converted by VS Code).
VSCODE_INGEST_EVENTS = ("UserPromptSubmit", "Stop", "SubagentStop", "PreCompact")


@dataclass(frozen=True)
class HookEvent:
    host: str
    name: str  # hook_event_name
    session_id: str
    transcript_path: str | None = None
    cwd: str | None = None
    source: str | None = None  # SessionStart: startup | resume | clear | compact
    reason: str | None = None  # SessionEnd
    # What some hosts put in the payload itself (read when there is no transcript to read).
    prompt: str | None = None  # UserPromptSubmit / beforeSubmitPrompt / BeforeAgent
    reply: str | None = None  # Cursor afterAgentResponse `text`
    turn_id: str | None = None  # Cursor generation_id, Codex turn_id, Claude Code prompt_id
    timestamp: str | None = None

    @property
    def ends_session(self) -> bool:
        return self.name == "SessionEnd"


MAX_INPUT_BYTES = 16 * 1024 * 1024  # a hook's stdin (the prompt rides along); the caller reads one byte more


def read_event(host: str, data: str | bytes | Mapping[str, Any]) -> HookEvent:
    """The hook input's fields; HookInputError (one line, naming the field) when unusable."""
    if host not in HOSTS:
        raise HookInputError(f"unknown host {host!r}: use one of {', '.join(HOSTS)}")
    if isinstance(data, (str, bytes)):
        if not data.strip():
            raise HookInputError("hook input: stdin is empty (expected a JSON object)")
        if len(data) > MAX_INPUT_BYTES:
            raise HookInputError(f"hook input: more than {MAX_INPUT_BYTES:,} bytes on stdin; not read")
        try:
            data = json.loads(data)
        except (ValueError, RecursionError) as exc:
            raise HookInputError(f"hook input: not JSON ({type(exc).__name__}: {exc})"[:300]) from None
    if not isinstance(data, Mapping):
        raise HookInputError(f"hook input: expected a JSON object, got {type(data).__name__}")
    host = _actual_host(host, data)
    if host == CURSOR:
        return _cursor_event(data)
    if host == VSCODE:
        return _common(
            VSCODE,
            data,
            name=_either(data, "hookEventName", "hook_event_name", required=True),
            session_id=_either(data, "sessionId", "session_id", required=True),
        )
    return _common(
        host,
        data,
        name=_text(data, "hook_event_name", required=True),
        session_id=_text(data, "session_id", required=True),
        turn_id=_text(data, "turn_id") or _text(data, "prompt_id"),
    )


def _actual_host(host: str, data: Mapping[str, Any]) -> str:
    """VS Code and Cursor run Claude Code's hooks too (`~/.claude/settings.json`), in their own shape."""
    if host != CLAUDE_CODE or "hook_event_name" in data and "session_id" in data:
        return host
    if "conversation_id" in data or "workspace_roots" in data:
        return CURSOR
    if "hookEventName" in data or "sessionId" in data:
        return VSCODE
    return host


def _common(host: str, data: Mapping[str, Any], *, name: str, session_id: str, **more: Any) -> HookEvent:
    return HookEvent(
        host=host,
        name=name,
        session_id=session_id,
        transcript_path=_text(data, "transcript_path"),
        cwd=_text(data, "cwd"),
        source=_text(data, "source"),
        reason=_text(data, "reason"),
        prompt=_text(data, "prompt"),
        timestamp=_stamp(data.get("timestamp")),
        **more,
    )


def _cursor_event(data: Mapping[str, Any]) -> HookEvent:
    """Cursor: the conversation is the session; the first workspace root is the working directory."""
    raw = _text(data, "hook_event_name", required=True)
    roots = data.get("workspace_roots")
    cwd = _text(data, "cwd") or (roots[0] if isinstance(roots, list) and roots and isinstance(roots[0], str) else None)
    return HookEvent(
        host=CURSOR,
        name=CURSOR_EVENTS.get(raw, raw),
        session_id=_either(data, "conversation_id", "session_id", required=True),
        transcript_path=_text(data, "transcript_path"),
        cwd=cwd,
        source=_text(data, "source"),
        reason=_text(data, "reason"),
        prompt=_text(data, "prompt"),
        reply=_text(data, "text"),
        turn_id=_text(data, "generation_id"),
        timestamp=_stamp(data.get("timestamp")),
    )


def _either(data: Mapping[str, Any], first: str, second: str, *, required: Literal[True]) -> str:
    """The required field under either of its two spellings (the first one named in errors)."""
    return _text(data, first if data.get(first) is not None or data.get(second) is None else second, required=True)


def _stamp(value: Any) -> str | None:
    """An ISO time as the hosts send it (Copilot CLI and VS Code: ISO text; some: epoch milliseconds)."""
    if isinstance(value, str) and value:
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        from datetime import UTC, datetime

        return datetime.fromtimestamp(value / 1000 if value > 1e11 else value, UTC).isoformat()
    return None


def plan(host: str, event_name: str) -> HookPlan:
    """What the hook does for an event: catch up on the transcript, print the context, both or nothing."""
    if host == GEMINI_CLI:
        if event_name == "SessionStart":
            return HookPlan(ingest=True, final=False, print_context=True)
        if event_name in GEMINI_INGEST_EVENTS:
            return HookPlan(ingest=True, final=event_name in GEMINI_FINAL_EVENTS)
        return HookPlan()
    ingest_events = {CODEX: CODEX_INGEST_EVENTS, CURSOR: CURSOR_INGEST_EVENTS, VSCODE: VSCODE_INGEST_EVENTS}.get(host)
    if ingest_events is not None:
        if event_name == "SessionStart":
            return HookPlan(ingest=True, print_context=True)
        return HookPlan(ingest=event_name in ingest_events, final=event_name != "UserPromptSubmit")
    # Claude Code. SessionStart catches up too: a resumed or compacted session has turns on disk.
    if event_name == "SessionStart":
        return HookPlan(ingest=True, print_context=True)
    return HookPlan(ingest=event_name in CLAUDE_INGEST_EVENTS)


@overload
def _text(data: Mapping[str, Any], field: str, *, required: Literal[True]) -> str: ...
@overload
def _text(data: Mapping[str, Any], field: str, *, required: bool = False) -> str | None: ...


def _text(data: Mapping[str, Any], field: str, *, required: bool = False) -> str | None:
    value = data.get(field)
    if value is None:
        if required:
            raise HookInputError(f"hook input: {field}: Field required")
        return None
    if not isinstance(value, str):
        raise HookInputError(f"hook input: {field}: Input should be a valid string")
    if required and not value:
        raise HookInputError(f"hook input: {field}: String should have at least 1 character")
    return value
