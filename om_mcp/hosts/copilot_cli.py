"""GitHub Copilot CLI: hook input, session event log and SessionStart output.

From GitHub's hooks reference (docs.github.com, copilot/reference/hooks-reference) and what
Copilot CLI 1.0.102 (npm @github/copilot) did here against a scripted model (BYOK:
`COPILOT_PROVIDER_BASE_URL`, `COPILOT_OFFLINE=true`, no GitHub login):
* Hooks: `{"hooks": {"<Event>": [{"type": "command", "command", "timeout"}]}}` in
  `~/.copilot/hooks/*.json`, `.github/hooks/*.json`, or inline in `~/.copilot/settings.json`
  (`$COPILOT_HOME` instead of `~/.copilot`). Configured by their PascalCase names (SessionStart,
  UserPromptSubmit, Stop, SubagentStop, PreCompact, SessionEnd), events arrive in the
  "VS Code compatible" shape, which is Claude Code's: `hook_event_name`, `session_id`, `cwd`, an ISO
  `timestamp`; UserPromptSubmit adds `prompt`, SessionStart `source` (startup | resume | new),
  Stop, SubagentStop and PreCompact `transcript_path`, SessionEnd `reason`.
* Output: SessionStart's stdout `{"additionalContext": "..."}` is added to the session (the nested
  `hookSpecificOutput` shape is not read: checked with 1.0.102). A failing hook is logged and the
  session goes on.
* MCP servers: `~/.copilot/mcp-config.json`, `{"mcpServers": {"<name>": {"type": "local",
  "command", "args", "tools": ["*"]}}}`, as `copilot mcp add` 1.0.102 writes it.

The transcript is the session's event log, `~/.copilot/session-state/<session id>/events.jsonl`
(schema: the package's `schemas/session-events.schema.json`): one `{"type", "data", "id",
"timestamp", "parentId"}` object a line. `user.message` (`data.content`: what was typed; the
model's copy, `transformedContent`, adds a date), `assistant.message` (`content`, and
`toolRequests` [{toolCallId, name, arguments}]) and `tool.execution_complete` (`toolCallId`,
`success`, `result.content` or `error.message`) are the conversation; hook, turn, usage and
session events are skipped. Each message's id is its event's id. Only some events name the
transcript, so it is found by the session id when the event does not say (the id is Copilot's
UUID: anything else names no file).

VS Code reads hook files in `~/.copilot/hooks` too, so setup writes Copilot CLI's hooks inline in
its own `settings.json`, which only Copilot CLI reads.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from om_mcp.hosts.adapter import Host, Source
from om_mcp.hosts.jsonl import JsonlState, read_lines
from om_mcp.hosts.reader import MAX_LINE_BYTES, MAX_RUN_BYTES
from om_mcp.hosts.reader import read_lines as read_raw_lines
from om_mcp.reading import Position, Reading
from om_mcp.trim import TrimRule, trim_value

HOST_NAME = "copilot-cli"
INGEST_EVENTS = ("UserPromptSubmit", "Stop", "SubagentStop", "PreCompact", "SessionEnd")
MAX_PENDING_TOOLS = 500
_SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$")


def copilot_home(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    return Path(env["COPILOT_HOME"]) if env.get("COPILOT_HOME") else Path(env.get("HOME") or Path.home()) / ".copilot"


def transcript_of(session_id: str, env: Mapping[str, str] | None = None) -> str | None:
    """The event log of a session, found by its id (None for an id that is no plain name)."""
    if not _SESSION_ID.match(session_id):
        return None
    return str(copilot_home(env) / "session-state" / session_id / "events.jsonl")


def read_messages(
    path: str | os.PathLike[str],
    state: JsonlState | None = None,
    trim: TrimRule | None = None,
    max_bytes: int = MAX_RUN_BYTES,
) -> tuple[list[dict[str, Any]], JsonlState]:
    """The messages of the event log added since `state`, and the state to keep."""
    state = state or JsonlState()
    lines, new = read_lines(path, state, max_bytes)
    tools: dict[str, str] = dict(new.extra.get("tools") or {}) if not new.rescans > state.rescans else {}
    trim = trim or TrimRule()
    out = [m for _, line in lines if (m := line_to_message(line, trim, tools)) is not None]
    if len(tools) > MAX_PENDING_TOOLS:
        tools = dict(list(tools.items())[-MAX_PENDING_TOOLS:])
    return out, replace(new, extra={"tools": tools})


def line_to_message(line: dict[str, Any], trim: TrimRule, tools: dict[str, str]) -> dict[str, Any] | None:
    """One event -> one message, or None when it is not conversation."""
    kind, data = line.get("type"), line.get("data")
    if not isinstance(data, dict) or not isinstance(line.get("id"), str):
        return None
    cuts: list[dict[str, Any]] = []
    if kind == "user.message":
        text = data.get("content")
        if not isinstance(text, str) or not text.strip():
            return None
        return _message(line, "user", [{"type": "text", "text": text.strip()}], cuts)
    if kind == "assistant.message":
        parts: list[dict[str, Any]] = []
        if isinstance(data.get("content"), str) and data["content"].strip():
            parts.append({"type": "text", "text": data["content"].strip()})
        for request in data.get("toolRequests") or []:
            if not isinstance(request, dict):
                continue
            name = str(request.get("name") or "unknown_tool")
            part: dict[str, Any] = {"type": "tool-call", "tool_name": name}
            part["args"] = trim_value(request.get("arguments") or {}, trim, "args", cuts)
            if isinstance(call_id := request.get("toolCallId"), str):
                part["tool_call_id"] = call_id
                tools[call_id] = name
            parts.append(part)
        return _message(line, "assistant", parts, cuts) if parts else None
    if kind == "tool.execution_complete":
        call_id = data.get("toolCallId")
        result, error = data.get("result"), data.get("error")
        if isinstance(result, dict):
            output = result.get("content")
        else:
            output = error.get("message", "") if isinstance(error, dict) else ""
        tool: dict[str, Any] = {
            "type": "tool-result",
            "tool_name": tools.pop(call_id, "unknown_tool") if isinstance(call_id, str) else "unknown_tool",
            "result": trim_value(output if output is not None else "", trim, "result", cuts),
        }
        if isinstance(call_id, str):
            tool["tool_call_id"] = call_id
        if data.get("success") is False:
            tool["is_error"] = True
        return _message(line, "tool", [tool], cuts)
    return None


def _message(line: dict[str, Any], role: str, parts: list[dict[str, Any]], cuts: list) -> dict[str, Any]:
    metadata: dict[str, Any] = {"host": HOST_NAME}
    if cuts:
        metadata["trimmed"] = cuts
    out: dict[str, Any] = {"id": line["id"], "role": role, "content": parts, "metadata": metadata}
    if isinstance(line.get("timestamp"), str):
        out["created_at"] = line["timestamp"]
    return out


class CopilotCli(Host):
    name = HOST_NAME
    title = "GitHub Copilot CLI"
    ingest_events = INGEST_EVENTS
    open_events = ("UserPromptSubmit",)

    def read(self, source: Source, position: Position, *, final: bool, trim: TrimRule) -> Reading:
        path = source.transcript or (transcript_of(source.event.session_id) if source.event else None)
        before = JsonlState.from_dict(position.state)
        found, state = read_messages(path, before, trim, source.max_bytes) if path else ([], before)
        last = found[-1]["id"] if found else position.last_id
        rescanned = state.rescans > before.rescans
        return Reading(found, Position(state.offset, last, state.to_dict()), rescanned, more=state.more)

    def context_output(self, context: str) -> str:
        import json

        return json.dumps({"additionalContext": context}, ensure_ascii=False) if context else ""

    def recognises(self, entry: Mapping[str, Any]) -> bool:
        data = entry.get("data")
        return entry.get("type") == "session.start" and isinstance(data, dict) and "copilotVersion" in data

    def session_of(self, path: str) -> tuple[str | None, str | None]:
        import json

        try:
            first = read_raw_lines(path, max_run=MAX_LINE_BYTES + 1).lines[:1]
            entry = json.loads(first[0][1]) if first else None
        except (OSError, ValueError):
            return None, None
        data = entry.get("data") if isinstance(entry, dict) else None
        if not isinstance(data, dict):
            return None, None
        cwd = (data.get("context") or {}).get("cwd") if isinstance(data.get("context"), dict) else None
        session = data.get("sessionId")
        return (session if isinstance(session, str) else None), (cwd if isinstance(cwd, str) else None)


HOST = CopilotCli()
