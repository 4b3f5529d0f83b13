"""Catch up on one session's transcript: the part that is new since the last
hook of that session becomes messages of the thread = the session id, in the
resource = the project.

How far each transcript was read is kept in the store's `ingest_state` table
(source "<host>:<session id>"): the byte offset and the last entry's uuid in
their columns, the reader's whole state (`TranscriptState.to_dict()`) as JSON
in `fingerprint`. The reader notices a rewritten or truncated file and starts
again from the top, which is harmless: message ids are the entries' uuids, so
what was stored already is skipped.

The transcript is read and converted outside the write lock; the write
transaction then checks that no other hook of the same session moved the state
meanwhile (else it reads again, inside), appends through the engine's append
pipeline (`engine/append.py`, as `append_messages` does), and saves the new state.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field, replace
from typing import Any

from om_mcp.engine import append
from om_mcp.engine.tokens import TokenCounter
from om_mcp.hook.rows import to_rows
from om_mcp.hook.settings import HookSettings
from om_mcp.hosts import prompts
from om_mcp.hosts.common import trim_rule
from om_mcp.hosts.events import CODEX, CURSOR, GEMINI_CLI, VSCODE, HookEvent
from om_mcp.store import IngestState, RecordState, Transaction, gate_for, local, record_key

LINE_HOSTS = (CODEX, CURSOR, VSCODE)


@dataclass
class Read:
    """What one read of the transcript gave, and the state to save with it."""

    messages: list[dict[str, Any]]
    state: IngestState
    rescanned: bool = False
    problems: list[str] = field(default_factory=list)  # bounded-read notes, for the hook log


@dataclass
class Ingested:
    thread_id: str
    resource_id: str
    record_key: str
    appended: int = 0
    skipped: int = 0
    refused: int = 0  # messages whose id exists with other content (kept as stored)
    forgotten: int = 0  # messages a tombstone refused: they were forgotten (docs/forget.md)
    rescanned: bool = False
    state: RecordState | None = None  # the record after the append (None: no thread yet)
    problems: list[str] = field(default_factory=list)  # one line each, for the hook log


def source_of(event: HookEvent) -> str:
    return f"{event.host}:{event.session_id}"


def read_transcript(event: HookEvent, saved: IngestState, final: bool, tool_output_chars: int = 2000) -> Read:
    """The messages after `saved` in the event's transcript (none when it has no transcript), and the
    prompt the event carries (`hosts.prompts`: stored at once, its transcript copy left out later)."""
    previous = json.loads(saved.fingerprint) if saved.fingerprint else None
    read = _read_transcript(event, saved, previous, final, tool_output_chars)
    found, waiting = prompts.settle(event, read.messages, (previous or {}).get(prompts.PENDING) or [])
    state = json.loads(read.state.fingerprint) if read.state.fingerprint else {}
    if waiting:
        state[prompts.PENDING] = waiting  # the readers' own state does not carry it: it goes beside
    else:
        state.pop(prompts.PENDING, None)
    fingerprint = json.dumps(state) if state else read.state.fingerprint
    return replace(read, messages=found, state=replace(read.state, fingerprint=fingerprint))


def _read_transcript(event: HookEvent, saved: IngestState, previous: Any, final: bool, tool_output_chars: int) -> Read:
    trim = trim_rule(tool_output_chars)
    if event.host in LINE_HOSTS:  # Codex, Cursor, VS Code: one reader each, in hosts/
        return _read_lines_host(event, saved, previous, trim)
    if not event.transcript_path:
        return Read([], saved)
    if event.host == GEMINI_CLI:
        from om_mcp.hosts.gemini_cli import GeminiOptions, GeminiState
        from om_mcp.hosts.gemini_cli import read_messages as read_gemini

        found, gemini = read_gemini(
            event.transcript_path, GeminiState.from_dict(previous), final=final, options=GeminiOptions(trim=trim)
        )
        return Read(found, IngestState(saved.source, 0, gemini.emitted_through, json.dumps(gemini.to_dict())))
    from om_mcp.hosts.claude_code import ConvertOptions, TranscriptState, read_messages

    before = TranscriptState.from_dict(previous)
    problems: list[str] = []
    found, state = read_messages(event.transcript_path, before, ConvertOptions(trim=trim), problems)
    return Read(
        found,
        IngestState(saved.source, state.offset, state.last_uuid, json.dumps(state.to_dict())),
        rescanned=state.rescans > before.rescans,
        problems=problems,
    )


def _read_lines_host(event: HookEvent, saved: IngestState, previous: Any, trim: Any) -> Read:
    from om_mcp.hosts import codex, cursor, vscode
    from om_mcp.hosts.jsonl import JsonlState

    before = JsonlState.from_dict(previous)
    if event.host == CODEX:
        found: list[dict[str, Any]] = []
        state = before
        if event.transcript_path:
            found, state = codex.read_messages(event.transcript_path, before, trim)
    else:
        found, state = (cursor if event.host == CURSOR else vscode).read_messages(event, before, trim)
    last = found[-1]["id"] if found else saved.last_id
    fingerprint = json.dumps(state.to_dict())
    return Read(found, IngestState(saved.source, state.offset, last, fingerprint), state.rescans > before.rescans)


def ingest(
    conn: sqlite3.Connection,
    settings: HookSettings,
    counter: TokenCounter,
    event: HookEvent,
    resource_id: str,
    project_root: str,
    *,
    final: bool = True,
    tool_output_chars: int = 2000,
) -> Ingested:
    """Append what is new in the session's transcript; mark the session ended on SessionEnd."""
    source = source_of(event)
    saved = local.read(conn, Transaction.ingest_state, source)
    first = read_transcript(event, saved, final, tool_output_chars)
    gate = gate_for(settings.privacy)
    rows = to_rows(first.messages, counter, settings.max_message_chars, gate)

    async def transaction(store: Transaction) -> Ingested:
        read, batch_rows = first, rows
        now_saved = await store.ingest_state(source)
        if (now_saved.offset, now_saved.last_id, now_saved.fingerprint) != (
            saved.offset,
            saved.last_id,
            saved.fingerprint,
        ):
            # another hook of this session got here first
            read = read_transcript(event, now_saved, final, tool_output_chars)
            batch_rows = to_rows(read.messages, counter, settings.max_message_chars, gate)
        thread = await store.get_thread(event.session_id)
        resource = thread.resource_id if thread is not None else resource_id
        key = record_key(settings.scope, event.session_id, resource)  # type: ignore[arg-type]
        done = await append.record(
            store,
            append.Batch(
                event.session_id,
                resource,
                key,
                batch_rows,
                counted_by=await store.tokenizer_id(counter.cache_key) if batch_rows else 0,
                thread_metadata={"host": event.host, "project": project_root},
                ends_session=event.ends_session,
                keep_going=True,
                count=counter.count_text,
            ),
        )
        await store.put_ingest_state(read.state)
        return Ingested(
            event.session_id,
            resource,
            key,
            appended=len(done.appended),
            skipped=done.skipped,
            refused=len(done.refused),
            forgotten=done.forgotten,
            rescanned=read.rescanned,
            state=done.state,
            problems=[*read.problems, *done.refused],
        )

    return local.write_gated(conn, gate, transaction)
