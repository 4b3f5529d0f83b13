"""The typed rows the store reads and writes.

Every store backend returns these and nothing else: no driver rows, no dicts
standing in for records. They are plain frozen-ish dataclasses so the engine can
pass them around cheaply; JSON columns arrive decoded.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from om_mcp.store.access import NO_RESOURCE, Access

Scope = Literal["thread", "resource"]
# The generation of the retired pile: lines a reflection dropped, merged or superseded and
# groups retired into the archive, kept out of every log and found by recall.
RETIRED = -1
RetiredReason = Literal["dropped", "merged", "superseded", "archived", "edited"]
# A new thread's working memory: given what is stored for its scope, the value to store (or None).
WorkingMemorySeed = tuple[Scope, Callable[[str | None], str | None]]
# A message from another process on the same database (PostgreSQL: LISTEN/NOTIFY).
Listener = Callable[[dict[str, Any]], Awaitable[None]]


@dataclass(slots=True)
class Thread:
    id: str
    resource_id: str
    title: str | None
    title_pinned: bool
    metadata: dict[str, Any]
    created_at: str
    updated_at: str
    message_count: int = 0
    last_assistant_at: str | None = None
    last_assistant_id: str | None = None
    last_model: str | None = None
    previous_model: str | None = None


@dataclass(slots=True)
class Message:
    seq: int
    id: str
    thread_id: str
    resource_id: str
    role: str
    parts: list[dict[str, Any]]
    created_at: str
    metadata: dict[str, Any]
    tokens: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "thread_id": self.thread_id,
            "role": self.role,
            "parts": self.parts,
            "created_at": self.created_at,
            "metadata": self.metadata,
        }


@dataclass(slots=True)
class NewMessage:
    """A message validated and counted by the engine, ready to insert."""

    id: str
    role: str
    parts: list[dict[str, Any]]
    created_at: str
    metadata: dict[str, Any]
    body: str  # the searchable text
    tokens: int
    part_tokens: list[int] | None = None  # per-part counts, kept for recounts
    observable: bool = True  # system messages are never observed
    created_at_given: bool = True  # a re-send without a time still counts as the same message
    id_given: bool = True  # False: the id is provisional; see om_mcp.store.resends
    redactions: dict[str, int] = field(default_factory=dict)  # matches replaced per privacy rule (never the text)
    # The gate's `Receipt` (store/gate.py) when the intake scanned this row: not scanned again on its way in.
    receipt: Any = None
    checked: bool = False  # seen by the tombstone check of the append rule (store/tombstones.py: keep)


@dataclass(slots=True)
class RecordState:
    """Where a record's windows stand: enough for every threshold decision."""

    key: str
    generation: int
    observation_tokens: int
    pending_tokens: int  # unobserved message tokens of the record (all its threads)
    pending_messages: int
    thread_pending_tokens: int  # of the thread asked about
    thread_pending_messages: int
    last_buffered_at_tokens: int
    chunk_count: int
    chunk_message_tokens: int
    buffered_reflection_generation: int | None
    reflection_blocked_at: int | None


@dataclass(slots=True)
class AppendResult:
    appended: list[Message] = field(default_factory=list)
    skipped_duplicates: int = 0
    thread_created: bool = False
    state: RecordState | None = None
    thread: Thread | None = None
    redactions: dict[str, int] = field(default_factory=dict)  # privacy rule -> matches the stored messages lost
    forgotten: int = 0  # messages a tombstone refused: they were forgotten (store/tombstones.py)


@dataclass(slots=True)
class Record:
    key: str
    scope: Scope
    resource_id: str
    thread_id: str | None
    generation: int
    extracted: dict[str, Any]
    last_observed_at: str | None
    last_reflection_at: str | None
    reflection_blocked_at: int | None
    last_buffered_at_tokens: int
    observation_tokens: int
    version: int
    cursors: dict[str, int] = field(default_factory=dict)
    # The user's own changes to this log so far (forget, edit, restore): a cycle's commit is
    # refused when it changed after the cycle read the record.
    edits: int = 0


