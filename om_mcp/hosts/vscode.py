"""VS Code agent mode: hook input and transcript.

From VS Code's documentation (microsoft/vscode-docs,
docs/agent-customization/hooks.md and docs/agents/reference/hooks-reference.md,
July 2026):
* Hook files: `.github/hooks/*.json` in the workspace, `~/.copilot/hooks` for
  the user, and Claude Code's `.claude/settings.json` and
  `~/.claude/settings.json` (the `chat.hookFilesLocations` setting lists them).
  The format is Claude Code's: `{"hooks": {"<Event>": [{"type": "command",
  "command", "timeout"}]}}`; matchers are ignored. Events: SessionStart,
  UserPromptSubmit, PreToolUse, PostToolUse, PreCompact, SubagentStart,
  SubagentStop, Stop.
* Input: every event carries `timestamp`, `cwd`, `sessionId`,
  `hookEventName` and `transcript_path` ("when available"; its format "is not
  a stable hook API"); UserPromptSubmit adds `prompt`, SessionStart `source`
  (always "new").
* Output: SessionStart may print `{"hookSpecificOutput": {"hookEventName":
  "SessionStart", "additionalContext": ...}}`, added to the agent's
  conversation. Exit 0: stdout is parsed as JSON; 2: blocking error shown to
  the model; anything else: a warning and processing goes on.
* MCP servers: `.vscode/mcp.json` or the user profile's `mcp.json`
  (docs/agents/reference/mcp-configuration.md), `{"servers": {"<name>":
  {"type": "stdio", "command", "args", "env"}}}`. The profile folder is the
  one holding `settings.json` (docs/configure/settings.md): on Linux
  `~/.config/Code/User`, on macOS `~/Library/Application Support/Code/User`,
  on Windows `%APPDATA%\\Code\\User`.

Because the transcript's format is not documented, the adapter reads the lines
it recognises (Copilot's session event log: `{"type": "user.message" |
"assistant.message", "data": {"content"}}`), and otherwise records each prompt
from UserPromptSubmit's `prompt` field; VS Code's payloads carry no reply, so
a session recorded that way holds the person's side only (`hosts.chat_lines`).
VS Code also reads `~/.claude/settings.json`: its calls reaching `om-mcp hook
claude-code` are told apart by `sessionId`/`hookEventName` and read here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from om_mcp.hosts.adapter import Host, Source
from om_mcp.hosts.chat_lines import read_session, text_parts
from om_mcp.hosts.events import HookEvent, common, either
from om_mcp.hosts.jsonl import JsonlState
from om_mcp.reading import Position, Reading
from om_mcp.trim import TrimRule

ROLES = {"user.message": "user", "assistant.message": "assistant"}
HOST_NAME = "vscode"
# VS Code agent hooks (Claude-compatible names; Copilot CLI's lowerCamel ones are converted by VS Code).
INGEST_EVENTS = ("UserPromptSubmit", "Stop", "SubagentStop", "PreCompact")


def read_messages(
    event: HookEvent, state: JsonlState | None = None, trim: TrimRule | None = None
) -> tuple[list[dict[str, Any]], JsonlState]:
    """The session's new messages (transcript, else the prompts of the payloads) and the state to keep."""
    return read_session(event.transcript_path, event, state or JsonlState(), trim or TrimRule(), line_to_message)


def line_to_message(number: int, line: dict[str, Any], trim: TrimRule) -> dict[str, Any] | None:
    role = ROLES.get(str(line.get("type")))
    data = line.get("data")
    if role is None or not isinstance(data, dict):
        return None
    parts = text_parts(data.get("content"))
    if not parts:
        return None
    message: dict[str, Any] = {
        "id": str(line.get("id") or f"L{number}"),
        "role": role,
        "content": parts,
        "metadata": {"host": HOST_NAME},
    }
    if isinstance(line.get("timestamp"), str):
        message["created_at"] = line["timestamp"]
    return message


class VSCode(Host):
    name = HOST_NAME
    title = "VS Code"
    ingest_events = INGEST_EVENTS
    open_events = ("UserPromptSubmit",)

    def read_event(self, data: Mapping[str, Any]) -> HookEvent:
        return common(
            HOST_NAME,
            data,
            name=either(data, "hookEventName", "hook_event_name", required=True),
            session_id=either(data, "sessionId", "session_id", required=True),
        )

    def read(self, source: Source, position: Position, *, final: bool, trim: TrimRule) -> Reading:
        before = JsonlState.from_dict(position.state)
        found, state = read_session(source.transcript, source.event, before, trim, line_to_message)
        last = found[-1]["id"] if found else position.last_id
        return Reading(found, Position(state.offset, last, state.to_dict()), state.rescans > before.rescans)


HOST = VSCode()
