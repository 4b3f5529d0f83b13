"""Claude Code transcript entries -> om-mcp messages (the `MessageIn` shape).

What becomes a message (checked against Claude Code 2.1.197 transcripts):

* `user` entries: the person's text (and pasted images/documents) -> role
  "user". A `user` entry that only carries `tool_result` blocks is the
  harness returning tool output -> role "tool" with `tool-result` parts whose
  `tool_name` is taken from the matching `tool_use`.
* `assistant` entries: `text` blocks -> text parts, `tool_use` blocks ->
  `tool-call` parts. Claude Code writes one entry per content block, so one
  API response becomes several messages that share
  `metadata.claude_message_id`; each keeps its own entry uuid as id.
* Every message: thread = session id, id = entry `uuid`, `created_at` = entry
  `timestamp`, metadata {"host": "claude-code", ...}.

What is skipped, and why:

* `thinking` / `redacted_thinking` blocks: private reasoning, large, and
  signed blobs; the visible text and tool calls carry what happened.
* Harness bookkeeping entries: `attachment` (hook output, including the
  context om-mcp itself injected at SessionStart, skill and agent listings),
  `system` (compact boundaries, local command output, API errors),
  `summary`, `file-history-snapshot`, `queue-operation`, `last-prompt`,
  `mode`, titles, and any type not listed above.
* `isMeta` entries (command caveats, "Continue from where you left off."),
  synthetic assistant entries (`model: "<synthetic>"`, `isApiErrorMessage`),
  local-command markup (`<local-command-stdout>`, bash mode's `<bash-input>`,
  ...), built-in slash commands (/compact, /clear, /model, ...),
  "[Request interrupted by user]". A custom or plugin slash command is kept
  as the text the person typed ("/fix-issue 123"); its expanded prompt is a
  meta entry and is skipped.
* `/compact` summaries (`isCompactSummary`): skipped by default, because the
  original turns stay in the same transcript file above the compact boundary
  and are ingested as themselves; the summary would only repeat them.
  `ConvertOptions(keep_compact_summaries=True)` stores each as a "system"
  message marked `metadata.compact_summary`.
* Subagent (sidechain) entries: skipped by default. The parent thread already
  holds the delegation as a tool call (the task prompt) and its tool result
  (the subagent's final answer); the subagent's own steps live in
  `<session>/subagents/agent-<id>.jsonl` (older versions: `isSidechain`
  entries in the main file). `ConvertOptions(include_sidechains=True)` turns
  sidechain entries into messages of the same thread marked
  `metadata.sidechain = true` and `metadata.agent_id`.

Large tool output is trimmed by a `TrimRule` (default: first 1,500 and last
500 characters); each cut is recorded in `metadata.trimmed` as
{"part", "field", "original_chars", "kept_chars"}. Images and documents larger
than `max_attachment_chars` (base64) keep their type but not their data, also
recorded there. Conversion is deterministic: the same entry always gives the
same message, so re-reading a transcript never conflicts with stored ids.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from om_mcp.trim import TrimRule, trim_value

HOST = "claude-code"
UNKNOWN_TOOL = "unknown_tool"

_LOCAL_MARKUP = re.compile(
    r"^\s*<(command-message|command-args|local-command-stdout|local-command-stderr|"
    r"local-command-caveat|bash-input|bash-stdout|bash-stderr|user-memory-input)>"
)
_COMMAND = re.compile(r"<command-name>\s*(/?[^<]*?)\s*</command-name>")
_COMMAND_ARGS = re.compile(r"<command-args>(.*?)</command-args>", re.DOTALL)
# Built-in commands that steer Claude Code itself; a custom or plugin command
# ("/fix-issue 123") is what the person asked for and is kept as "/name args".
HOUSEKEEPING_COMMANDS = frozenset(
    "/add-dir /agents /bug /clear /compact /config /context /cost /doctor /exit /export /help /hooks /ide "
    "/init /install-github-app /login /logout /mcp /memory /model /output-style /permissions /plugin /plugins "
    "/pr-comments /privacy-settings /quit /release-notes /resume /rewind /status /statusline /terminal-setup "
    "/todos /upgrade /usage /vim /effort /fast /theme /keybindings /tasks /bashes /reload-plugins".split()
)
_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)
_INTERRUPTED = re.compile(r"^\[Request interrupted by user[^\]]*\]$")


@dataclass(frozen=True)
class ConvertOptions:
    trim: TrimRule = field(default_factory=TrimRule)
    include_sidechains: bool = False
    keep_compact_summaries: bool = False
    max_attachment_chars: int = 200_000  # base64 characters kept for an image or document


def to_messages(
    entries: Iterable[Mapping[str, Any]],
    *,
    options: ConvertOptions | None = None,
    known_tools: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Message dicts (MessageIn shape) for the entries worth remembering, in order.
    Their thread is the session id the hook was given.

    `known_tools` maps tool-use ids seen in earlier reads to tool names
    (`TranscriptState.pending_tools`), so a result whose call came in an
    earlier read still gets its name.
    """
    options = options or ConvertOptions()
    tools = dict(known_tools or {})
    out: list[dict[str, Any]] = []
    for entry in entries:
        message = entry_to_message(entry, options=options, tools=tools)
        if message is not None:
            out.append(message)
    return out


