"""Reading one session's transcript from where the last hook of that session stopped: the
part that is new becomes messages of the thread = the session id, in the resource = the
project (`engine/recorder/` stores them and the position).

The position is the byte offset and the last entry's id, plus the reader's whole state
(`TranscriptState.to_dict()`). The reader notices a rewritten or truncated file and starts
again from the top, which is harmless: message ids are the entries' uuids, so what was
stored already is skipped.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

from om_mcp.hosts import prompts
from om_mcp.hosts.events import CODEX, CURSOR, GEMINI_CLI, VSCODE, HookEvent
from om_mcp.reading import Position, Reading
from om_mcp.trim import trim_rule

LINE_HOSTS = (CODEX, CURSOR, VSCODE)


def source_of(event: HookEvent) -> str:
    return f"{event.host}:{event.session_id}"


def read_transcript(event: HookEvent, saved: Position, final: bool, tool_output_chars: int = 2000) -> Reading:
    """The messages after `saved` in the event's transcript (none when it has no transcript), and the
    prompt the event carries (`hosts.prompts`: stored at once, its transcript copy left out later)."""
    previous = saved.state
    read = _read_transcript(event, saved, previous, final, tool_output_chars)
    found, waiting = prompts.settle(event, read.messages, (previous or {}).get(prompts.PENDING) or [])
    state = dict(read.position.state or {})
    if waiting:
        state[prompts.PENDING] = waiting  # the readers' own state does not carry it: it goes beside
    else:
        state.pop(prompts.PENDING, None)
    if event.transcript_path and not os.path.exists(event.transcript_path) and saved.started:
        # A transcript read before that is gone; one never written yet (a session with no turn,
        # such as the one `claude mcp list` starts and ends) is not worth a line.
        read.problems.insert(0, f"transcript not found: {event.transcript_path}")
    return replace(read, messages=found, position=replace(read.position, state=state or read.position.state))


def _read_transcript(event: HookEvent, saved: Position, previous: Any, final: bool, tool_output_chars: int) -> Reading:
    trim = trim_rule(tool_output_chars)
    if event.host in LINE_HOSTS:  # Codex, Cursor, VS Code: one reader each, in hosts/
        return _read_lines_host(event, saved, previous, trim)
    if not event.transcript_path:
        return Reading([], saved)
    if event.host == GEMINI_CLI:
        from om_mcp.hosts.gemini_cli import GeminiOptions, GeminiState
        from om_mcp.hosts.gemini_cli import read_messages as read_gemini

        found, gemini = read_gemini(
            event.transcript_path, GeminiState.from_dict(previous), final=final, options=GeminiOptions(trim=trim)
        )
        return Reading(found, Position(0, gemini.emitted_through, gemini.to_dict()))
    from om_mcp.hosts.claude_code import ConvertOptions, TranscriptState, read_messages

    before = TranscriptState.from_dict(previous)
    problems: list[str] = []
    found, state = read_messages(event.transcript_path, before, ConvertOptions(trim=trim), problems)
    return Reading(
        found,
        Position(state.offset, state.last_uuid, state.to_dict()),
        rescanned=state.rescans > before.rescans,
        problems=problems,
    )


def _read_lines_host(event: HookEvent, saved: Position, previous: Any, trim: Any) -> Reading:
    from om_mcp.hosts import codex, cursor, vscode
    from om_mcp.hosts.jsonl import JsonlState

    before = JsonlState.from_dict(previous)
    if event.host == CODEX:
        found: list[dict[str, Any]] = []
        state = before
        if event.transcript_path:
            found, state = codex.read_messages(event.transcript_path, before, trim)
    else:
        found, state = (cursor if event.host == CURSOR else vscode).read_messages(event, before, trim)
    last = found[-1]["id"] if found else saved.last_id
    return Reading(found, Position(state.offset, last, state.to_dict()), state.rescans > before.rescans)
