"""Moving a memory: om-mcp's JSONL export and import, and conversations from other apps.

    counts = await export_memory(memory, out)                  # every resource, or resource_id=...
    result = await import_memory(memory, open("memory.jsonl", "rb"))
    result = await import_conversations(memory, iter_export("conversations.json"), "alice")

An export is one consistent snapshot written as the store reads it. An import is
one transaction: the file is validated record by record as it is written, and a
bad record (or a file cut short) rolls everything back. Messages are counted by
this side's tokenizer; cursors and group ranges come back from message ids.
Importing the same file twice adds nothing.

Conversations from Claude or ChatGPT exports go through `append_messages`, a
batch at a time, so they get exactly what any appended message gets (ids kept,
duplicates skipped, pauses marked); their threads then get their real dates.
An export's messages are stored by the store's import, as an append stores them
(`store/messages.py: insert_new`), and each batch goes through the append's steps
(`engine/append.py`), inside the import's transaction.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any, TextIO

from om_mcp import __version__
from om_mcp.engine import append, intake
from om_mcp.importers.jsonl_format import ExportFormatError, read_records, write_records
from om_mcp.importers.thread import ImportedThread, Refused, fit
from om_mcp.store import Access, AppendResult, ImportResult, Transaction
from om_mcp.store.copy import copy_memory

BATCH = 500  # messages per append (under max_batch_messages) and per prepared import batch
MAX_LINE_BYTES = 64 * 1024 * 1024  # one record of an om-mcp export: a message is at most a few MB
Advance = Callable[[int], None]


async def backup(memory: Any, target: str) -> int:
    """SQLite copies itself with its online backup API, one snapshot that writers need not wait for;
    a PostgreSQL memory is read from one snapshot into a new SQLite file (as `om-mcp migrate` does)."""
    if memory.store.backend == "sqlite":
        return await memory.store.backup(target)
    await copy_memory(str(memory.database or memory.config.database()), target)
    return os.path.getsize(target)


async def export_memory(
    memory: Any, out: TextIO, resource_id: str | None = None, advance: Advance | None = None
) -> dict[str, int]:
    """Write the memory (or one resource) as om-mcp JSONL; returns the count of each record type."""
    source = f"om-mcp {__version__} ({memory.store.location})"

    def consume(records: Iterator[dict[str, Any]]) -> dict[str, int]:
        return write_records(_counting(records, advance), out, source=source)

    return await memory.store.export(consume, memory.access if resource_id is None else Access.to([resource_id]))


def _counting(records: Iterator[dict[str, Any]], advance: Advance | None) -> Iterator[dict[str, Any]]:
    for record in records:
        if advance is not None and record["type"] == "message":
            advance(1)
        yield record


async def import_memory(memory: Any, source: IO[bytes], advance: Advance | None = None) -> ImportResult:
    """Import an om-mcp JSONL export read from a binary stream; `advance(bytes)` as it reads."""
    counted_by = await memory.store.tokenizer_id(memory.counter.cache_key)
    items = _items(memory, read_records(_lines(source, advance)))
    return await memory.store.transaction(_import, items, counted_by)


async def _import(store: Transaction, items: Iterator[tuple[str, Any]], counted_by: int) -> ImportResult:
    """The import's one transaction; each message batch it stores goes through the append's steps."""
    events: list[dict[str, Any]] = []

    async def on_batch(result: AppendResult) -> None:
        assert result.thread is not None  # the import's batches name their thread
        batch = append.Stored(
            result.thread.id, result.thread.resource_id, result.appended, result.redactions, imported=True
        )
        events.extend(await append.after_stored(store, batch))

    done = await store.import_records(items, counted_by, on_batch)
    await store.add_events(events)
    return done


def _lines(source: IO[bytes], advance: Advance | None) -> Iterator[str]:
    """The file's lines, each read only up to MAX_LINE_BYTES (an export line is one record)."""
    number = 0
    while raw := source.readline(MAX_LINE_BYTES + 1):
        number += 1
        if advance is not None:
            advance(len(raw))
        if len(raw) > MAX_LINE_BYTES:
            raise ExportFormatError(f"line {number}", f"longer than {MAX_LINE_BYTES:,} bytes: not an export record")
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise ExportFormatError(f"line {number}", f"not UTF-8 text ({error.reason})") from None


def _items(memory: Any, records: Iterator[dict[str, Any]]) -> Iterator[tuple[str, Any]]:
    """Format records as the store's import items; messages prepared in batches per thread."""
    batch: list[dict[str, Any]] = []
    batch_thread: str | None = None

    def flush() -> Iterator[tuple[str, Any]]:
        if batch:
            yield "messages", (batch_thread, _prepare(memory, batch))
            batch.clear()

    kinds = {"resource": "resource", "thread": "thread", "observation_record": "record", "observation_group": "group"}
    for record in records:
        kind = record["type"]
        if kind == "message":
            if record["thread_id"] != batch_thread or len(batch) >= BATCH:
                yield from flush()
                batch_thread = record["thread_id"]
            batch.append(record)
        elif kind in kinds:
            yield from flush()
            yield kinds[kind], _scrubbed(memory, record)
    yield from flush()


