"""Gemini CLI: hook input and session transcript -> om-mcp messages.

Why Gemini CLI as the second host: its hooks reference
(google-gemini/gemini-cli docs/hooks/reference.md) documents lifecycle events
with the same stdin/stdout JSON contract as Claude Code (session_id,
transcript_path, cwd, hook_event_name; SessionStart may return
`hookSpecificOutput.additionalContext`), and its code is JavaScript on npm, so
the transcript format could be read at the source and checked by running
gemini-cli 0.61.0 against a local fake API (fixtures in tests/fixtures/gemini_cli).

The transcript (`~/.gemini/tmp/<project>/chats/session-<time>-<id>.jsonl`) is
not a plain log: it is a record log folded by message id.
* the first line is metadata {sessionId, projectHash, startTime, kind, ...};
* a message record {id, timestamp, type: user|gemini|info|error|warning,
  content, toolCalls?, thoughts?, tokens?, model?} is written again, whole,
  each time it changes (a "gemini" message gains its tool calls and results);
* {"$set": {...}} updates metadata (and, on resume and after compression,
  holds a rebuilt copy of the model's history in `messages`);
* {"$rewindTo": id} drops that message and everything after it.
Older versions wrote one JSON object ({..., "messages": [...]}) to `.json`.

So the reader folds the whole file each time (session files are small; at most
MAX_SESSION_BYTES are read, through the shared bounded reader) and returns the
messages after the last one it returned. The newest "gemini"
message may still change until its turn ends, so it is held back unless the
caller says the turn is over (`final=True`: AfterAgent, SessionEnd).

Conversion: "user" -> role user (the `<session_context>` setup message and
`<hook_context>` blocks, which hooks such as ours inject into the prompt, are
removed); "gemini" -> role assistant with text and `tool-call` parts, plus a
role "tool" message `<id>:tool-results` with the results from `toolCalls`;
user records that only echo `functionResponse`s are skipped (same results);
thoughts, info/error/warning records are skipped. Large outputs are trimmed
by the same `TrimRule` as Claude Code and recorded in `metadata.trimmed`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from om_mcp.hosts import reader
from om_mcp.hosts.adapter import Host, Source
from om_mcp.hosts.common import HookPlan
from om_mcp.hosts.reader import first_fields
from om_mcp.reading import Position, Reading
from om_mcp.trim import TrimRule, trim_value

HOST_NAME = "gemini-cli"
# BeforeAgent carries the prompt (`hosts.prompts`); AfterAgent and SessionEnd close a turn (its last reply is complete).
INGEST_EVENTS = ("BeforeAgent", "AfterAgent", "PreCompress", "SessionEnd")
FINAL_EVENTS = ("AfterAgent", "SessionEnd")

_HOOK_CONTEXT = re.compile(r"<hook_context>.*?</hook_context>\s*", re.DOTALL)


# --------------------------------------------------------------------------------------
# Transcript
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GeminiState:
    """The id of the last message returned; plain data, store `to_dict()`."""

    emitted_through: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> GeminiState:
        return cls(emitted_through=(data or {}).get("emitted_through"))


@dataclass(frozen=True)
class GeminiOptions:
    trim: TrimRule = field(default_factory=TrimRule)
    max_attachment_chars: int = 200_000


MAX_SESSION_BYTES = 256 * 1024 * 1024  # the file is folded whole, so it is read whole, up to this


def load_records(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The message records of a session file after folding (updates, $set, rewinds)."""
    records: list[Any] = []
    try:
        if os.fspath(path).endswith(".json"):  # the older one-object format
            try:
                whole = json.loads(reader.read_bytes(path, MAX_SESSION_BYTES).decode("utf-8", "replace"))
                records = [whole] if isinstance(whole, dict) else []
            except (ValueError, RecursionError):
                records = []
            return fold(records)
        lines = reader.read_lines(path, max_run=MAX_SESSION_BYTES)  # a half-written last line waits
    except FileNotFoundError:
        return []
    if lines.more:
        raise reader.NotReadable(f"{os.fspath(path)}: more than the {MAX_SESSION_BYTES:,} bytes a session is read")
    for _, line in lines.lines:
        try:
            records.append(json.loads(line.decode("utf-8", "replace")))
        except (ValueError, RecursionError):
            continue
    return fold(records)


