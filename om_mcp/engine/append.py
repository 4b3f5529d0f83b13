"""The append pipeline: what storing a batch of messages does, written once for every way in.

    rows: the intake (`engine/intake.py`: `prepare` for an MCP client, `recorder/rows.py` for a
          host's transcript; both end in `intake.message_row`)
    record(store, Batch(...)), in ONE transaction:
        the append itself (the store's rule: ids, re-sends, the thread, the record's totals)
        each step of STEPS, on what the append stored   <- a new per-append step goes here
        the session's end (`ended_at`), when the batch says so
        the record's state (the append's own, unless a step changed the record), then the events
    -> Recorded: what was stored, skipped, refused; the events; the record's state (what is due)

`store` is the store's operations inside that transaction (`om_mcp.store.Transaction`), so
the pipeline runs, unchanged, under `await` on either backend and synchronously on SQLite's
file (its driver completes each operation at once):

* `Memory.append_messages` (the MCP tool; conversations imported from other apps):
  `await store.transaction(record, batch)`; then the events go to the listeners and the state to
  the worker (`after_append`);
* the host hooks and `om-mcp ingest`, through the recorder (`engine/recorder/`): inside its own write
  transaction (`store.local.write`); then a worker is started if work is due (`recorder/spawn.py`);
* `om-mcp import` of an om-mcp export: each message batch of the import's one transaction goes
  through STEPS as well (`after_stored`, `Stored.imported`), see `engine/transfer.py`.

A new per-append step is an `async def step(store, stored) -> list[event]` added to STEPS:

* it runs inside the append's transaction, on what was stored: what it writes commits with the
  messages or not at all;
* it awaits only `store`'s operations: on SQLite anything else would stop the synchronous run
  (`store/tx.py: run_sync`); a new operation is a rule in `store/` and one line in
  `store/operations.py`;
* it is fast and never calls a model (the hook runs it on every prompt), and imports nothing heavy
  (pydantic, anyio) at module level;
* `stored.imported` is True for the batches of an om-mcp export, which brings its own
  observations and events: a step that derives memory from the messages skips those;
* a step that changes the record (adds observation lines) sets `stored.record_changed`, so the
  state handed to what decides the due work is read after it.

A check of each row before it is stored belongs to the intake (`intake.message_row`, reached by
every way in) or, when it needs the database (a forgotten message must not come back), to the
store's append rule (`store/messages.py`), which the import's batches share.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from om_mcp.engine import intake, remember
from om_mcp.store import AppendResult, Message, NewMessage, RecordState, StoreError, Transaction
from om_mcp.store.decode import now_iso
from om_mcp.store.rows import WorkingMemorySeed

Event = dict[str, Any]


@dataclass
class Batch:
    """One append, as every way in asks for it."""

    thread_id: str
    resource_id: str
    record_key: str
    rows: list[NewMessage]
    counted_by: int = 0  # the store's id of the tokenizer that counted the rows
    thread_metadata: dict[str, Any] | None = None  # a new thread's title and metadata
    working_memory: WorkingMemorySeed | None = None  # a new thread's working memory
    ends_session: bool = False  # the host said the session is over (the thread gets `ended_at`)
    # A message whose id is stored with other content: False refuses the whole batch (an MCP
    # client is told); True keeps the stored one, appends the others and says so (a hook never
    # fails its host).
    keep_going: bool = False
    # How a line the batch asks to remember is counted (`<remember>` spans); the engine's counter if None.
    count: Callable[[str], int] | None = None


@dataclass
class Stored:
    """What one batch stored, as each step sees it."""

    thread_id: str
    resource_id: str
    messages: list[Message]  # the new ones with their seqs, pause markers included
    redactions: dict[str, int]  # secrets kept out, per privacy rule
    imported: bool = False  # a batch of an om-mcp export, which brings its observations along
    # A step that changes the record (its observation log, its windows) sets this, so the record's
    # state is read again after the steps instead of taken from the append's own read.
    record_changed: bool = False
    record_key: str = ""
    count: Callable[[str], int] | None = None  # as `Batch.count`
    remembered: int = 0  # lines the `<remember>` spans put in the log


@dataclass
class Recorded:
    """What an append did."""

    appended: list[Message] = field(default_factory=list)
    skipped: int = 0  # re-sent messages, stored already
    forgotten: int = 0  # messages the tombstones refused: the user had them forgotten
    refused: list[str] = field(default_factory=list)  # one line per message kept as stored (`keep_going`)
    thread_created: bool = False
    state: RecordState | None = None  # the record after the append (None: the thread does not exist)
    events: list[Event] = field(default_factory=list)  # written in the append's transaction
    remembered: int = 0  # lines the messages' `<remember>` spans put in the log

    @property
    def messages(self) -> int:
        """The messages appended, pause markers aside."""
        return len([m for m in self.appended if not intake.is_gap_marker(m)])


Step = Callable[[Transaction, Stored], Awaitable[list[Event]]]


async def pauses(store: Transaction, stored: Stored) -> list[Event]:
    """A TEMPORAL_GAP event for each pause marker stored (`intake.with_gap_markers`)."""
    if stored.imported or not any(intake.is_gap_marker(m) for m in stored.messages):
        return []  # checked first: the events' names load the config model, which a hook must not
    return intake.gap_events(stored.thread_id, stored.resource_id, stored.messages)


async def secrets_kept_out(store: Transaction, stored: Stored) -> list[Event]:
    """The event saying what the batch kept out: counts per rule, never the text."""
    return intake.redaction_events(stored.thread_id, stored.resource_id, stored.redactions)


async def remembered_lines(store: Transaction, stored: Stored) -> list[Event]:
    """The lines the user's `<remember>` spans ask for, in the log with their messages
    (`engine/remember.py`): an acknowledged message has its line, a re-sent one adds none."""
    if stored.imported:
        return []  # an om-mcp export brings the lines it made along
    if stored.count is None:
        from om_mcp.engine.tokens import get_token_counter

        stored.count = get_token_counter().count_text
    lines = remember.remembered_in(stored.messages, stored.count)
    if lines:
        stored.remembered += await store.remember_with_messages(
            stored.record_key, stored.thread_id, stored.messages, lines
        )
        stored.record_changed = True
    return []


# The steps each stored batch goes through, in order, inside the append's transaction.
STEPS: list[Step] = [pauses, secrets_kept_out, remembered_lines]


async def record(store: Transaction, batch: Batch) -> Recorded:
    """Append the batch and everything that goes with it; see the module docstring."""
    done, exists, changed = Recorded(), False, False
    if batch.rows:
        results = await _append(store, batch, done)
        for result in results:
            done.appended += result.appended
            done.skipped += result.skipped_duplicates
            done.forgotten += result.forgotten
            done.thread_created = done.thread_created or result.thread_created
            exists = True
            if result.appended:
                stored = Stored(
                    batch.thread_id,
                    batch.resource_id,
                    result.appended,
                    result.redactions,
                    record_key=batch.record_key,
                    count=batch.count,
                )
                done.events += await after_stored(store, stored)
                done.remembered += stored.remembered
                changed = changed or stored.record_changed
        if len(results) == 1 and not changed:
            done.state = results[0].state  # read by the append, and nothing changed the record since
    if not exists:
        exists = await store.get_thread(batch.thread_id) is not None
    if exists:
        if batch.ends_session:
            await store.set_thread_metadata_paths(batch.thread_id, {"ended_at": now_iso()})
        if done.state is None:
            done.state = await store.record_state(batch.record_key, batch.thread_id)
    await store.add_events(done.events)  # last: see `store/coordination.py: add_events`
    return done


async def after_stored(store: Transaction, stored: Stored) -> list[Event]:
    """Run STEPS on what one batch stored; their events, in order."""
    events: list[Event] = []
    for step in STEPS:
        events += await step(store, stored)
    return events


async def _append(store: Transaction, batch: Batch, done: Recorded) -> list[AppendResult]:
    if not batch.keep_going:
        return [await _append_rows(store, batch, batch.rows)]
    try:
        async with store.savepoint("om_append"):
            return [await _append_rows(store, batch, batch.rows)]
    except StoreError as error:
        if error.field == "resource_id":
            raise  # the thread belongs to another resource: none of the batch can go in
    results = []
    for row in batch.rows:  # one id clashes with a stored message: the others one by one
        try:
            async with store.savepoint("om_append"):
                results.append(await _append_rows(store, batch, [row]))
        except StoreError as error:
            done.refused.append(f"kept the stored message: {error}")
    return results


async def _append_rows(store: Transaction, batch: Batch, rows: list[NewMessage]) -> AppendResult:
    return await store.append_messages(
        batch.thread_id,
        batch.resource_id,
        batch.record_key,
        rows,
        counted_by=batch.counted_by,
        thread_metadata=batch.thread_metadata,
        working_memory=batch.working_memory,
    )
