"""Codex CLI: hook input and session rollout -> om-mcp messages.

From Codex's own documentation and source (openai/codex):
* Hooks (developers.openai.com/codex/hooks; `codex-rs/hooks`): `hooks.json`
  beside an active config layer, `~/.codex/hooks.json` and
  `<repo>/.codex/hooks.json`, in Claude Code's shape (event -> matcher groups
  -> `{"type": "command", "command", "timeout"}`). Hooks are on by default in
  current releases (`[features] hooks = false` turns them off; `codex_hooks`
  is the older name of that flag). A project's hooks run only once the project
  is trusted.
* Input (`codex-rs/hooks/schema/generated/*.command.input.schema.json`): every
  event carries `session_id`, `transcript_path` (string or null), `cwd`,
  `hook_event_name`, `model`; UserPromptSubmit adds `prompt` and `turn_id`,
  Stop adds `last_assistant_message` and `stop_hook_active`, SessionStart
  `source` (startup | resume | clear).
* Output (`codex-rs/hooks/src/events/session_start.rs`): SessionStart's stdout
  is JSON `{"hookSpecificOutput": {"hookEventName": "SessionStart",
  "additionalContext": ...}}` (or plain text), added to the model's context;
  exit 0 with no output is a no-op; any other exit code marks the hook failed
  in the UI and the turn goes on.
* MCP servers: `[mcp_servers.<name>]` tables (`command`, `args`, `env`) in
  `~/.codex/config.toml` or `<repo>/.codex/config.toml`, as `codex mcp add`
  (0.171.0) writes them.

The transcript is the session's rollout,
`~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl`: one
`{"timestamp", "type", "payload"}` object a line. `response_item` lines carry
what the model saw: `message` (role user | assistant | developer, content
parts `input_text` / `output_text`), `function_call` {name, arguments (a JSON
string), call_id}, `function_call_output` {call_id, output},
`custom_tool_call` / `custom_tool_call_output` (apply_patch) and
`local_shell_call`. `event_msg` lines repeat the same turns for the UI and are
skipped, as are `reasoning`, `session_meta`, `turn_context` and `compacted`.
User messages Codex writes itself (`<environment_context>`, AGENTS.md and
permission instructions) are skipped too. This shape was checked against the
rollout lines quoted from `codex-rs/protocol` (RolloutLine, ResponseItem); no
rollout could be recorded here, since a Codex session needs a login.

Each message's id is `L<line number>`, stable because the rollout only grows;
tool results get their tool's name from the call, carried across reads.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from typing import Any

from om_mcp.hosts.adapter import Host, Source
from om_mcp.hosts.jsonl import JsonlState, read_lines
from om_mcp.reading import Position, Reading
from om_mcp.trim import TrimRule, trim_value

# Text Codex puts in the user role for the model, not typed by the person.
INJECTED_PREFIXES = (
    "<environment_context>",
    "<user_instructions>",
    "<permissions instructions>",
    "<turn_aborted>",
    "<user_shell_command>",
    "# AGENTS.md instructions",
    "<INSTRUCTIONS>",
    "<hook_context>",
)
MAX_PENDING_TOOLS = 500
HOST_NAME = "codex"
# codex-rs/hooks: UserPromptSubmit, Stop (the turn is over), PreCompact, PostCompact.
INGEST_EVENTS = ("UserPromptSubmit", "Stop", "PreCompact", "PostCompact", "SubagentStop")


def read_messages(
    path: str | os.PathLike[str], state: JsonlState | None = None, trim: TrimRule | None = None
) -> tuple[list[dict[str, Any]], JsonlState]:
    """The messages of the rollout added since `state`, and the state to keep."""
    state = state or JsonlState()
    lines, new = read_lines(path, state)
    tools: dict[str, str] = dict(new.extra.get("tools") or {}) if not new.rescans > state.rescans else {}
    trim = trim or TrimRule()
    out = [m for number, line in lines if (m := line_to_message(number, line, trim, tools)) is not None]
    if len(tools) > MAX_PENDING_TOOLS:
        tools = dict(list(tools.items())[-MAX_PENDING_TOOLS:])
    return out, replace(new, extra={"tools": tools})


def line_to_message(number: int, line: dict[str, Any], trim: TrimRule, tools: dict[str, str]) -> dict[str, Any] | None:
    """One rollout line -> one message, or None when it is not conversation."""
    if line.get("type") != "response_item" or not isinstance(item := line.get("payload"), dict):
        return None
    kind = item.get("type")
    cuts: list[dict[str, Any]] = []
    if kind == "message":
        role = item.get("role")
        texts = [
            str(p.get("text"))
            for p in item.get("content") or []
            if isinstance(p, dict) and p.get("type") in ("input_text", "output_text", "text") and p.get("text")
        ]
        if role == "user":
            texts = [t for t in texts if not t.lstrip().startswith(INJECTED_PREFIXES)]
        if role not in ("user", "assistant") or not any(t.strip() for t in texts):
            return None  # developer and system messages are Codex's own instructions
        return _message(number, role, [{"type": "text", "text": t} for t in texts if t.strip()], line, [])
    if kind in ("function_call", "custom_tool_call", "local_shell_call"):
        name = str(item.get("name") or ("shell" if kind == "local_shell_call" else "unknown_tool"))
        call_id = item.get("call_id") or item.get("id")
        if isinstance(call_id, str):
            tools[call_id] = name
        args = _arguments(item)
        part: dict[str, Any] = {"type": "tool-call", "tool_name": name, "args": trim_value(args, trim, "args", cuts)}
        if isinstance(call_id, str):
            part["tool_call_id"] = call_id
        return _message(number, "assistant", [part], line, [{"part": 0, **c} for c in cuts])
    if kind in ("function_call_output", "custom_tool_call_output"):
        call_id = item.get("call_id")
        output = item.get("output")
        if isinstance(output, dict):  # {"content": "...", "success": bool} in some versions
            failed = output.get("success") is False
            output = output.get("content", output)
        else:
            failed = False
        result: dict[str, Any] = {
            "type": "tool-result",
            "tool_name": tools.pop(call_id, "unknown_tool") if isinstance(call_id, str) else "unknown_tool",
            "result": trim_value(output if output is not None else "", trim, "result", cuts),
        }
        if isinstance(call_id, str):
            result["tool_call_id"] = call_id
        if failed:
            result["is_error"] = True
        return _message(number, "tool", [result], line, [{"part": 0, **c} for c in cuts])
    return None  # reasoning, web_search_call and whatever comes next


def prompt_text(text: str) -> str:
    """What of UserPromptSubmit's `prompt` is the person's: all of it, unless it is text Codex writes itself."""
    return "" if text.lstrip().startswith(INJECTED_PREFIXES) else text.strip()


def _arguments(item: dict[str, Any]) -> Any:
    if item.get("type") == "custom_tool_call":
        return {"input": item.get("input", "")}
    if item.get("type") == "local_shell_call":
        return item.get("action") or {}
    raw = item.get("arguments")
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return {"arguments": raw}
    return raw if raw is not None else {}


def _message(
    number: int, role: str, parts: list[dict[str, Any]], line: dict[str, Any], trimmed: list[dict[str, Any]]
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"host": HOST_NAME}
    if trimmed:
        metadata["trimmed"] = trimmed
    out: dict[str, Any] = {"id": f"L{number}", "role": role, "content": parts, "metadata": metadata}
    if isinstance(line.get("timestamp"), str):
        out["created_at"] = line["timestamp"]
    return out


class Codex(Host):
    name = HOST_NAME
    title = "Codex CLI"
    ingest_events = INGEST_EVENTS
    open_events = ("UserPromptSubmit",)

    def read(self, source: Source, position: Position, *, final: bool, trim: TrimRule) -> Reading:
        before = JsonlState.from_dict(position.state)
        found, state = read_messages(source.transcript, before, trim) if source.transcript else ([], before)
        last = found[-1]["id"] if found else position.last_id
        return Reading(found, Position(state.offset, last, state.to_dict()), state.rescans > before.rescans)

    def clean_prompt(self, text: str) -> str:
        return prompt_text(text)


HOST = Codex()
