"""What Cursor and VS Code share: a session read from the hook payloads when the
transcript gives nothing, and the rule that one session keeps one source.

Both hosts name a transcript file in every hook call, but neither documents its
format as stable. So each adapter reads the transcript lines it recognises and,
when the transcript is missing or yields no message, records what the
documented payload fields carry instead: on Cursor, the reply
(`afterAgentResponse`'s `text`). The first source that gives a message is kept
for the rest of the session, so a session is never stored twice from two
sources. The prompt (`prompt`, every host) is stored from its payload in every
case, and its transcript copy left out (`hosts.prompts`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from om_mcp.hosts.events import HookEvent
from om_mcp.hosts.jsonl import JsonlState, read_lines
from om_mcp.hosts.prompts import prompt_turn
from om_mcp.trim import TrimRule

TRANSCRIPT, PAYLOAD = "transcript", "payload"
LineReader = Callable[[int, dict[str, Any], TrimRule], "dict[str, Any] | None"]


def read_session(
    transcript: str | None, event: HookEvent | None, state: JsonlState, trim: TrimRule, line_to_message: LineReader
) -> tuple[list[dict[str, Any]], JsonlState]:
    """The session's new messages: from the transcript, else from this call's payload (`event`; None for
    a file read outside a hook)."""
    source = state.extra.get("source")
    if source != PAYLOAD and transcript and os.path.isfile(transcript):
        lines, new = read_lines(transcript, state)
        found = [m for number, line in lines if (m := line_to_message(number, line, trim)) is not None]
        if found or source == TRANSCRIPT:
            return found, replace(new, extra={"source": TRANSCRIPT})
    found = payload_messages(event) if event is not None else []
    if not found:
        return [], state
    return found, replace(state, extra={"source": PAYLOAD})


def payload_messages(event: HookEvent) -> list[dict[str, Any]]:
    """The reply a hook call carries (Cursor's afterAgentResponse), as a message with an id derived from
    the turn. The prompt a call carries is stored for every host, transcript or not (`hosts.prompts`)."""
    text = event.reply
    if not text or not text.strip():
        return []
    message: dict[str, Any] = {
        "id": f"{prompt_turn(event, text)}:reply",
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "metadata": {"host": event.host, "from": "hook payload"},
    }
    if event.timestamp:
        message["created_at"] = event.timestamp
    return [message]


def text_parts(content: Any, strip: Callable[[str], str] = str.strip) -> list[dict[str, Any]]:
    """Text parts of a chat line's content (a string, or a list of {type: text, text})."""
    if isinstance(content, str):
        items: list[Any] = [{"type": "text", "text": content}]
    elif isinstance(content, list):
        items = content
    else:
        return []
    parts = []
    for item in items:
        if isinstance(item, dict) and item.get("type") in ("text", None) and isinstance(item.get("text"), str):
            text = strip(item["text"])
            if text:
                parts.append({"type": "text", "text": text})
    return parts