def fold(records: list[Any]) -> list[dict[str, Any]]:
    """The messages of a session, in order, each in its latest version.

    `$set.messages` is not applied: Gemini CLI writes it on resume and after
    compression as a rebuilt copy of the model's history (without the user's
    prompts, with tool calls as raw parts), while every real message also has
    its own record. The older `.json` format is read through it.
    """
    messages: dict[str, dict[str, Any]] = {}
    for record in records:
        if not isinstance(record, dict):
            continue
        if isinstance(record.get("$rewindTo"), str):
            ids = list(messages)
            cut = ids.index(record["$rewindTo"]) if record["$rewindTo"] in messages else len(ids)
            for message_id in ids[cut:]:
                del messages[message_id]
        elif isinstance(record.get("messages"), list) and "id" not in record:  # the older one-object file
            for message in record["messages"]:
                if isinstance(message, dict) and isinstance(message.get("id"), str):
                    messages[message["id"]] = message
        elif isinstance(record.get("id"), str) and "type" in record:
            messages[record["id"]] = record
    return list(messages.values())


def read_messages(
    path: str | os.PathLike[str],
    state: GeminiState | None = None,
    *,
    final: bool = False,
    options: GeminiOptions | None = None,
) -> tuple[list[dict[str, Any]], GeminiState]:
    """Messages added since `state`. With `final=False` the newest assistant
    message is held back: its turn may still add tool calls to it."""
    state = state or GeminiState()
    records = load_records(path)
    if not final and records and records[-1].get("type") == "gemini":
        records = records[:-1]
    ids = [r["id"] for r in records]
    start = ids.index(state.emitted_through) + 1 if state.emitted_through in ids else 0
    fresh = records[start:]
    if not fresh:
        return [], state
    options = options or GeminiOptions()
    messages = [m for record in fresh for m in record_to_messages(record, options)]
    return messages, GeminiState(emitted_through=fresh[-1]["id"])


def record_to_messages(record: dict[str, Any], options: GeminiOptions) -> list[dict[str, Any]]:
    kind = record.get("type")
    if kind == "user":
        parts = _user_parts(record.get("content"), options)
        return [_message(record["id"], "user", parts, record.get("timestamp"), {"host": HOST_NAME})] if parts else []
    if kind != "gemini":
        return []  # info, error, warning: UI notices
    out: list[dict[str, Any]] = []
    metadata: dict[str, Any] = {"host": HOST_NAME}
    if record.get("model"):
        metadata["model"] = record["model"]
    parts = [{"type": "text", "text": t} for t in _texts(record.get("content"))]
    calls = [c for c in record.get("toolCalls") or [] if isinstance(c, dict)]
    trimmed: list[dict[str, Any]] = []
    for call in calls:
        cuts: list[dict[str, Any]] = []
        args = trim_value(call.get("args"), options.trim, "args", cuts)
        trimmed.extend({"part": len(parts), **c} for c in cuts)
        part = {"type": "tool-call", "tool_name": str(call.get("name") or "unknown_tool"), "args": args}
        if isinstance(call.get("id"), str):
            part["tool_call_id"] = call["id"]
        parts.append(part)
    if parts:
        out.append(_message(record["id"], "assistant", parts, record.get("timestamp"), _with_trims(metadata, trimmed)))
    results, trimmed = _results(calls, options)
    if results:
        when = next((c.get("timestamp") for c in reversed(calls) if c.get("timestamp")), record.get("timestamp"))
        out.append(
            _message(f"{record['id']}:tool-results", "tool", results, when, _with_trims({"host": HOST_NAME}, trimmed))
        )
    return out


def _results(calls: list[dict[str, Any]], options: GeminiOptions) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    parts: list[dict[str, Any]] = []
    trimmed: list[dict[str, Any]] = []
    for call in calls:
        if "result" not in call and call.get("status") not in ("error", "cancelled"):
            continue  # still running
        value, error = _result_value(call.get("result"))
        cuts: list[dict[str, Any]] = []
        value = trim_value(value, options.trim, "result", cuts)
        trimmed.extend({"part": len(parts), **c} for c in cuts)
        part = {"type": "tool-result", "tool_name": str(call.get("name") or "unknown_tool"), "result": value}
        if isinstance(call.get("id"), str):
            part["tool_call_id"] = call["id"]
        if error or call.get("status") in ("error", "cancelled"):
            part["is_error"] = True
        parts.append(part)
    return parts, trimmed


