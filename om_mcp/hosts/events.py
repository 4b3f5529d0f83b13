"""One hook call, read lean: the few fields `om-mcp hook <host>` acts on, and
what it does for each event.

The hook runs on every prompt and every reply, so it reads its input without
pydantic; the typed models in `claude_code/hooks.py` and `gemini_cli.py`
describe every field of every event (and agree with this reader: the tests
check both on the recorded hook inputs).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, overload

from om_mcp.hosts.common import HookInputError, HookPlan

CLAUDE_CODE = "claude-code"
GEMINI_CLI = "gemini-cli"
HOSTS = (CLAUDE_CODE, GEMINI_CLI)

# Claude Code: the events the om-mcp plugin registers for recording, and the
# SessionStart sources it matches.
CLAUDE_INGEST_EVENTS = ("UserPromptSubmit", "Stop", "SubagentStop", "PreCompact", "SessionEnd")
CLAUDE_SESSION_START_SOURCES = ("startup", "resume", "clear", "compact")
# Gemini CLI: AfterAgent and SessionEnd close a turn (its last reply is complete).
GEMINI_INGEST_EVENTS = ("AfterAgent", "PreCompress", "SessionEnd")
GEMINI_FINAL_EVENTS = ("AfterAgent", "SessionEnd")


@dataclass(frozen=True)
class HookEvent:
    host: str
    name: str  # hook_event_name
    session_id: str
    transcript_path: str | None = None
    cwd: str | None = None
    source: str | None = None  # SessionStart: startup | resume | clear | compact
    reason: str | None = None  # SessionEnd

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
    return HookEvent(
        host=host,
        name=_text(data, "hook_event_name", required=True),
        session_id=_text(data, "session_id", required=True),
        transcript_path=_text(data, "transcript_path"),
        cwd=_text(data, "cwd"),
        source=_text(data, "source"),
        reason=_text(data, "reason"),
    )


def plan(host: str, event_name: str) -> HookPlan:
    """What the hook does for an event: catch up on the transcript, print the context, both or nothing."""
    if host == GEMINI_CLI:
        if event_name == "SessionStart":
            return HookPlan(ingest=True, final=False, print_context=True)
        if event_name in GEMINI_INGEST_EVENTS:
            return HookPlan(ingest=True, final=event_name in GEMINI_FINAL_EVENTS)
        return HookPlan()
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
