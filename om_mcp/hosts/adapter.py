"""What a host adapter is: everything om-mcp knows of one agent host's hooks, in one module.

    read_event(data)                 the hook's JSON -> one `HookEvent` (Claude-style event names)
    plan(event name)                 what the hook does for it: read, print the context, both, nothing
    read(source, position, ...)      the messages after a saved position: from the transcript, or from
                                     the event's own payload (`reading.Reading`; one signature for all)
    clean_prompt(text)               what of a typed prompt is the person's (as the transcript keeps it)
    context_output(text)             the SessionStart answer in the host's shape (stdout)
    recognises(entry) / session_of   a transcript file handed to `om-mcp ingest`: is it ours, whose is it

`Host` gives each of these its most common answer (Claude Code's shape, which Gemini CLI, Codex,
VS Code and Copilot CLI share); an adapter overrides what its host does differently. The
adapters are listed in `hosts/__init__.py` (`ADAPTERS`), beside the setup registry
(`hosts/setup/__init__.py`): a new host is an adapter module, a setup module and a line in each.
Nothing outside the adapters compares a host's name (`tests/test_hosts.py` holds that).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from om_mcp.hosts import prompts, reader
from om_mcp.hosts.common import HookPlan, session_start_output
from om_mcp.hosts.events import HookEvent, claude_shape
from om_mcp.reading import Position, Reading
from om_mcp.trim import TrimRule


@dataclass(frozen=True)
class Source:
    """What a read reads: a transcript file, and the hook call that named it (None for a file given to
    `om-mcp ingest`; some hosts record from the call's payload when there is no transcript)."""

    transcript: str | None
    event: HookEvent | None = None
    max_bytes: int = reader.MAX_RUN_BYTES  # of the file one read takes at most (at least one line's worth)


class Host:
    """One agent host's hooks and transcripts. Subclass it in the host's module (`HOST = MyHost()`)."""

    name = ""  # `om-mcp hook NAME`, the recorded messages' `metadata.host`
    title = ""
    # Claude-style names of the events that read the transcript; SessionStart reads and prints too.
    ingest_events: tuple[str, ...] = ()
    # Of those, the ones that do not close a turn (the newest reply may still grow): None when every one does.
    open_events: tuple[str, ...] = ()

    def read_event(self, data: Mapping[str, Any]) -> HookEvent:
        """The hook input's fields; HookInputError (one line, naming the field) when unusable."""
        return claude_shape(self.name, data)

    def plan(self, event_name: str) -> HookPlan:
        """SessionStart catches up (a resumed or compacted session has turns on disk) and prints the context."""
        if event_name == "SessionStart":
            return HookPlan(ingest=True, print_context=True)
        return HookPlan(ingest=event_name in self.ingest_events, final=event_name not in self.open_events)

    def read(self, source: Source, position: Position, *, final: bool, trim: TrimRule) -> Reading:
        """The messages after `position` and the position to save. `final`: the turn is over."""
        return Reading([], position)

    def clean_prompt(self, text: str) -> str:
        """What of a prompt typed in this host is the person's, as the host's transcript keeps it."""
        return text.strip()

    def context_output(self, context: str) -> str:
        """What the SessionStart hook prints for `context` ("" for nothing)."""
        return session_start_output(context)

    def recognises(self, entry: Mapping[str, Any]) -> bool:
        """Is this one of the first lines of one of this host's transcripts (`om-mcp ingest`'s detection)?"""
        return False

    def session_of(self, path: str) -> tuple[str | None, str | None]:
        """(session id, working directory) a transcript file names, each None when it names none."""
        return None, None

    def read_hook(self, event: HookEvent, position: Position, *, final: bool, trim: TrimRule) -> Reading:
        """What one hook call stores: the transcript's new messages (`read`), and the prompt the event
        carries (`hosts.prompts`: stored at once, its transcript copy left out when it comes)."""
        reading = self.read(Source(event.transcript_path, event), position, final=final, trim=trim)
        waiting = (position.state or {}).get(prompts.PENDING) or []
        found, waiting = prompts.settle(event, reading.messages, waiting, self.clean_prompt)
        state = dict(reading.position.state or {})
        if waiting:
            state[prompts.PENDING] = waiting  # the readers' own state does not carry it: it goes beside
        else:
            state.pop(prompts.PENDING, None)
        if event.transcript_path and position.started and not os.path.exists(event.transcript_path):
            # A transcript read before that is gone; one never written yet (a session with no turn,
            # such as the one `claude mcp list` starts and ends) is not worth a line.
            reading.problems.insert(0, f"transcript not found: {event.transcript_path}")
        return replace(reading, messages=found, position=replace(reading.position, state=state or None))