def _result_value(result: Any) -> tuple[Any, bool]:
    """The tool output from a list of functionResponse parts: the `output` text
    when that is all there is, else the response object."""
    if not isinstance(result, list):
        return result, False
    values, error = [], False
    for item in result:
        response = (item.get("functionResponse") or {}).get("response") if isinstance(item, dict) else None
        if isinstance(response, dict):
            error = error or "error" in response
            only = set(response)
            values.append(
                response["output"] if only == {"output"} else response["error"] if only == {"error"} else response
            )
        elif isinstance(item, dict) and "text" in item:
            values.append(item["text"])
    if len(values) == 1:
        return values[0], error
    return values, error


def _user_parts(content: Any, options: GeminiOptions) -> list[dict[str, Any]]:
    items = content if isinstance(content, list) else [{"text": content}] if isinstance(content, str) else []
    if items and all(isinstance(i, dict) and "functionResponse" in i for i in items):
        return []  # the tool results going back to the model; taken from toolCalls
    parts: list[dict[str, Any]] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        if isinstance(item.get("text"), str):
            text = _HOOK_CONTEXT.sub("", item["text"]).strip()
            if text and not text.startswith("<session_context>"):
                parts.append({"type": "text", "text": text})
        elif isinstance(inline := item.get("inlineData"), dict):
            mime = str(inline.get("mimeType") or "application/octet-stream")
            part: dict[str, Any] = {"type": "image" if mime.startswith("image/") else "file", "mime_type": mime}
            if isinstance(inline.get("data"), str) and len(inline["data"]) <= options.max_attachment_chars:
                part["data"] = inline["data"]
            parts.append(part)
        elif isinstance(data := item.get("fileData"), dict):
            mime = str(data.get("mimeType") or "application/octet-stream")
            parts.append(
                {
                    "type": "image" if mime.startswith("image/") else "file",
                    "mime_type": mime,
                    **({"url": data["fileUri"]} if data.get("fileUri") else {}),
                }
            )
    return parts


def prompt_text(text: str) -> str:
    """BeforeAgent's `prompt` as the chat file keeps the person's part of it: without hooks' `<hook_context>`."""
    text = _HOOK_CONTEXT.sub("", text).strip()
    return "" if text.startswith("<session_context>") else text


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content] if content.strip() else []
    if isinstance(content, list):
        return [
            i["text"]
            for i in content
            if isinstance(i, dict) and isinstance(i.get("text"), str) and i["text"].strip() and not i.get("thought")
        ]
    return []


def _message(
    message_id: str, role: str, parts: list[dict[str, Any]], when: Any, metadata: dict[str, Any]
) -> dict[str, Any]:
    out: dict[str, Any] = {"id": message_id, "role": role, "content": parts, "metadata": metadata}
    if isinstance(when, str):
        out["created_at"] = when
    return out


def _with_trims(metadata: dict[str, Any], trimmed: list[dict[str, Any]]) -> dict[str, Any]:
    return {**metadata, "trimmed": trimmed} if trimmed else metadata


# --------------------------------------------------------------------------------------
# The adapter
# --------------------------------------------------------------------------------------


class GeminiCli(Host):
    name = HOST_NAME
    title = "Gemini CLI"
    ingest_events = INGEST_EVENTS

    def plan(self, event_name: str) -> HookPlan:
        """SessionStart: catch up and print the context; AfterAgent and SessionEnd: the finished turn;
        BeforeAgent and PreCompress: what is there, holding back the open reply."""
        if event_name == "SessionStart":
            return HookPlan(ingest=True, final=False, print_context=True)
        if event_name in INGEST_EVENTS:
            return HookPlan(ingest=True, final=event_name in FINAL_EVENTS)
        return HookPlan()

    def read(self, source: Source, position: Position, *, final: bool, trim: TrimRule) -> Reading:
        if not source.transcript:
            return Reading([], position)
        found, state = read_messages(
            source.transcript, GeminiState.from_dict(position.state), final=final, options=GeminiOptions(trim=trim)
        )
        return Reading(found, Position(0, state.emitted_through, state.to_dict()))

    def clean_prompt(self, text: str) -> str:
        return prompt_text(text)

    def recognises(self, entry: Mapping[str, Any]) -> bool:
        return "projectHash" in entry or "$set" in entry or "$rewindTo" in entry

    def session_of(self, path: str) -> tuple[str | None, str | None]:
        """The chat file names its session, not its folder: the project is the current directory's."""
        return first_fields(path, "sessionId")[0], os.getcwd()


HOST = GeminiCli()