@dataclass(slots=True)
class Group:
    """One block of the observation log: observed from, or reflected over, a range of messages."""

    id: str
    generation: int
    position: int
    kind: Literal["observation", "reflection"]
    thread_id: str | None
    first_seq: int
    last_seq: int
    first_message_id: str | None
    last_message_id: str | None
    text: str
    tokens: int
    observed_at: str | None
    created_at: str = ""
    # In the retired pile (generation RETIRED) only: the generation that retired it, why
    # (dropped, merged, superseded, archived, edited), and the hash of the line that took its place.
    retired_by: int | None = None
    retired_reason: str | None = None
    replaced_by: str | None = None

    @property
    def range(self) -> str | None:
        """first:last id of the messages it was made from; None when it has none (a line remembered
        with no message, `om-mcp remember --resource`)."""
        first, last = self.first_message_id or self.last_message_id, self.last_message_id or self.first_message_id
        return f"{first}:{last}" if first else None

    @property
    def retired(self) -> bool:
        return self.generation == RETIRED


@dataclass(slots=True)
class NewGroup:
    """A group a cycle wants to add; id, position and generation are set on commit."""

    text: str
    tokens: int
    first_seq: int
    last_seq: int
    first_message_id: str | None
    last_message_id: str | None
    thread_id: str | None = None
    kind: Literal["observation", "reflection"] = "observation"
    observed_at: str | None = None
    retired_by: int | None = None  # set for a group of the retired pile (see Group)
    retired_reason: str | None = None
    replaced_by: str | None = None


@dataclass(slots=True)
class Remembered:
    """A line the user asked to remember in a message (`<remember>`): written with it."""

    message_id: str
    text: str  # the group's text: its Date line and the user-stated line
    tokens: int


@dataclass(slots=True)
class Chunk:
    """Buffered (pre-computed, not yet active) observations of one thread's seq range."""

    id: str
    cycle_id: str
    thread_id: str
    first_seq: int
    last_seq: int
    first_message_id: str
    last_message_id: str
    message_count: int
    message_tokens: int
    text: str
    tokens: int
    hints: dict[str, Any]
    last_message_at: str | None
    created_at: str

    def as_group(self) -> dict[str, Any]:
        """The observation group this chunk becomes when it is activated."""
        return {
            "kind": "observation",
            "thread_id": self.thread_id,
            "first_seq": self.first_seq,
            "last_seq": self.last_seq,
            "first_message_id": self.first_message_id,
            "last_message_id": self.last_message_id,
            "text": self.text,
            "tokens": self.tokens,
            "observed_at": self.last_message_at,
        }


@dataclass(slots=True)
class BufferedReflection:
    """A reflection computed ahead: it replaces the first `covered` groups of `generation`."""

    cycle_id: str
    generation: int
    covered: int
    input_tokens: int
    text: str
    tokens: int
    hints: dict[str, Any]


@dataclass(slots=True)
class Snapshot:
    """A record with its windows, chunks and buffered reflection, read at one instant."""

    record: Record
    state: RecordState
    chunks: list[Chunk]
    buffered_reflection: BufferedReflection | None
    thread: Thread | None
    hints: Hints


@dataclass(slots=True)
class Hints:
    """Where the agent was in one thread when its messages were last observed."""

    current_task: str | None = None
    suggested_response: str | None = None


@dataclass(slots=True)
class ContextRead:
    """Everything `get_context` shows, read in one snapshot."""

    snapshot: Snapshot
    groups: list[Group]
    window: list[Message]  # the newest unobserved messages of the thread that fit, oldest first
    other_threads: dict[str, list[Message]]  # resource scope: other threads' recent unobserved messages
    working_memory: str | None
    archived: list[Group] = field(default_factory=list)  # the archive's most recent days, for its catalog
    archived_total: int = 0


