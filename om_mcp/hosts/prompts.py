"""A prompt is stored from the hook call that announces it, before any transcript holds it.

Every host hands its prompt hook the prompt itself, and fires it before the prompt reaches the
transcript (each adapter cites its documentation and source):
* Claude Code, UserPromptSubmit: `prompt` and `prompt_id` (the transcript entry's `promptId`);
  the hook may still block the prompt, so it runs before the turn.
* Codex, UserPromptSubmit: `prompt` and `turn_id`; the rollout gets the user message after the
  hook (Codex 0.171: the turn's `response_item` comes after its `turn_context`, past the hook).
* Gemini CLI, BeforeAgent: `prompt` (hooks' injected `<hook_context>` included); the chat file
  records the user message after it (tests/fixtures/gemini_cli: 16:11:29.758 then .973).
* Cursor, beforeSubmitPrompt, and VS Code, UserPromptSubmit: `prompt`; their transcripts, when
  there is one, are not documented as written before the hook.

So a turn that never finishes (the host killed, the model failing) keeps its prompt. The copy the
transcript brings later is the session's next user message with the same text (whitespace
aside): it is left out, so the prompt is stored once; what it holds besides the text (a pasted
image) is kept, as that message. If the transcript holds the prompt already when the hook runs,
the payload adds nothing. The prompts waiting for their copy are kept in the session's ingest
state as the hash of their text and their id, the last `MAX_PENDING` of them.

The id of a prompt stored this way is `<turn>:prompt`, the turn being the host's own id of it
(Claude Code's prompt id, Codex's turn id, Cursor's generation id), else a hash of the payload's
time and text: the same id a repeated hook call gives, and the one `chat_lines` always used.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from om_mcp.hosts.events import HookEvent

PENDING = "payload_prompts"  # the key in the reader's saved state
MAX_PENDING = 100
PROMPT_EVENTS = ("UserPromptSubmit", "BeforeAgent")


def digest(text: str) -> str:
    return hashlib.sha256(" ".join(text.split()).encode("utf-8")).hexdigest()[:16]


def payload_prompt(event: HookEvent, clean: Callable[[str], str] = str.strip) -> dict[str, Any] | None:
    """The prompt a prompt event carries, as a message, cleaned by the host's own rule (its adapter's
    `clean_prompt`: what of a typed prompt is the person's); None for another event or nothing to keep."""
    if event.name not in PROMPT_EVENTS or not event.prompt:
        return None
    text = clean(event.prompt)
    if not text.strip():
        return None
    message: dict[str, Any] = {
        "id": f"{prompt_turn(event, event.prompt)}:prompt",
        "role": "user",
        "content": [{"type": "text", "text": text}],
        "metadata": {"host": event.host, "from": "hook payload"},
    }
    if event.timestamp:
        message["created_at"] = event.timestamp
    return message


def prompt_turn(event: HookEvent, text: str) -> str:
    return event.turn_id or hashlib.sha1(f"{event.timestamp}\0{text}".encode()).hexdigest()[:16]


def settle(
    event: HookEvent, found: list[dict[str, Any]], pending: list[str], clean: Callable[[str], str] = str.strip
) -> tuple[list[dict[str, Any]], list[str]]:
    """The messages to store from one hook call: the transcript's new ones without the copies of
    prompts stored already, then this call's own prompt unless the transcript had it; and the
    prompts still waiting for their copy."""
    waiting = [w for w in pending if isinstance(w, str)]  # "<text hash> <message id>"
    out = []
    seen = set()
    for message in found:
        if message.get("role") == "user":
            key = digest(_text(message))
            seen.add(key)
            match = next((w for w in waiting if w.split(" ", 1)[0] == key), None)
            if match is not None:
                waiting.remove(match)
                rest = [p for p in message.get("content") or [] if p.get("type") != "text"]
                if rest:
                    out.append({**message, "content": rest})
                continue
        out.append(message)
    prompt = payload_prompt(event, clean)
    if prompt is not None and (key := digest(_text(prompt))) not in seen:
        out.append(prompt)
        entry = f"{key} {prompt['id']}"
        if entry not in waiting:  # the same hook run twice (the plugin and settings both) waits once
            waiting.append(entry)
    return out, waiting[-MAX_PENDING:]


def _text(message: dict[str, Any]) -> str:
    parts = message.get("content") or []
    return "\n".join(str(p.get("text")) for p in parts if isinstance(p, dict) and p.get("type") == "text")