# The free text of each record besides messages (which `_prepare` takes through the intake).
_TEXT_FIELDS = {
    "resource": ("working_memory",),
    "thread": ("title", "metadata", "working_memory"),
    "observation_record": ("hints", "extracted"),
    "observation_group": ("text",),
}


def _scrubbed(memory: Any, record: dict[str, Any]) -> dict[str, Any]:
    """A record with the privacy rules applied to its text: an export made before a rule existed,
    or with privacy off, brings no secret in. A group's tokens are counted again when it changed."""
    fields: dict[str, Any] = {name: record[name] for name in _TEXT_FIELDS[record["type"]] if record.get(name)}
    clean = {k: intake.scrubbed(memory.config, v) for k, v in fields.items() if k != "hints"}
    if "hints" in fields:  # keyed by thread id: an id stays as it is
        clean["hints"] = {thread: intake.scrubbed(memory.config, hint) for thread, hint in fields["hints"].items()}
    if clean == fields:
        return record
    if "text" in fields and clean["text"] != fields["text"]:
        clean["tokens"] = memory.counter.count_text(clean["text"])
    return {**record, **clean}


def _prepare(memory: Any, records: list[dict[str, Any]]) -> list:
    messages = [
        {
            "id": r["id"],
            "role": r["role"],
            "content": r["parts"],
            "created_at": r["created_at"],
            "metadata": r["metadata"] or None,
        }
        for r in records
    ]
    rows = intake.prepare(memory.config, memory.counter, messages)
    for row in rows:
        if row.metadata.get("om_kind") == "temporal-gap":  # as `with_gap_markers` made it
            row.observable, row.body = True, ""
    return rows


async def import_conversations(
    memory: Any,
    threads: Iterable[ImportedThread | Refused],
    resource_id: str | None = None,
    advance: Callable[[ImportedThread | Refused], None] | None = None,
) -> tuple[ImportResult, list[str]]:
    """Append each conversation as a thread of `resource_id` (default: the configured one),
    with its title and dates; returns what was added and skipped, and the thread ids.

    A conversation is made to fit first (`importers.thread.fit`: long messages cut, repeated
    ids told apart); one that still cannot be stored, or that the export could not give
    (`Refused`), is left out and listed in `result.problems` with its title and id, and the
    others go on. Run again, the import adds only what is not there yet."""
    from om_mcp.engine.errors import InputError

    resource_id = resource_id or memory.config.default_resource_id
    result, ids = ImportResult(), []
    for thread in threads:
        if isinstance(thread, Refused):
            result.skipped["unreadable conversation"] += 1
            result.problems.append(_problem(thread.id, thread.title, "skipped", thread.reason, index=thread.index))
        elif not thread.messages:
            result.skipped["empty conversation"] += 1
        else:
            cut = fit(thread, memory.config.max_message_chars)
            if cut:
                result.problems.append(
                    _problem(thread.id, thread.title, "trimmed", f"{cut} message(s) over the size limit were cut")
                )
            stored: list[int] = []  # the batches stored
            try:
                await _append_conversation(memory, thread, resource_id, result, stored)
            except InputError as error:
                done = sum(stored)
                what = f"partly imported ({done} of {len(thread.messages)} messages)" if done else "skipped"
                result.skipped["unstorable conversation"] += 1
                result.problems.append(_problem(thread.id, thread.title, what, str(error)))
            else:
                ids.append(thread.id)
        if advance is not None:
            advance(thread)
    return result, ids


async def _append_conversation(
    memory: Any, thread: ImportedThread, resource_id: str, result: ImportResult, stored: list[int]
) -> None:
    metadata = {**thread.metadata, **({"title": thread.title} if thread.title else {})}
    existed = await memory.store.get_thread(thread.id) is not None
    for start in range(0, len(thread.messages), BATCH):
        batch = thread.messages[start : start + BATCH]
        outcome = await memory.append_messages(
            thread.id, batch, resource_id, thread_metadata=metadata if start == 0 else None
        )
        stored.append(len(batch))
        if outcome.appended:
            result.added["message"] += outcome.appended
        if outcome.skipped_duplicates:
            result.skipped["message"] += outcome.skipped_duplicates
        if outcome.forgotten:
            result.skipped["forgotten message"] += outcome.forgotten
    if await memory.store.get_thread(thread.id) is None:
        result.skipped["forgotten conversation"] += 1  # every message of it was forgotten
        return
    last = thread.messages[-1].get("created_at")
    await memory.store.set_thread_times(
        thread.id,
        thread.created_at or thread.messages[0].get("created_at"),
        max(filter(None, (thread.updated_at, last)), default=None),
    )
    (result.skipped if existed else result.added)["thread"] += 1


def _problem(thread_id: str | None, title: str | None, what: str, why: str, **extra: Any) -> dict[str, Any]:
    return {"thread": thread_id, "title": title, "what": what, "why": why, **extra}
