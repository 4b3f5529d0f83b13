"""Cursor: hook input, transcript and session-start output.

From Cursor's documentation:
* Hooks (cursor.com/docs/hooks): `~/.cursor/hooks.json` (user) and
  `<project>/.cursor/hooks.json`, `{"version": 1, "hooks": {"<event>":
  [{"command": "..."}]}}`, lowerCamel event names: `sessionStart`,
  `beforeSubmitPrompt`, `afterAgentResponse`, `stop`, `preCompact`,
  `sessionEnd` are the ones used here.
* Input: every event carries `conversation_id`, `generation_id`,
  `hook_event_name`, `workspace_roots` and `transcript_path` (null when
  transcripts are off); `beforeSubmitPrompt` adds `prompt`,
  `afterAgentResponse` the reply's `text`, `stop` its `status`.
* Output: `sessionStart` may print `{"additional_context": "..."}`, added to
  the conversation's initial context. Exit 0 is success; a hook that fails or
  times out is skipped and the agent goes on (fail-open), except exit 2, which
  blocks the action of a `before...` hook.
* MCP servers: `~/.cursor/mcp.json` or `<project>/.cursor/mcp.json`,
  `{"mcpServers": {"<name>": {"command", "args", "env"}}}`.
* Cursor also runs Claude Code's hooks from `~/.claude/settings.json`
  (cursor.com/docs/reference/third-party-hooks) when third-party configs are
  on; such a call reaching `om-mcp hook claude-code` is recognised by its
  fields and read as Cursor's (`hosts.events`).

Caveat: the hooks reference page could not be fetched while this adapter was
written (only the third-party-hooks page was), so the field names above are the
ones Cursor's hooks are known by; each is read leniently (a missing one costs
that piece only), and the conversation id doubles as `session_id`.

The transcript: a JSONL file whose lines are `{"role": "user" | "assistant",
"message": {"content": [{"type": "text", "text"}, ...]}}` (the prompt wrapped
in `<user_query>`). Cursor documents its path, not its format, so the lines
that match are read and the rest skipped; when the transcript gives nothing,
the prompt and the reply come from `beforeSubmitPrompt` and
`afterAgentResponse` instead (`hosts.chat_lines`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from om_mcp.hosts.adapter import Host, Source
from om_mcp.hosts.chat_lines import read_session, text_parts
from om_mcp.hosts.events import HookEvent, either, stamp, text
from om_mcp.hosts.jsonl import JsonlState
from om_mcp.reading import Position, Reading
from om_mcp.trim import TrimRule, trim_value

_QUERY = re.compile(r"^\s*<user_query>\s*(.*?)\s*</user_query>\s*$", re.DOTALL)


HOST_NAME = "cursor"
# Cursor's lowerCamel event names, as the canonical names the plan uses.
EVENTS = {
    "sessionStart": "SessionStart",
    "beforeSubmitPrompt": "UserPromptSubmit",
    "afterAgentResponse": "AfterAgentResponse",
    "stop": "Stop",
    "preCompact": "PreCompact",
    "sessionEnd": "SessionEnd",
}
INGEST_EVENTS = ("UserPromptSubmit", "AfterAgentResponse", "Stop", "PreCompact", "SessionEnd")


def read_messages(
    event: HookEvent, state: JsonlState | None = None, trim: TrimRule | None = None
) -> tuple[list[dict[str, Any]], JsonlState]:
    """The session's new messages (transcript, else payload) and the state to keep."""
    return read_session(event.transcript_path, event, state or JsonlState(), trim or TrimRule(), line_to_message)


def line_to_message(number: int, line: dict[str, Any], trim: TrimRule) -> dict[str, Any] | None:
    role = line.get("role")
    message = line.get("message")
    if role not in ("user", "assistant") or not isinstance(message, dict):
        return None
    parts = text_parts(message.get("content"), _strip_query if role == "user" else str.strip)
    cuts: list[dict[str, Any]] = []
    content = message.get("content")
    for block in content if isinstance(content, list) else []:
        if role == "assistant" and isinstance(block, dict) and block.get("type") == "tool_use":
            args = trim_value(block.get("input"), trim, "args", cuts)
            parts.append({"type": "tool-call", "tool_name": str(block.get("name") or "unknown_tool"), "args": args})
    if not parts:
        return None
    metadata: dict[str, Any] = {"host": HOST_NAME}
    if cuts:
        metadata["trimmed"] = cuts
    return {"id": f"L{number}", "role": role, "content": parts, "metadata": metadata}


def _strip_query(text: str) -> str:
    found = _QUERY.match(text)
    return (found.group(1) if found else text).strip()


def session_start_output(context: str) -> str:
    """What Cursor's sessionStart hook prints: `{"additional_context": ...}`, or "" for nothing."""
    return json.dumps({"additional_context": context}, ensure_ascii=False) if context else ""


class Cursor(Host):
    name = HOST_NAME
    title = "Cursor"
    ingest_events = INGEST_EVENTS
    open_events = ("UserPromptSubmit",)

    def read_event(self, data: Mapping[str, Any]) -> HookEvent:
        """The conversation is the session; the first workspace root is the working directory."""
        raw = text(data, "hook_event_name", required=True)
        roots = data.get("workspace_roots")
        first_root = roots[0] if isinstance(roots, list) and roots and isinstance(roots[0], str) else None
        return HookEvent(
            host=HOST_NAME,
            name=EVENTS.get(raw, raw),
            session_id=either(data, "conversation_id", "session_id", required=True),
            transcript_path=text(data, "transcript_path"),
            cwd=text(data, "cwd") or first_root,
            source=text(data, "source"),
            reason=text(data, "reason"),
            prompt=text(data, "prompt"),
            reply=text(data, "text"),
            turn_id=text(data, "generation_id"),
            timestamp=stamp(data.get("timestamp")),
        )

    def read(self, source: Source, position: Position, *, final: bool, trim: TrimRule) -> Reading:
        before = JsonlState.from_dict(position.state)
        found, state = read_session(source.transcript, source.event, before, trim, line_to_message)
        last = found[-1]["id"] if found else position.last_id
        return Reading(found, Position(state.offset, last, state.to_dict()), state.rescans > before.rescans)

    def context_output(self, context: str) -> str:
        return session_start_output(context)


HOST = Cursor()