@dataclass(slots=True)
class Event:
    id: int
    type: str
    cycle_id: str | None
    record_key: str | None
    resource_id: str | None
    thread_id: str | None
    anchor_message_id: str | None
    payload: dict[str, Any]
    created_at: str


@dataclass(slots=True)
class SearchHit:
    seq: int
    score: float
    message: Message


@dataclass(slots=True)
class Hit:
    """A message found by words: its seq and score (larger is better)."""

    seq: int
    score: float


@dataclass(slots=True)
class Pending:
    """Text that has no vector yet: a message (ref = its seq) or an observation group (ref = its id)."""

    kind: str  # message | group
    ref: str
    thread_id: str | None
    text: str


@dataclass(slots=True)
class GroupHit:
    group: Group
    resource_id: str
    score: float


@dataclass(slots=True)
class ModelHealth:
    """A model's circuit breaker, shared by every process on the database (its rules: `models/health.py`)."""

    model: str
    state: Literal["ok", "backoff", "paused"] = "ok"
    failures: int = 0
    next_attempt_at: float = 0.0  # unix seconds
    last_error: str | None = None
    last_failure_at: str | None = None
    config_hash: str | None = None


@dataclass(slots=True)
class IngestState:
    """How far a host transcript has been read (hooks)."""

    source: str
    offset: int = 0
    last_id: str | None = None
    fingerprint: str | None = None
    updated_at: str | None = None


@dataclass(slots=True)
class DueWork:
    """A record whose unobserved tokens may need a cycle (found by polling)."""

    record_key: str
    resource_id: str
    thread_id: str  # the busiest thread, to anchor the cycle
    pending_tokens: int


@dataclass(slots=True)
class ResourceSummary:
    id: str
    threads: int
    messages: int
    updated_at: str


@dataclass(slots=True)
class Stats:
    path: str
    bytes: int
    wal_bytes: int
    schema_version: int
    resources: int
    threads: int
    messages: int
    groups: int
    chunks: int
    events: int
    pending_tokens: int
    backend: str = "sqlite"
    vectors: str = "compared in Python"  # how nearest-neighbour search runs here


@dataclass(slots=True)
class SettledThread:
    """A host session that is over (or quiet) with messages not yet observed."""

    record_key: str
    thread_id: str
    resource_id: str
    pending_messages: int
    pending_tokens: int
    updated_at: str


@dataclass(frozen=True, slots=True)
class SessionSummary:
    """A thread of a resource as SessionStart lists it when there are no observations to give."""

    thread_id: str
    title: str | None
    started_at: str
    updated_at: str
    messages: int
    first_prompt: str | None
    last_prompt: str | None


@dataclass(slots=True)
class SpendDay:
    """What one model cost on one UTC day, summed over every process on the database."""

    day: str  # YYYY-MM-DD
    model: str
    calls: int
    input_tokens: int
    output_tokens: int
    usd: float  # of the calls that had a price
    unpriced_calls: int  # calls with no known price (a local model, sampling): counted in tokens only
    abandoned_calls: int = 0  # reserved and never settled (timed out, cancelled, crashed): counted at their estimate
    refused_calls: int = 0  # not made: their estimate would have passed a cap
    refused_tokens: int = 0  # the estimate of the last call refused (0 once a call fits again)
    refused_usd: float = 0.0


@dataclass(slots=True)
class Reservation:
    """A model call's estimated cost, held against the caps from before the call until it is settled."""

    id: str
    day: str  # the UTC day it counts for, settled or abandoned
    model: str
    input_tokens: int
    output_tokens: int
    usd: float | None  # None: no price known
    ttl: float  # seconds after which a reservation never settled counts as an abandoned call


