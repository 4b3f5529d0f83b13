"""Claude Code: transcript reading and conversion, hook input, SessionStart output."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from om_mcp.hosts.claude_code.adapter import INGEST_EVENTS, SESSION_START_SOURCES
from om_mcp.hosts.claude_code.convert import ConvertOptions, entry_to_message, to_messages
from om_mcp.hosts.claude_code.transcript import ReadResult, TranscriptState, read_new, read_transcript
from om_mcp.hosts.common import HookInputError, HookPlan, session_start_output
from om_mcp.lazy import face

if TYPE_CHECKING:
    from om_mcp.hosts.claude_code.hooks import EVENT_MODELS, HookInput, SessionStartInput, parse_hook_input, plan_for

# The typed hook input is pydantic; it loads on first use, so the hook command,
# which reads the transcript through this package, does not pay for it.
__getattr__ = face(
    __name__, dict.fromkeys(("EVENT_MODELS", "HookInput", "SessionStartInput", "parse_hook_input", "plan_for"), "hooks")
)


def read_messages(
    path: str | os.PathLike[str],
    state: TranscriptState | None = None,
    options: ConvertOptions | None = None,
    problems: list[str] | None = None,
) -> tuple[list[dict[str, Any]], TranscriptState]:
    """The new messages of a transcript since `state`, and the state to keep.

    `read_new` + `to_messages` with the tool names of earlier reads carried
    over (dropped when the file had to be re-read from the top). One read is
    bounded (`hosts/reader.py`); `problems` gets a line for each line skipped as
    too long, and one when more is left for the next read.
    """
    state = state or TranscriptState()
    result = read_transcript(path, state)
    if problems is not None:
        problems += [f"skipped a {n:,}-byte transcript line at byte {at:,} (too long)" for at, n in result.long_lines]
        if result.more:
            problems.append(f"read up to byte {result.state.offset:,} of the transcript; the rest comes next time")
    known = {} if result.rescanned else state.pending_tools
    return to_messages(result.entries, options=options, known_tools=known), result.state


__all__ = [
    "EVENT_MODELS",
    "INGEST_EVENTS",
    "SESSION_START_SOURCES",
    "ConvertOptions",
    "HookInput",
    "HookInputError",
    "HookPlan",
    "ReadResult",
    "SessionStartInput",
    "TranscriptState",
    "entry_to_message",
    "parse_hook_input",
    "plan_for",
    "read_messages",
    "read_new",
    "read_transcript",
    "session_start_output",
    "to_messages",
]
