"""Import a JSONL file of OpenAI-style chat messages.

One JSON object per line: {"role", "content"} plus, optionally, "id",
"created_at" or "timestamp" (ISO-8601, or Unix seconds or milliseconds),
"name", "tool_calls" (assistant) and "tool_call_id" (tool). `content` is a
string, null, or a list of OpenAI content parts (text, image_url, input_audio,
file, refusal; the Responses API's input_text/output_text too).

Roles: user, assistant, system, tool; "developer" is read as system and
"function" as tool. Assistant `tool_calls` become tool-call parts; a tool
message becomes a tool-result part named after the call it answers.

A line without an id gets one derived from its line number and its text, so
importing the same file twice yields the same ids (and no duplicates).
Every line is checked before anything is returned: the first problem raises
`ImportFormatError` naming the line and the field.
"""

from __future__ import annotations

import hashlib
import json
import mimetypes
import os
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from om_mcp.messages import MessageIn

ROLES = {
    "user": "user",
    "assistant": "assistant",
    "system": "system",
    "tool": "tool",
    "developer": "system",
    "function": "tool",
}
UNKNOWN_TOOL = "unknown_tool"


class ImportFormatError(ValueError):
    """A line of the import file is not a usable message."""


def read_openai_messages(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The messages of a JSONL file, in order, as MessageIn-shaped dicts."""
    try:
        with open(path, encoding="utf-8") as handle:
            return parse_openai_messages(_lines(handle))
    except UnicodeDecodeError as exc:
        raise ImportFormatError(f"{os.fspath(path)}: not UTF-8 text ({exc.reason})") from None


def stream_openai_messages(path: str | os.PathLike[str], problems: list[str]) -> Iterator[dict[str, Any]]:
    """The messages of a JSONL file one at a time, in bounded memory; a line that is not a message is
    noted in `problems` (one line each, naming it) and skipped, and the rest go on."""
    with open(path, encoding="utf-8", errors="replace") as handle:
        yield from openai_messages(_lines(handle, problems), problems)


MAX_LINE_CHARS = 16 * 1024 * 1024  # one message: the largest one accepted is far smaller


def _lines(handle: Any, problems: list[str] | None = None) -> Iterator[str]:
    """The file's lines, each read only up to MAX_LINE_CHARS (a longer one raises, or is noted in
    `problems` and skipped, its line number kept)."""
    number = 0
    while line := handle.readline(MAX_LINE_CHARS + 1):
        number += 1
        if len(line) > MAX_LINE_CHARS:
            problem = f"line {number}: longer than {MAX_LINE_CHARS:,} characters: not one message"
            if problems is None:
                raise ImportFormatError(problem)
            problems.append(problem)
            while line and not line.endswith("\n"):  # the rest of that line, unread
                line = handle.readline(MAX_LINE_CHARS + 1)
            yield ""  # its number stays taken
            continue
        yield line


def parse_openai_messages(lines: Iterable[str]) -> list[dict[str, Any]]:
    """Every line's message; the first line that is not one raises `ImportFormatError` naming it."""
    return list(openai_messages(lines))


def openai_messages(lines: Iterable[str], problems: list[str] | None = None) -> Iterator[dict[str, Any]]:
    """Each line's message, in order. A line that is not one raises `ImportFormatError` naming the line
    and the field, or, given `problems`, is noted there and skipped."""
    tools: dict[str, str] = {}
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            yield _checked(raw, number, tools)
        except ImportFormatError as error:
            if problems is None:
                raise
            problems.append(str(error))


