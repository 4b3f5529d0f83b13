"""The records of om-mcp's JSONL export: the contract between a store and the file.

One JSON object per line, each with a `type`. The order is part of the format:

    header                         first line, exactly once
    resource                       then, per resource:
      thread                         each of its threads, followed by
        message ...                  that thread's messages, in conversation (seq) order
      observation_record             each record of the resource (thread or resource scope),
        observation_group ...        followed by its groups, every generation, in (generation, position) order
    end                            last line, with the count of each record type

A reader can therefore check every reference against what it has already seen
and import in one pass. Database-local numbers are not exported: message `seq`,
cursors and group seq ranges are written as message ids (`observed_through`,
`first_message_id` / `last_message_id`) and mapped back to the new database's
seqs on import. Token counts of messages are not exported either: the importing
side counts with its own tokenizer.

Not exported, on purpose:
- buffered observation chunks and buffered reflections: work in progress,
  computed from messages that are in the file. After an import the cursor
  is where the export's was, so the engine buffers again from there; keeping
  them would carry seq ranges and cycle ids that mean nothing in the new
  database, and a stale chunk activating over re-sequenced messages is the
  kind of corruption that loses observations.
- events (a log of what happened, not memory), leases, model health,
  embeddings (recomputed by the importing side's embedder).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PlainSerializer, model_validator

from om_mcp.messages import Part, Role

FORMAT = "om-mcp-export"
VERSION = 1  # the major version: a reader refuses a newer one
MINOR = 1  # additive changes: a reader ignores fields it does not know from a newer minor
# 1: observation_group.retired_by, retired_reason, replaced_by, for the retired pile (generation -1)
RETIRED_FIELDS = ("retired_by", "retired_reason", "replaced_by")


def _aware(value: datetime) -> datetime:
    # A naive time is read as UTC, as `append_messages` does.
    return value if value.tzinfo else value.replace(tzinfo=UTC)


# Written as Python's isoformat ("+00:00", not "Z"), the form the store keeps.
Timestamp = Annotated[datetime, AfterValidator(_aware), PlainSerializer(lambda d: d.isoformat(), return_type=str)]
Id = Annotated[str, Field(min_length=1, max_length=200)]


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Header(_Record):
    """First line. `source` says what wrote the file (program, version, database)."""

    type: Literal["om-mcp-export"]
    version: int = Field(ge=1, description="major format version")
    minor: int = Field(default=0, ge=0, description="minor format version (additive changes)")
    exported_at: Timestamp
    source: str = Field(min_length=1)


class ResourceRecord(_Record):
    """A user or project owning threads; `working_memory` is the resource-scoped one."""

    type: Literal["resource"]
    id: Id
    working_memory: str | None = None
    created_at: Timestamp
    updated_at: Timestamp


class ThreadRecord(_Record):
    """A conversation. `working_memory` is the thread-scoped one (None in resource scope)."""

    type: Literal["thread"]
    id: Id
    resource_id: Id
    title: str | None = None
    title_pinned: bool = False
    metadata: dict[str, Any] = Field(default_factory=dict)
    working_memory: str | None = None
    created_at: Timestamp
    updated_at: Timestamp


class MessageRecord(_Record):
    """A stored message, its parts as `append_messages` accepts them."""

    type: Literal["message"]
    id: Id
    thread_id: Id
    role: Role
    parts: list[Part] = Field(min_length=1)
    created_at: Timestamp
    metadata: dict[str, Any] = Field(default_factory=dict)


class Hints(_Record):
    """Where the agent was in a thread when it was last observed."""

    current_task: str | None = None
    suggested_response: str | None = None


class ObservationRecord(_Record):
    """The observational-memory state of one key (`thread:<id>` or `resource:<id>`).

    `observed_through` maps a thread id to the id of its last observed message
    (the cursor); `hints` maps a thread id to its continuation hints; in thread
    scope both have the one thread. `generation` is the current generation.
    """

    type: Literal["observation_record"]
    key: str = Field(pattern=r"^(thread|resource):.+$", max_length=210)
    scope: Literal["thread", "resource"]
    resource_id: Id
    thread_id: Id | None = None
    generation: int = Field(ge=0)
    observed_through: dict[str, str] = Field(default_factory=dict)
    hints: dict[str, Hints] = Field(default_factory=dict)
    extracted: dict[str, Any] = Field(default_factory=dict)
    last_observed_at: Timestamp | None = None
    last_reflection_at: Timestamp | None = None
    created_at: Timestamp
    updated_at: Timestamp

    @model_validator(mode="after")
    def _key_matches(self) -> ObservationRecord:
        expected = f"thread:{self.thread_id}" if self.scope == "thread" else f"resource:{self.resource_id}"
        if self.key != expected:
            raise ValueError(f"key {self.key!r} does not match scope {self.scope!r} (expected {expected!r})")
        return self


class ObservationGroup(_Record):
    """One block of the observation log, in generation `generation` at `position`.

    Every generation is exported, not only the current one, so the history of
    what the Reflector condensed survives. `first_message_id`/`last_message_id`
    are the group's message range (recall's `_range`).
    """

    type: Literal["observation_group"]
    id: Id
    record_key: str = Field(min_length=1)
    generation: int = Field(ge=-1, description="-1: the retired pile (what reflections dropped, merged, archived)")
    position: int = Field(ge=0)
    kind: Literal["observation", "reflection"]
    thread_id: Id | None = None
    first_message_id: str | None = None
    last_message_id: str | None = None
    text: str
    tokens: int = Field(ge=0)
    observed_at: Timestamp | None = None
    created_at: Timestamp
    # A retired group only (generation -1): the generation that retired it, why, the line that replaced it.
    retired_by: int | None = Field(None, ge=1)
    retired_reason: Literal["dropped", "merged", "superseded", "archived", "edited"] | None = None
    replaced_by: str | None = Field(None, max_length=64)

    @model_validator(mode="after")
    def _retired(self) -> ObservationGroup:
        if (self.generation == -1) != (self.retired_by is not None):
            raise ValueError("generation -1 (the retired pile) and retired_by go together")
        return self


class End(_Record):
    """Last line: how many records of each type came before. A file without it was cut short."""

    type: Literal["end"]
    counts: dict[str, int]


BODY_MODELS: dict[str, type[_Record]] = {
    "resource": ResourceRecord,
    "thread": ThreadRecord,
    "message": MessageRecord,
    "observation_record": ObservationRecord,
    "observation_group": ObservationGroup,
}