@dataclass(slots=True)
class SpendTotals:
    """Spend settled plus reserved (calls in flight), for the day and the month a reservation falls in."""

    day_tokens: int = 0
    day_usd: float = 0.0
    month_tokens: int = 0
    month_usd: float = 0.0
    reserved_tokens: int = 0  # of those, today's open reservations
    reserved_usd: float = 0.0

    def spent(self, cap: str) -> float:
        """The total a cap (its config key: daily_usd, monthly_tokens...) is checked against."""
        return {
            "daily_tokens": self.day_tokens,
            "daily_usd": self.day_usd,
            "monthly_tokens": self.month_tokens,
            "monthly_usd": self.month_usd,
        }[cap]


@dataclass(slots=True)
class Reserved:
    """A reservation's outcome: made, or refused by the cap it would have passed (totals before it)."""

    made: bool
    totals: SpendTotals
    refused_by: str | None = None  # the cap's config key


@dataclass(slots=True)
class Rewrite:
    """A change the user asked for (forget, correct), worked out by the engine and applied by
    the store in one transaction. Everything it names is removed for good: the text leaves
    the file (SQLite) or the tables (PostgreSQL)."""

    expected: dict[str, int]  # record key -> the `Record.version` the plan was made from; changed: refused
    messages: dict[str, list[int]] = field(default_factory=dict)  # thread id -> seqs of messages to forget
    groups: dict[str, tuple[str, int] | None] = field(default_factory=dict)  # group id -> (text, tokens), None: gone
    chunks: dict[str, tuple[str, int] | None] = field(default_factory=dict)  # buffered chunk id -> the same
    scrub: str | None = None  # a phrase: every task, title, extracted value, event and working-memory line holding it
    scrub_within: Access = NO_RESOURCE  # the resources to scrub it from
    events: list[dict[str, Any]] = field(default_factory=list)


@dataclass(slots=True)
class Rewritten:
    """What a `Rewrite` removed or changed."""

    messages: int = 0
    groups_removed: int = 0
    groups_changed: int = 0
    chunks: int = 0  # buffered chunks changed or dropped (their messages are buffered again)
    derived: int = 0  # tasks, titles, extracted values, events, working-memory lines, model-health excerpts scrubbed
    records: list[str] = field(default_factory=list)  # the records whose log changed
    # False: deleted from every table, but old pages still in the SQLite file or its -wal while another
    # connection reads an older snapshot; the erase is pending (`Store.erase_pending`) until a checkpoint ends it.
    erased: bool = True


@dataclass(slots=True)
class Found:
    """Where a phrase is stored: messages, groups of every generation, buffered chunks."""

    messages: list[Message] = field(default_factory=list)
    groups: list[tuple[str, Group]] = field(default_factory=list)  # (record key, group)
    chunks: list[tuple[str, Chunk]] = field(default_factory=list)  # (record key, chunk)
    truncated: bool = False  # more messages hold it than the limit
    derived: int = 0  # titles, tasks, metadata, working memory, events, model-health excerpts quoting it


@dataclass(slots=True)
class OAuthSecret:
    """One stored OAuth secret (by its digest), with the grant it belongs to."""

    digest: str
    kind: str  # consent, code, access, refresh
    grant_id: str | None
    detail: dict[str, Any]  # what the flow needs back: a code's PKCE challenge and redirect URI, ...
    expires_at: float
    used: bool
    failures: int  # wrong consent codes typed while this one was outstanding
    client_id: str | None
    resources: list[str]  # the grant's
    revoked: bool  # the grant's
    now: float  # the database's clock when it was read

    @property
    def live(self) -> bool:
        return not self.used and not self.revoked and self.expires_at > self.now


@dataclass(slots=True)
class OAuthGrant:
    """What the owner approved on the consent page: one client, the resources it may use."""

    id: str
    client_id: str
    client_name: str
    redirect_uris: list[str]
    resources: list[str]
    created_at: float
    used_at: float | None  # when a code or refresh token of it was last exchanged
    revoked: bool
    live_tokens: int  # access and refresh tokens not yet expired or used
