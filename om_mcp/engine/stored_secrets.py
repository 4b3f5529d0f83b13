"""Secrets already stored: what the privacy rules would have kept out, found after the fact
(`om-mcp doctor --secrets`), for a memory written before redaction was on, or with a rule off.

Each finding names where the secret is and which rules matched, never the secret itself,
and how to remove it: a message or an observation line with `om-mcp forget`, the working
memory with `update_working_memory`. Reads go through the store's ordinary reads, a page
at a time, on either backend.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from om_mcp import privacy
from om_mcp.engine.observation.lines import lines

if TYPE_CHECKING:
    from om_mcp.engine.memory import Memory

PAGE = 500


@dataclass
class Finding:
    where: str  # message | observation | buffered observation | working memory | title | metadata | task
    # | extracted value
    thread_id: str | None
    resource_id: str
    ref: str  # the message id, the line id, the chunk id, or the scope of the working memory
    rules: dict[str, int]
    remove: str  # the command that removes it

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


async def find_stored_secrets(memory: Memory) -> list[Finding]:
    """Every stored message (its parts and metadata), observation line, buffered observation,
    working memory, title, thread metadata, task and extracted value that a privacy rule matches
    (the configured rules, all built-in ones when privacy is off), with the detectors that keep
    secrets out on the way in."""
    settings = memory.config.privacy.settings()
    redactor = privacy.redactor_for({**settings, "enabled": True, "before_observation": None})
    store, out = memory.store, []

    def matched(value: Any) -> dict[str, int]:
        counts: Counter[str] = Counter()
        redactor.value(value, counts)
        return dict(sorted(counts.items()))

    def in_message(message: Any) -> dict[str, int]:  # an image's or file's binary payload is not text
        counts: Counter[str] = Counter()
        redactor.parts(message.parts, counts)
        redactor.value(message.metadata, counts)
        return dict(sorted(counts.items()))

    records: set[str] = set()
    for resource in await store.list_resources():
        offset = 0
        while True:
            threads, more = await store.list_threads(resource.id, limit=PAGE, offset=offset)
            for thread in threads:
                records.add(memory.record_key(thread.id, resource.id))
                if rules := matched(thread.title):
                    out.append(Finding("title", thread.id, resource.id, thread.id, rules, _title(thread.id)))
                if rules := matched(thread.metadata):
                    out.append(Finding("metadata", thread.id, resource.id, thread.id, rules, _metadata(thread.id)))
                after = 0
                while page := await store.message_page(thread.id, after_seq=after, limit=PAGE):
                    for m in page:
                        if rules := in_message(m):
                            command = f"om-mcp forget --message {m.id} --thread {thread.id}"
                            out.append(Finding("message", thread.id, resource.id, m.id, rules, command))
                    after = page[-1].seq
                wm = await store.get_working_memory("thread", thread.id)
                if rules := matched(wm):
                    out.append(Finding("working memory", thread.id, resource.id, "thread", rules, _working_memory()))
            offset += len(threads)
            if not more or not threads:
                break
        if rules := matched(await store.get_working_memory("resource", resource.id)):
            out.append(Finding("working memory", None, resource.id, "resource", rules, _working_memory()))
    for key in sorted(records):
        record = await store.record(key)
        if record is None:
            continue
        if rules := matched(record.extracted):
            command = "om-mcp forget --match <the value> (extracted values are scrubbed too)"
            out.append(Finding("extracted value", record.thread_id, record.resource_id, key, rules, command))
        for _generation, groups in await store.generations(key):
            for group in groups:
                for line in lines(group.text):
                    if line.hash is not None and (rules := matched(line.text)):
                        ref = line.id(group.id)
                        command = f"om-mcp forget --observation {ref}"
                        out.append(Finding("observation", group.thread_id, record.resource_id, ref, rules, command))
        for chunk in await store.chunks(key):
            if rules := matched(chunk.text):
                command = f"om-mcp forget --message <one of its messages> --thread {chunk.thread_id}"
                out.append(
                    Finding("buffered observation", chunk.thread_id, record.resource_id, chunk.id, rules, command)
                )
        hints = await store.thread_hints(key, sorted(record.cursors))
        for thread_id, hint in hints.items():
            if rules := matched([hint.current_task, hint.suggested_response]):
                command = f"om-mcp observe {thread_id} (the next cycle writes a new task)"
                out.append(Finding("task", thread_id, record.resource_id, thread_id, rules, command))
    return _unique(out)


def _unique(findings: list[Finding]) -> list[Finding]:
    """A line kept verbatim through reflections is in several generations: listed once, under its
    newest id (forgetting it removes the copies in the other generations)."""
    seen: set[tuple[str, str, str]] = set()
    out = []
    for finding in findings:
        ref = finding.ref.rpartition(".")[2] if finding.where == "observation" else finding.ref
        key = (finding.where, finding.resource_id, ref)
        if key not in seen:
            seen.add(key)
            out.append(finding)
    return out


def _title(thread_id: str) -> str:
    return f"update_thread (thread {thread_id}) with a new title"


def _metadata(thread_id: str) -> str:
    return f"update_thread (thread {thread_id}) with the metadata key set to a new value"


def _working_memory() -> str:
    return "update_working_memory without it"