def entry_to_message(
    entry: Mapping[str, Any], *, options: ConvertOptions, tools: dict[str, str]
) -> dict[str, Any] | None:
    """One entry -> one message dict, or None when the entry is not conversation.

    `tools` is updated with the tool_use blocks seen (id -> name).
    """
    kind = entry.get("type")
    message = entry.get("message")
    uuid = entry.get("uuid")
    if kind not in ("user", "assistant") or not isinstance(message, dict) or not isinstance(uuid, str):
        return None
    if entry.get("isSidechain") and not options.include_sidechains:
        _remember_tools(message.get("content"), tools)
        return None
    if entry.get("isMeta") or entry.get("isApiErrorMessage") or message.get("model") == "<synthetic>":
        return None

    metadata: dict[str, Any] = {"host": HOST}
    if entry.get("isSidechain"):
        metadata["sidechain"] = True
        if entry.get("agentId"):
            metadata["agent_id"] = entry["agentId"]

    if entry.get("isCompactSummary") or entry.get("isVisibleInTranscriptOnly"):
        if not options.keep_compact_summaries:
            return None
        text = _plain_text(message.get("content"))
        if not text:
            return None
        return _message(uuid, "system", [{"type": "text", "text": text}], entry, {**metadata, "compact_summary": True})

    trimmed: list[dict[str, Any]] = []
    if kind == "assistant":
        parts = _assistant_parts(message.get("content"), options, tools, trimmed)
        role = "assistant"
        if message.get("id"):
            metadata["claude_message_id"] = message["id"]
        if message.get("model"):
            metadata["model"] = message["model"]
    else:
        parts = _user_parts(message.get("content"), options, tools, trimmed)
        role = "tool" if parts and all(p["type"] == "tool-result" for p in parts) else "user"
    if not parts:
        return None
    if trimmed:
        metadata["trimmed"] = trimmed
    return _message(uuid, role, parts, entry, metadata)


def _message(
    uuid: str, role: str, parts: list[dict[str, Any]], entry: Mapping[str, Any], metadata: dict[str, Any]
) -> dict[str, Any]:
    out: dict[str, Any] = {"id": uuid, "role": role, "content": parts, "metadata": metadata}
    if isinstance(entry.get("timestamp"), str):
        out["created_at"] = entry["timestamp"]
    return out


def _assistant_parts(
    content: Any, options: ConvertOptions, tools: dict[str, str], trimmed: list
) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content.strip() else []
    parts: list[dict[str, Any]] = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and str(block.get("text", "")).strip():
            parts.append({"type": "text", "text": block["text"]})
        elif kind in ("tool_use", "server_tool_use"):
            name = str(block.get("name") or UNKNOWN_TOOL)
            if isinstance(block.get("id"), str):
                tools[block["id"]] = name
            cuts: list[dict[str, Any]] = []
            args = trim_value(block.get("input"), options.trim, "args", cuts)
            trimmed.extend({"part": len(parts), **c} for c in cuts)
            part = {"type": "tool-call", "tool_name": name, "args": args}
            if isinstance(block.get("id"), str):
                part["tool_call_id"] = block["id"]
            parts.append(part)
        elif isinstance(kind, str) and kind.endswith("_tool_result"):  # server tools (web search)
            parts.append(
                _tool_result(block, options, tools, trimmed, len(parts), default_name=kind[: -len("_tool_result")])
            )
        # thinking, redacted_thinking and unknown blocks are skipped
    return parts


