"""`Store`: every operation the engine may ask of a database, whatever the backend.

Each operation is one transaction: it sees one consistent state, and a write
is all or nothing. Rows come back as the typed rows of `rows.py`, never driver
rows. `SQLiteStore` and `PostgresStore` both satisfy this protocol; the engine
knows nothing else about them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Any, Literal, Protocol, TypeVar, runtime_checkable

from om_mcp.store.rows import (
    AppendResult,
    BufferedReflection,
    Chunk,
    ContextRead,
    DueWork,
    Event,
    Found,
    Group,
    GroupHit,
    Hints,
    IngestState,
    Message,
    ModelHealth,
    NewGroup,
    NewMessage,
    Pending,
    Record,
    RecordState,
    ResourceSummary,
    Rewrite,
    Rewritten,
    Scope,
    SessionSummary,
    SettledThread,
    Snapshot,
    SpendDay,
    Stats,
    Thread,
)
from om_mcp.store.search import SearchPlan, TermStats, TextHit
from om_mcp.store.summaries import ImportResult, SeriesInputs, ThreadState

T = TypeVar("T")

Lease = tuple[str, str]  # (op, owner)
# A new thread's working memory: given what is stored for its scope, the value to store (or None).
WorkingMemorySeed = tuple[Scope, Callable[[str | None], str | None]]
# A message from another process on the same database (PostgreSQL: LISTEN/NOTIFY).
Listener = Callable[[dict[str, Any]], Awaitable[None]]


@runtime_checkable
class Store(Protocol):
    @property
    def backend(self) -> Literal["sqlite", "postgres"]: ...  # read-only: each class has its own

    location: str  # the file path, or the URL without its password

    async def close(self) -> None: ...

    # -- threads and resources ------------------------------------------------------------
    async def get_thread(self, thread_id: str) -> Thread | None: ...
    async def list_threads(
        self, resource_id: str, *, before: str | None = None, after: str | None = None, limit: int = 20, offset: int = 0
    ) -> tuple[list[Thread], bool]: ...
    async def list_resources(self) -> list[ResourceSummary]: ...
    async def update_thread(
        self,
        thread_id: str,
        *,
        title: str | None = None,
        metadata: dict[str, Any] | None = None,
        pin_title: bool | None = None,
    ) -> Thread: ...
    async def set_generated_title(self, thread_id: str, title: str) -> tuple[str | None, bool]: ...
    async def set_thread_metadata_paths(self, thread_id: str, values: dict[str, Any]) -> None: ...
    async def get_working_memory(self, scope: Scope, key: str) -> str | None: ...
    async def update_working_memory(
        self, scope: Scope, key: str, update: Callable[[str | None], str | None]
    ) -> tuple[str | None, bool]: ...
    async def delete_thread(self, thread_id: str) -> int: ...
    async def delete_resource(self, resource_id: str) -> tuple[int, int]: ...

    # -- messages -----------------------------------------------------------------------------
    async def append_messages(
        self,
        thread_id: str,
        resource_id: str,
        record_key: str,
        messages: list[NewMessage],
        *,
        counted_by: int = 0,
        thread_metadata: dict[str, Any] | None = None,
        working_memory: WorkingMemorySeed | None = None,
    ) -> AppendResult: ...
    async def message_page(
        self,
        thread_id: str,
        *,
        after_seq: int | None = None,
        before_seq: int | None = None,
        limit: int = 20,
        offset: int = 0,
        newest_first: bool = False,
        part_filter: tuple[str | None, str | None] = (None, None),
    ) -> list[Message]: ...
    async def count_messages_before(self, thread_id: str, seq: int) -> int: ...
    async def find_message(self, resource_id: str, message_id: str, thread_id: str | None = None) -> Message | None: ...
    async def messages_by_seq(self, seqs: list[int]) -> dict[int, Message]: ...
    async def last_message_time(self, thread_id: str) -> str | None: ...
    async def tokenizer_id(self, name: str) -> int: ...
    async def stale_token_counts(
        self, counted_by: int, limit: int = 500, after_seq: int = 0
    ) -> list[dict[str, Any]]: ...
    async def set_token_counts(self, counted_by: int, counts: list[tuple[int, int, list[int]]]) -> None: ...
    async def last_seq(self) -> int: ...

    # -- observation records and their windows ------------------------------------------------
    async def record(self, key: str) -> Record | None: ...
    async def record_state(self, key: str, thread_id: str) -> RecordState: ...
    async def snapshot(self, key: str, thread_id: str) -> Snapshot | None: ...
    async def context(
        self,
        key: str,
        thread_id: str,
        budget: int,
        working_memory: tuple[str, str] | None,
        others_since: str | None = None,
    ) -> ContextRead | None: ...
    async def groups(self, key: str, generation: int | None = None) -> list[Group]: ...
    async def generations(self, key: str) -> list[tuple[int, list[Group]]]: ...
    async def chunks(self, key: str) -> list[Chunk]: ...
    async def unobserved(
        self, key: str, thread_id: str, *, after_seq: int | None = None, max_tokens: int | None = None
    ) -> list[Message]: ...
    async def busy_threads(self, key: str) -> list[tuple[str, int, int]]: ...
    async def thread_hints(self, key: str, thread_ids: list[str]) -> dict[str, Hints]: ...
    async def due_work(self, min_pending: int, min_observation_tokens: int) -> list[DueWork]: ...
    async def tail(self, key: str, thread_id: str) -> int: ...

    # -- the conditional commits that end a cycle ---------------------------------------------
    # `edits`: the record's `Record.edits` when the cycle read it; a forget, edit or restore since
    # then refuses the commit (model work made before the change must not bring back what it removed).
    async def commit_observation(
        self,
        key: str,
        *,
        lease: Lease | None,
        expected_cursors: dict[str, int],
        new_cursors: dict[str, int],
        groups: list[NewGroup],
        hints: dict[str, dict[str, Any]],
        extracted: dict[str, Any] | None,
        observed_at: str | None,
        events: Iterable[dict[str, Any]] = (),
        edits: int | None = None,
    ) -> bool: ...
    async def append_chunks(
        self,
        key: str,
        *,
        lease: Lease | None,
        expected_tails: dict[str, int],
        chunks: list[Chunk],
        extracted: dict[str, Any] | None,
        buffered_at_tokens: int | None,
        events: Iterable[dict[str, Any]] = (),
        edits: int | None = None,
    ) -> bool: ...
    async def activate_chunks(
        self, key: str, chunk_ids: list[str], *, lease: Lease | None = None, events: Iterable[dict[str, Any]] = ()
    ) -> bool: ...
    async def commit_reflection(
        self,
        key: str,
        *,
        lease: Lease | None,
        generation: int,
        covered: int,
        groups: list[NewGroup],
        extracted: dict[str, Any] | None,
        blocked_at: int | None,
        events: Iterable[dict[str, Any]] = (),
        hints: dict[str, dict[str, Any]] | None = None,
        edits: int | None = None,
    ) -> bool: ...
    async def store_buffered_reflection(
        self,
        key: str,
        reflection: BufferedReflection,
        *,
        lease: Lease | None,
        events: Iterable[dict[str, Any]] = (),
        edits: int | None = None,
    ) -> bool: ...
    async def discard_buffered_reflection(self, key: str) -> None: ...

    # -- coordination between processes --------------------------------------------------------
    async def acquire_lease(
        self, key: str, op: str, owner: str, ttl: float, cycle_id: str | None = None, *, excluding: tuple[str, ...] = ()
    ) -> bool: ...
    async def release_lease(self, key: str, op: str, owner: str) -> None: ...
    async def lease_holder(self, key: str, op: str) -> str | None: ...
    async def expire_leases(self) -> int: ...
    async def add_events(self, events: Iterable[dict[str, Any]]) -> None: ...
    async def events(
        self,
        *,
        thread_id: str | None = None,
        record_key: str | None = None,
        cycle_id: str | None = None,
        after_id: int = 0,
        limit: int = 100,
    ) -> list[Event]: ...
    async def model_health(self, model: str) -> ModelHealth | None: ...
    async def put_model_health(self, health: ModelHealth) -> None: ...
    async def ingest_state(self, source: str) -> IngestState: ...
    async def put_ingest_state(self, state: IngestState) -> None: ...
    async def settled_threads(
        self, quiet_before: str, record_key: str | None = None, limit: int = 50
    ) -> list[SettledThread]: ...
    async def recent_sessions(
        self, resource_id: str, exclude_thread: str | None = None, limit: int = 5
    ) -> list[SessionSummary]: ...

    # -- search and vectors ------------------------------------------------------------------
    async def search_messages(
        self, resource_id: str, plan: SearchPlan, *, thread_id: str | None = None, limit: int = 50
    ) -> tuple[list[TextHit], TermStats]: ...
    async def search_groups(
        self, resource_id: str, match: str, *, thread_id: str | None = None, limit: int = 20
    ) -> list[GroupHit]: ...
    async def pending_vectors(self, resource_id: str, embedder: str, limit: int = 64) -> list[Pending]: ...
    async def put_vectors(self, resource_id: str, embedder: str, items: list[tuple[Pending, list[float]]]) -> None: ...
    async def nearest_vectors(
        self,
        resource_id: str,
        embedder: str,
        query: list[float],
        *,
        thread_id: str | None = None,
        limit: int | None = None,
    ) -> list[tuple[str, str, float]]: ...
    async def groups_by_id(self, ids: list[str]) -> dict[str, Group]: ...

    # -- looking after the database ------------------------------------------------------------
    async def stats(self) -> Stats: ...
    async def integrity(self) -> list[str]: ...
    async def backup(self, target: str) -> int: ...

    # -- moving a memory (om-mcp export / import) -----------------------------------------------
    async def export(self, consume: Callable[[Iterator[dict[str, Any]]], T], resource_id: str | None = None) -> T: ...
    async def import_records(self, items: Iterable[tuple[str, Any]], counted_by: int = 0) -> ImportResult: ...
    async def set_thread_times(self, thread_id: str, created_at: str | None, updated_at: str | None) -> None: ...

    # -- privacy: redaction counts, added by append_messages (store/*/privacy.py) ---------------
    async def redaction_counts(self, resource_id: str | None = None) -> dict[str, int]: ...

    # -- forgetting and correcting one thing (store/forget.py) ---------------------------------
    async def group_records(self, group_ids: list[str]) -> dict[str, str]: ...
    async def record_groups(self, record_key: str | None = None) -> list[tuple[str, bool, Group]]: ...
    async def find_text(self, phrase: str, resource_id: str | None = None, limit: int = 500) -> Found: ...
    async def apply_rewrite(self, plan: Rewrite) -> Rewritten | None: ...

    # -- model spend per UTC day, for the spend caps (store/spend.py) -------------------------
    async def add_spend(
        self, day: str, model: str, input_tokens: int, output_tokens: int, usd: float | None
    ) -> None: ...
    async def spend_since(self, first_day: str) -> list[SpendDay]: ...

    # -- changes seen by other processes (PostgreSQL; nothing to do on SQLite) ----------------
    async def broadcast(self, message: dict[str, Any]) -> None: ...
    async def listen(self, callback: Listener) -> Callable[[], Awaitable[None]]: ...


@runtime_checkable
class Overview(Protocol):
    """Reads for looking at a memory (the status page; `om-mcp status`, `threads`, `show`).
    `SQLiteStore` and `PostgresStore` both have them."""

    async def thread_states(
        self, scope: Scope, *, resource_id: str | None = None, thread_id: str | None = None, limit: int = 200
    ) -> list[ThreadState]: ...
    async def series_inputs(self, key: str, limit_events: int = 5000) -> SeriesInputs: ...
    async def pending_records(self) -> list[tuple[str, int, int]]: ...
