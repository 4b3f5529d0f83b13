"""Claude Code's adapter (`hosts/adapter.py`): its hook input, its transcript, its SessionStart answer.

The hooks reference and what Claude Code 2.1.197 sent (tests/fixtures/claude_code/hooks/): every
event carries `session_id`, `transcript_path`, `cwd`, `hook_event_name` (most also `prompt_id`);
SessionStart's stdout `{"hookSpecificOutput": {"additionalContext"}}` is added to the session. The
transcript (`~/.claude/projects/<project>/<session id>.jsonl`) is read by `transcript.py` and
converted by `convert.py`. VS Code and Cursor also run the hooks they find in
`~/.claude/settings.json`: a payload in VS Code's shape (`sessionId`, `hookEventName`) or Cursor's
(`conversation_id`, `workspace_roots`) reaching `om-mcp hook claude-code` is read as that host's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from om_mcp.hosts.adapter import Host, Source
from om_mcp.hosts.claude_code.convert import ConvertOptions, prompt_text, to_messages
from om_mcp.hosts.claude_code.transcript import TranscriptState, read_transcript
from om_mcp.hosts.events import HookEvent
from om_mcp.hosts.reader import first_fields
from om_mcp.reading import Position, Reading
from om_mcp.trim import TrimRule

# The events the om-mcp plugin registers for recording, and the SessionStart sources it matches.
INGEST_EVENTS = ("UserPromptSubmit", "Stop", "SubagentStop", "PreCompact", "SessionEnd")
SESSION_START_SOURCES = ("startup", "resume", "clear", "compact")


class ClaudeCode(Host):
    name = "claude-code"
    title = "Claude Code"
    ingest_events = INGEST_EVENTS

    def read_event(self, data: Mapping[str, Any]) -> HookEvent:
        if "hook_event_name" not in data or "session_id" not in data:
            if "conversation_id" in data or "workspace_roots" in data:
                from om_mcp.hosts.cursor import HOST as CURSOR

                return CURSOR.read_event(data)
            if "hookEventName" in data or "sessionId" in data:
                from om_mcp.hosts.vscode import HOST as VSCODE

                return VSCODE.read_event(data)
        return super().read_event(data)

    def read(self, source: Source, position: Position, *, final: bool, trim: TrimRule) -> Reading:
        if not source.transcript:
            return Reading([], position)
        before = TranscriptState.from_dict(position.state)
        result = read_transcript(source.transcript, before, source.max_bytes)
        problems = [f"the transcript line at byte {at:,} is not JSON" for at in result.bad_lines]
        problems += [f"skipped a {n:,}-byte transcript line at byte {at:,} (too long)" for at, n in result.long_lines]
        if result.more:
            problems.append(f"read up to byte {result.state.offset:,} of the transcript; the rest comes next time")
        known = {} if result.rescanned else before.pending_tools
        found = to_messages(result.entries, options=ConvertOptions(trim=trim), known_tools=known)
        state = result.state
        return Reading(
            found,
            Position(state.offset, state.last_uuid, state.to_dict()),
            rescanned=result.rescanned,
            more=result.more,
            unreadable=len(result.bad_lines),
            problems=problems,
        )

    def clean_prompt(self, text: str) -> str:
        return prompt_text(text)

    def recognises(self, entry: Mapping[str, Any]) -> bool:
        return "uuid" in entry or ("sessionId" in entry and "type" in entry)

    def session_of(self, path: str) -> tuple[str | None, str | None]:
        session, cwd = first_fields(path, "sessionId", "cwd")
        return session, cwd


HOST = ClaudeCode()
