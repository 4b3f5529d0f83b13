"""`Recorder`: the memory file opened for one short job, with no event loop.

    recorder = Recorder.open(db, config_file)     settings (cached), the file
    recorder.record(session, read)                 what a host read -> rows -> the append pipeline
                                                   -> the record's state, in ONE write; then a worker
                                                   started when work is due
    recorder.context(thread, resource, max_chars)  the text a session starts with

`read` is the host's reader bound to what it reads (`hosts/`): handed the position saved for the
session, it returns the messages after it (`om_mcp.reading.Reading`). It runs outside the write
lock; the write then checks that no other process of the same session moved the position
meanwhile (else it reads again, inside), appends through the engine's append pipeline
(`engine/append.py`, as `append_messages` does) and saves the new position. A session without a
`source` keeps no position: `om-mcp ingest` reads a file from its start, and the messages' ids
make a second run store nothing twice.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from om_mcp.engine import append
from om_mcp.engine.recorder.rows import to_rows
from om_mcp.engine.recorder.settings import RecorderSettings, load_settings
from om_mcp.engine.tokens import TokenCounter
from om_mcp.paths import CONFIG_FILE_ENV, data_dir
from om_mcp.reading import Position, Reading
from om_mcp.store import IngestState, RecordState, Transaction, gate_for, local, record_key

if TYPE_CHECKING:  # pydantic: never on a prompt
    from om_mcp.config import BudgetConfig

Read = Callable[[Position], Reading]


@dataclass(frozen=True)
class Session:
    """Whose messages these are: a host's session (the thread) in a project (the resource)."""

    thread_id: str
    resource_id: str  # the thread's resource when it is new (a stored thread keeps its own)
    metadata: dict[str, Any] = field(default_factory=dict)  # a new thread's metadata (host, project)
    source: str | None = None  # where the read position is kept ("<host>:<session id>"); None: kept nowhere


@dataclass
class Recorded:
    """What one record did."""

    thread_id: str
    resource_id: str
    record_key: str
    appended: int = 0
    skipped: int = 0  # stored already (the same id and content)
    refused: int = 0  # messages whose id is stored with other content (kept as stored)
    forgotten: int = 0  # messages a tombstone refused: they were forgotten (docs/forget.md)
    unreadable: int = 0  # lines of the transcript that were not JSON objects
    rescanned: bool = False
    more: bool = False  # the read stopped at its bound: the rest comes with the next one
    position: Position = field(default_factory=Position)  # where the next read starts
    state: RecordState | None = None  # the record after the append (None: no thread yet)
    worker: str | None = None  # a worker started: "started" or "alongside" (`spawn.py`)
    problems: list[str] = field(default_factory=list)  # one line each, for the hook's log