def _checked(raw: str, number: int, tools: dict[str, str]) -> dict[str, Any]:
    """One line's message; ImportFormatError naming the line and the field."""
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ImportFormatError(f"line {number}: not JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise ImportFormatError(f"line {number}: nested too deeply") from None
    if not isinstance(data, dict):
        raise ImportFormatError(f"line {number}: expected a JSON object, got {type(data).__name__}")
    try:
        message = _message(data, raw.strip(), number, tools)
        MessageIn.model_validate(message)
    except ImportFormatError:
        raise
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise ImportFormatError(f"line {number}: {where}: {first['msg']}") from None
    except (TypeError, ValueError) as exc:
        raise ImportFormatError(f"line {number}: {exc}") from None
    return message


def _message(data: dict[str, Any], raw: str, number: int, tools: dict[str, str]) -> dict[str, Any]:
    def fail(field: str, problem: str) -> ImportFormatError:
        return ImportFormatError(f"line {number}: {field}: {problem}")

    role = ROLES.get(str(data.get("role", "")))
    if role is None:
        got = data.get("role")
        raise fail("role", f"{got!r} is not one of user, assistant, system, tool" if got is not None else "missing")
    if "content" not in data and not data.get("tool_calls"):
        raise fail("content", "missing")
    parts = _parts(data.get("content"), fail)
    if role == "assistant":
        parts += _tool_calls(data.get("tool_calls"), tools, fail)
    if role == "tool":
        call_id = data.get("tool_call_id")
        name = tools.get(call_id) if isinstance(call_id, str) else None
        name = name or data.get("name") or UNKNOWN_TOOL
        result = "\n".join(p.get("text", "") for p in parts if p["type"] == "text") if parts else data.get("content")
        part: dict[str, Any] = {"type": "tool-result", "tool_name": str(name), "result": result}
        if isinstance(call_id, str):
            part["tool_call_id"] = call_id
        parts = [part]
    if not parts:
        parts = [{"type": "text", "text": ""}]

    message: dict[str, Any] = {"id": _id(data.get("id"), raw, number, fail), "role": role, "content": parts}
    when = data.get("created_at", data.get("timestamp"))
    if when is not None:
        message["created_at"] = _timestamp(when, fail, "created_at" if "created_at" in data else "timestamp")
    metadata: dict[str, Any] = {"source": "openai-jsonl", "line": number}
    if data.get("name") and role != "tool":
        metadata["name"] = str(data["name"])
    message["metadata"] = metadata
    return message


def _parts(content: Any, fail: Any) -> list[dict[str, Any]]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise fail("content", f"expected a string or a list of parts, got {type(content).__name__}")
    parts: list[dict[str, Any]] = []
    for index, item in enumerate(content):
        where = f"content[{index}]"
        if isinstance(item, str):
            parts.append({"type": "text", "text": item})
            continue
        if not isinstance(item, dict):
            raise fail(where, f"expected an object, got {type(item).__name__}")
        kind = item.get("type")
        if kind in ("text", "input_text", "output_text"):
            if not isinstance(item.get("text"), str):
                raise fail(f"{where}.text", "missing or not a string")
            parts.append({"type": "text", "text": item["text"]})
        elif kind == "refusal":
            parts.append({"type": "text", "text": str(item.get("refusal", ""))})
        elif kind in ("image_url", "input_image"):
            image = item.get("image_url")
            url = image.get("url") if isinstance(image, dict) else image
            if not isinstance(url, str) or not url:
                raise fail(f"{where}.image_url.url", "missing")
            parts.append(_attachment("image", url, None))
        elif kind == "input_audio":
            audio = item.get("input_audio") or {}
            if not isinstance(audio.get("data"), str):
                raise fail(f"{where}.input_audio.data", "missing")
            parts.append({"type": "file", "mime_type": f"audio/{audio.get('format') or 'wav'}", "data": audio["data"]})
        elif kind == "file":
            file = item.get("file") or {}
            if isinstance(file.get("file_data"), str):
                parts.append(_attachment("file", file["file_data"], file.get("filename")))
            elif file.get("file_id"):
                parts.append(
                    {
                        "type": "file",
                        "mime_type": "application/octet-stream",
                        "name": str(file.get("filename") or file["file_id"]),
                    }
                )
            else:
                raise fail(f"{where}.file", "needs file_data or file_id")
        else:
            raise fail(f"{where}.type", f"unsupported part type {kind!r}")
    return parts


def _attachment(kind: str, url: str, name: Any) -> dict[str, Any]:
    """A part from a data: URL (kept as base64 data) or a plain URL."""
    part: dict[str, Any] = {"type": kind}
    if url.startswith("data:") and "," in url:
        head, data = url[5:].split(",", 1)
        mime = head.split(";")[0] or ("image/png" if kind == "image" else "application/octet-stream")
        part.update(mime_type=mime, data=data)
    else:
        guess = mimetypes.guess_type(url.split("?")[0])[0]
        part.update(mime_type=guess or ("image/*" if kind == "image" else "application/octet-stream"), url=url)
    if name:
        part["name"] = str(name)
    return part


def _tool_calls(calls: Any, tools: dict[str, str], fail: Any) -> list[dict[str, Any]]:
    if calls is None:
        return []
    if not isinstance(calls, list):
        raise fail("tool_calls", "expected a list")
    parts = []
    for index, call in enumerate(calls):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not function.get("name"):
            raise fail(f"tool_calls[{index}].function.name", "missing")
        args: Any = function.get("arguments")
        if isinstance(args, str):
            try:
                args = json.loads(args) if args.strip() else {}
            except ValueError:
                pass  # keep the text the model produced
        part: dict[str, Any] = {"type": "tool-call", "tool_name": str(function["name"]), "args": args}
        if isinstance(call.get("id"), str):
            part["tool_call_id"] = call["id"]
            tools[call["id"]] = str(function["name"])
        parts.append(part)
    return parts


def _id(value: Any, raw: str, number: int, fail: Any) -> str:
    if value is None:
        return "import-" + hashlib.sha1(f"{number}\n{raw}".encode()).hexdigest()[:20]
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise fail("id", f"expected a string or an integer, got {type(value).__name__}")
    text = str(value).strip()
    if not text or len(text) > 200:
        raise fail("id", "must be 1 to 200 characters")
    return text


def _timestamp(value: Any, fail: Any, field: str) -> str:
    if isinstance(value, bool):
        raise fail(field, "expected an ISO-8601 string or a Unix time")
    if isinstance(value, (int, float)):
        seconds = value / 1000 if value > 1e11 else value  # milliseconds
        try:
            return datetime.fromtimestamp(seconds, tz=UTC).isoformat()
        except (OverflowError, OSError, ValueError):
            raise fail(field, f"{value!r} is not a valid Unix time") from None
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise fail(field, f"{value!r} is not an ISO-8601 date-time") from None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        return parsed.isoformat()
    raise fail(field, f"expected an ISO-8601 string or a Unix time, got {type(value).__name__}")