def _user_parts(content: Any, options: ConvertOptions, tools: dict[str, str], trimmed: list) -> list[dict[str, Any]]:
    if isinstance(content, str):
        text = _user_text(content)
        return [{"type": "text", "text": text}] if text else []
    parts: list[dict[str, Any]] = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            text = _user_text(str(block.get("text", "")))
            if text:
                parts.append({"type": "text", "text": text})
        elif kind == "tool_result":
            parts.append(_tool_result(block, options, tools, trimmed, len(parts)))
        elif kind in ("image", "document"):
            part = _attachment(block, options, trimmed, len(parts))
            if part is not None:
                parts.append(part)
    return parts


def _user_text(text: str) -> str:
    command = _COMMAND.search(text)
    if command:
        name = command.group(1).strip()
        name = name if name.startswith("/") else "/" + name
        if name in HOUSEKEEPING_COMMANDS:
            return ""
        args = _COMMAND_ARGS.search(text)
        return f"{name} {args.group(1).strip() if args else ''}".strip()
    if _LOCAL_MARKUP.match(text):
        return ""
    text = _REMINDER.sub("", text).strip()
    if _INTERRUPTED.match(text):
        return ""
    return text


def prompt_text(text: str) -> str:
    """What of a prompt typed in Claude Code is kept (UserPromptSubmit's `prompt`): as a user entry's text
    is, so the transcript's copy is recognised; a built-in command (/clear, /compact) keeps nothing."""
    words = text.split()
    if words and words[0] in HOUSEKEEPING_COMMANDS:
        return ""
    return _user_text(text)


def _tool_result(
    block: dict[str, Any],
    options: ConvertOptions,
    tools: dict[str, str],
    trimmed: list,
    index: int,
    default_name: str = UNKNOWN_TOOL,
) -> dict[str, Any]:
    call_id = block.get("tool_use_id") if isinstance(block.get("tool_use_id"), str) else None
    name = (tools.pop(call_id, None) if call_id else None) or default_name or UNKNOWN_TOOL
    cuts: list[dict[str, Any]] = []
    result = trim_value(_result_value(block.get("content")), options.trim, "result", cuts)
    trimmed.extend({"part": index, **c} for c in cuts)
    part: dict[str, Any] = {"type": "tool-result", "tool_name": name, "result": result}
    if call_id:
        part["tool_call_id"] = call_id
    if block.get("is_error") is True:
        part["is_error"] = True
    return part


def _result_value(content: Any) -> Any:
    """Tool output as text: a string stays; a list of blocks becomes their text,
    with a placeholder for each image (its bytes are not kept)."""
    if isinstance(content, list):
        pieces = []
        for block in content:
            if isinstance(block, dict) and block.get("type") == "text":
                pieces.append(str(block.get("text", "")))
            elif isinstance(block, dict) and block.get("type") == "image":
                media = (block.get("source") or {}).get("media_type", "image")
                pieces.append(f"[image: {media}]")
            elif isinstance(block, dict) and block.get("type") == "tool_reference":
                pieces.append(f"[tool: {block.get('tool_name', '')}]")
            else:
                pieces.append(json.dumps(block, ensure_ascii=False, sort_keys=True))
        return "\n".join(pieces)
    return "" if content is None else content


def _attachment(block: dict[str, Any], options: ConvertOptions, trimmed: list, index: int) -> dict[str, Any] | None:
    source = found if isinstance(found := block.get("source"), dict) else {}
    kind = "image" if block.get("type") == "image" else "file"
    mime = source.get("media_type") or ("image/png" if kind == "image" else "application/pdf")
    part: dict[str, Any] = {"type": kind, "mime_type": mime}
    if source.get("type") == "url" and source.get("url"):
        part["url"] = source["url"]
    elif source.get("type") == "base64" and isinstance(source.get("data"), str):
        data = source["data"]
        if len(data) <= options.max_attachment_chars:
            part["data"] = data
        else:
            trimmed.append({"part": index, "field": "data", "original_chars": len(data), "kept_chars": 0})
    elif source.get("type") == "text" and isinstance(source.get("data"), str):  # plain-text documents
        text = source["data"]
        return {"type": "text", "text": text} if text.strip() else None
    if block.get("title"):
        part["name"] = str(block["title"])
    return part


def _plain_text(content: Any) -> str:
    if isinstance(content, str):
        return content.strip()
    if isinstance(content, list):
        return "\n".join(
            str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text"
        ).strip()
    return ""


def _remember_tools(content: Any, tools: dict[str, str]) -> None:
    for block in content if isinstance(content, list) else []:
        if (
            isinstance(block, dict)
            and block.get("type") in ("tool_use", "server_tool_use")
            and isinstance(block.get("id"), str)
        ):
            tools[block["id"]] = str(block.get("name") or UNKNOWN_TOOL)
