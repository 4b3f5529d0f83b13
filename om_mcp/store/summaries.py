"""Typed rows of the store's look-and-move operations (overview, export, import).

Kept apart from `rows.py`, which holds what a turn and a cycle need: these
serve the shell commands and the status page.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from om_mcp.store.rows import Event, Thread


@dataclass(slots=True)
class ThreadState:
    """A thread and where its memory stands, read in one snapshot."""

    thread: Thread
    record_key: str
    unobserved_tokens: int  # this thread's messages after its cursor
    unobserved_messages: int
    observation_tokens: int  # the record's active log
    generation: int
    last_observed_at: str | None
    last_cycle: Event | None  # its newest cycle-ending event
    first_prompt: str | None = None  # the start of its first user message, on one line


@dataclass(slots=True)
class SeriesInputs:
    """What the windows-over-time plots are drawn from: the record's observable
    messages as (seq, created_at, tokens) in seq order, and its cycle-ending events."""

    messages: list[tuple[int, str, int]]
    events: list[Event]


@dataclass(slots=True)
class ImportResult:
    """What an import added and what it found already there, by record type; for a
    conversation import, also each conversation left out or cut (title, id, why)."""

    added: Counter = field(default_factory=Counter)
    skipped: Counter = field(default_factory=Counter)
    problems: list = field(default_factory=list)


# The events that end a cycle (a model call, or an activation, which calls none).
CYCLE_END_TYPES = (
    "data-om-observation-end",
    "data-om-observation-failed",
    "data-om-buffering-end",
    "data-om-buffering-failed",
    "data-om-observation-skipped",
    "data-om-buffering-skipped",
    "data-om-activation",
)
