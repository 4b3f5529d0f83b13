"""One hook call, read lean: the few fields `om-mcp hook <host>` acts on, as one `HookEvent`.

The hook runs on every prompt and every reply, so it reads its input without
pydantic; the typed models in `claude_code/hooks.py` and `gemini_hooks.py`
describe every field of every event (and agree with this reader: the tests
check both on the recorded hook inputs).

Each host names its fields and events its own way; its adapter (`hosts/adapter.py`)
turns them into one `HookEvent` whose `name` is the Claude-style event name
(Cursor's `beforeSubmitPrompt` is `UserPromptSubmit`, its `sessionStart` is
`SessionStart`), so the plan and the background rule are written once. Most hosts
send Claude Code's shape (`claude_shape`); the helpers here read a field of either
spelling, a time as the hosts send it, and the JSON itself, bounded.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, overload

from om_mcp.hosts.common import HookInputError


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


def decode(data: str | bytes | Mapping[str, Any]) -> Mapping[str, Any]:
    """The hook input as an object; HookInputError (one line) when it is not one."""
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
    return data


def claude_shape(host: str, data: Mapping[str, Any], **more: Any) -> HookEvent:
    """An event in Claude Code's shape: `hook_event_name`, `session_id`, `transcript_path`, `cwd`, ..."""
    return common(
        host,
        data,
        name=text(data, "hook_event_name", required=True),
        session_id=text(data, "session_id", required=True),
        **{"turn_id": text(data, "turn_id") or text(data, "prompt_id"), **more},
    )


def common(host: str, data: Mapping[str, Any], *, name: str, session_id: str, **more: Any) -> HookEvent:
    """The fields every host spells alike, around the name and session a host spells its own way."""
    return HookEvent(
        **{
            "host": host,
            "name": name,
            "session_id": session_id,
            "transcript_path": text(data, "transcript_path"),
            "cwd": text(data, "cwd"),
            "source": text(data, "source"),
            "reason": text(data, "reason"),
            "prompt": text(data, "prompt"),
            "timestamp": stamp(data.get("timestamp")),
            **more,
        }
    )


def either(data: Mapping[str, Any], first: str, second: str, *, required: Literal[True]) -> str:
    """The required field under either of its two spellings (the first one named in errors)."""
    return text(data, first if data.get(first) is not None or data.get(second) is None else second, required=True)


def stamp(value: Any) -> str | None:
    """An ISO time as the hosts send it (Copilot CLI and VS Code: ISO text; some: epoch milliseconds)."""
    if isinstance(value, str) and value:
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        from datetime import UTC, datetime

        return datetime.fromtimestamp(value / 1000 if value > 1e11 else value, UTC).isoformat()
    return None


@overload
def text(data: Mapping[str, Any], field: str, *, required: Literal[True]) -> str: ...
@overload
def text(data: Mapping[str, Any], field: str, *, required: bool = False) -> str | None: ...


def text(data: Mapping[str, Any], field: str, *, required: bool = False) -> str | None:
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