class Recorder:
    """One process's way into the memory file: the hook, `om-mcp ingest`, and the workers they start."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        settings: RecorderSettings,
        counter: TokenCounter,
        *,
        config_file: str | None = None,
        worker_idle_exit: float | None = 60.0,
        log_file: Path | None = None,
    ):
        self.conn = conn
        self.settings = settings
        self.counter = counter
        self.config_file = config_file
        self.worker_idle_exit = worker_idle_exit  # None: never start a worker
        self.log_file = log_file or data_dir() / "worker.log"
        self._gate = gate_for(settings.privacy)  # what the recorder writes passes it (store/gate.py)

    @classmethod
    def open(
        cls,
        db: str | None = None,
        config_file: str | None = None,
        env: Mapping[str, str] | None = None,
        *,
        settings: RecorderSettings | None = None,
        counter: TokenCounter | None = None,
        worker_idle_exit: float | None = 60.0,
    ) -> Recorder:
        """The file these flags and this environment name (its settings cached: `settings.py`), or the
        one `settings` names. The hook counts tokens by estimate; `counter` gives another count."""
        env = os.environ if env is None else env
        settings = settings or load_settings(db, config_file, env)
        conn = local.direct.open_database(settings.db_path)
        return cls(
            conn,
            settings,
            counter or TokenCounter.estimating(),
            config_file=config_file or env.get(CONFIG_FILE_ENV),
            worker_idle_exit=worker_idle_exit,
            log_file=data_dir(env) / "worker.log",
        )

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Recorder:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def record(
        self,
        session: Session,
        read: Read,
        *,
        ends_session: bool = False,
        starting: bool = False,
        start_worker: bool = True,
    ) -> Recorded:
        """Append what `read` finds after the session's saved position, and save the new one; mark the
        session over when it `ends_session`. Then start a worker when work is due (`starting`: the
        session begins, so a tail an earlier session left counts too)."""
        saved = self._saved(session.source)
        first = read(_position(saved))
        rows = self._rows(first)

        async def write(store: Transaction) -> Recorded:
            reading, batch = first, rows
            if session.source is not None:
                now = await store.ingest_state(session.source)
                if (now.offset, now.last_id, now.fingerprint) != (saved.offset, saved.last_id, saved.fingerprint):
                    reading = read(_position(now))  # another process of this session got here first
                    batch = self._rows(reading)
            thread = await store.get_thread(session.thread_id)
            resource = thread.resource_id if thread is not None else session.resource_id
            key = record_key(self.settings.scope, session.thread_id, resource)  # type: ignore[arg-type]
            done = await append.record(
                store,
                append.Batch(
                    session.thread_id,
                    resource,
                    key,
                    batch,
                    counted_by=await store.tokenizer_id(self.counter.cache_key) if batch else 0,
                    thread_metadata=session.metadata,
                    ends_session=ends_session,
                    keep_going=True,  # a message we cannot take is counted, never the end of the record
                    count=self.counter.count_text,
                ),
            )
            if session.source is not None:
                await store.put_ingest_state(_saved_as(session.source, reading.position))
            return Recorded(
                session.thread_id,
                resource,
                key,
                appended=len(done.appended),
                skipped=done.skipped,
                refused=len(done.refused),
                forgotten=done.forgotten,
                unreadable=reading.unreadable,
                rescanned=reading.rescanned,
                more=reading.more,
                position=reading.position,
                state=done.state,
                problems=[*reading.problems, *done.refused],
            )

        done = local.write_gated(self.conn, self._gate, write)
        if start_worker and self.worker_idle_exit is not None:
            try:
                done.worker = self.start_worker_if_due(done, ends_session=ends_session, starting=starting)
            except (OSError, sqlite3.Error) as error:  # what was recorded stays; the context still goes out
                done.problems.append(f"worker not started: {type(error).__name__}: {' '.join(str(error).split())}")
        return done

    def start_worker_if_due(self, done: Recorded, *, ends_session: bool, starting: bool) -> str | None:
        """Start `om-mcp worker` when the record has work due and nobody drains (`spawn.py`)."""
        from om_mcp.engine.recorder.spawn import start_worker_if_due

        return start_worker_if_due(
            self.conn,
            self.settings,
            done.record_key,
            done.thread_id,
            done.state,
            ends_session=ends_session,
            starting=starting,
            config_file=self.config_file,
            idle_exit=self.worker_idle_exit or 60.0,
            log_file=self.log_file,
        )

    def spend_paused(self, budget: BudgetConfig) -> str | None:
        """Why observation waits for a spend cap (which cap, until when), or None: what every process's
        status says, read from the file's spend (`engine/budget.py`)."""
        if not budget.any:
            return None
        from om_mcp.engine.budget import Budget

        async def state(store: Transaction) -> str | None:
            return (await Budget(store, budget).state()).reason

        return local.read(self.conn, state)

    def context(self, thread_id: str, resource_id: str, max_chars: int, now: datetime | None = None) -> str:
        """The text a session of this thread starts with: its memory, cut to `max_chars` ("": nothing)."""
        from om_mcp.engine.recorder.context import session_context

        return session_context(self.conn, self.settings, thread_id, resource_id, max_chars, now)

    def _saved(self, source: str | None) -> IngestState:
        if source is None:
            return IngestState("")
        return local.read(self.conn, Transaction.ingest_state, source)

    def _rows(self, reading: Reading) -> list:
        return to_rows(reading.messages, self.counter, self.settings.max_message_chars, self._gate)


def _position(saved: IngestState) -> Position:
    return Position(saved.offset, saved.last_id, json.loads(saved.fingerprint) if saved.fingerprint else None)


def _saved_as(source: str, position: Position) -> IngestState:
    return IngestState(
        source, position.offset, position.last_id, json.dumps(position.state) if position.state is not None else None
    )
