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
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any, TextIO

from om_mcp import __version__
from om_mcp.engine import intake
from om_mcp.importers.jsonl_format import read_records, write_records
from om_mcp.importers.thread import ImportedThread
from om_mcp.store.summaries import ImportResult

BATCH = 500  # messages per append (under max_batch_messages) and per prepared import batch
Advance = Callable[[int], None]


async def export_memory(
    memory: Any, out: TextIO, resource_id: str | None = None, advance: Advance | None = None
) -> dict[str, int]:
    """Write the memory (or one resource) as om-mcp JSONL; returns the count of each record type."""
    source = f"om-mcp {__version__} ({memory.store.location})"

    def consume(records: Iterator[dict[str, Any]]) -> dict[str, int]:
        return write_records(_counting(records, advance), out, source=source)

    return await memory.store.export(consume, resource_id)


def _counting(records: Iterator[dict[str, Any]], advance: Advance | None) -> Iterator[dict[str, Any]]:
    for record in records:
        if advance is not None and record["type"] == "message":
            advance(1)
        yield record


async def import_memory(memory: Any, source: IO[bytes], advance: Advance | None = None) -> ImportResult:
    """Import an om-mcp JSONL export read from a binary stream; `advance(bytes)` as it reads."""
    counted_by = await memory.store.tokenizer_id(memory.counter.cache_key)
    items = _items(memory, read_records(_lines(source, advance)))
    return await memory.store.import_records(items, counted_by)


def _lines(source: IO[bytes], advance: Advance | None) -> Iterator[str]:
    for raw in source:
        if advance is not None:
            advance(len(raw))
        yield raw.decode("utf-8")


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
            yield kinds[kind], record
    yield from flush()


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
    threads: Iterable[ImportedThread],
    resource_id: str | None = None,
    advance: Callable[[ImportedThread], None] | None = None,
) -> tuple[ImportResult, list[str]]:
    """Append each conversation as a thread of `resource_id` (default: the configured one),
    with its title and dates; returns what was added and skipped, and the thread ids."""
    resource_id = resource_id or memory.config.default_resource_id
    result, ids = ImportResult(), []
    for thread in threads:
        if not thread.messages:
            result.skipped["empty conversation"] += 1
        else:
            metadata = {**thread.metadata, **({"title": thread.title} if thread.title else {})}
            existed = await memory.store.get_thread(thread.id) is not None
            for start in range(0, len(thread.messages), BATCH):
                outcome = await memory.append_messages(
                    thread.id,
                    thread.messages[start : start + BATCH],
                    resource_id,
                    thread_metadata=metadata if start == 0 else None,
                )
                if outcome.appended:
                    result.added["message"] += outcome.appended
                if outcome.skipped_duplicates:
                    result.skipped["message"] += outcome.skipped_duplicates
            last = thread.messages[-1].get("created_at")
            await memory.store.set_thread_times(
                thread.id,
                thread.created_at or thread.messages[0].get("created_at"),
                max(filter(None, (thread.updated_at, last)), default=None),
            )
            (result.skipped if existed else result.added)["thread"] += 1
            ids.append(thread.id)
        if advance is not None:
            advance(thread)
    return result, ids
