"""What SessionStart gives the agent: the project's observation log, working
memory and continuation hints, read in one snapshot and cut to size by
`hosts.context.render_session_context`.

The log is the record's active groups plus its buffered chunks (observations
made in the background but not yet swapped in: the raw messages they cover are
in another session, which this one never sees). In thread scope a new session
has no log of its own, so the project's most recently observed session lends
its log and hints. With no log at all (no model yet), the project's recent
sessions are listed instead (`hosts.context.render_session_index`).
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime

from om_mcp.engine.context.escape import neutralise
from om_mcp.engine.context.observations import prepare_observations_for_context
from om_mcp.hook import db
from om_mcp.hook.settings import HookSettings
from om_mcp.hosts.context import (
    RECALL_WITH_IDS,
    SessionLine,
    preselect_observations,
    render_session_context,
    render_session_index,
)
from om_mcp.store.keys import record_key
from om_mcp.store.sqlite import observations, threads
from om_mcp.store.sqlite.session_index import SessionSummary, recent_sessions

SESSIONS_LISTED = 5

# Compacting the log and adding relative dates never lengthens an observation by much, so a
# first cut to twice the final size keeps every line the final cut would keep.
PRECUT = 2


def session_context(
    conn: sqlite3.Connection,
    settings: HookSettings,
    session_id: str,
    resource_id: str,
    max_chars: int,
    now: datetime | None = None,
) -> str:
    """The additionalContext text; "" when the project has no memory yet."""

    def snapshot(conn: sqlite3.Connection) -> tuple[str, str | None, tuple[str | None, str | None], list]:
        key = _record_for(conn, settings, session_id, resource_id)
        log = ""
        hints: tuple[str | None, str | None] = (None, None)
        if key is not None:
            texts = [g.text for g in observations.groups(conn, key)] + [c.text for c in observations.chunks(conn, key)]
            log = "\n\n".join(t.strip() for t in texts if t and t.strip())
            hints = _hints(conn, key, session_id)
        memory = None
        if settings.working_memory == "resource":
            memory = threads.get_working_memory(conn, "resource", resource_id)
        elif settings.working_memory == "thread":
            memory = threads.get_working_memory(conn, "thread", session_id)
        sessions = [] if log else recent_sessions(conn, resource_id, session_id, SESSIONS_LISTED)
        return log, memory, hints, sessions

    log, memory, (task, response), sessions = db.read(conn, snapshot)
    # The ids are the session's and the project folder's: anyone's text, like the rest.
    recall = neutralise(RECALL_WITH_IDS.format(thread=json.dumps(session_id), resource=json.dumps(resource_id)))
    if not log and not memory:
        return render_session_index([_line(s) for s in sessions], recall, max_chars)
    omitted = 0
    if len(log) > PRECUT * max_chars:  # a long log: cut it roughly first, then prepare what is left
        log, omitted = preselect_observations(log, PRECUT * max_chars)
    text = prepare_observations_for_context(log, now or datetime.now(UTC)) if log else ""
    return render_session_context(
        neutralise(text),
        neutralise(_memory_text(memory)) if memory else None,
        neutralise(task) if task else None,
        neutralise(response) if response else None,
        max_chars,
        recall_line=recall,
        omitted=omitted,
    )


def _line(session: SessionSummary) -> SessionLine:
    """A stored session as the index shows it; its text is neutralised like the log's."""
    return SessionLine(
        thread_id=session.thread_id,
        when=session.updated_at,
        messages=session.messages,
        title=neutralise(session.title) if session.title else None,
        first_prompt=neutralise(session.first_prompt) if session.first_prompt else None,
        last_prompt=neutralise(session.last_prompt) if session.last_prompt else None,
    )


def _record_for(conn: sqlite3.Connection, settings: HookSettings, session_id: str, resource_id: str) -> str | None:
    if settings.scope == "resource":
        return record_key("resource", session_id, resource_id)
    own = record_key("thread", session_id, resource_id)
    row = conn.execute(
        "SELECT r.key FROM om_records r WHERE r.resource_id = ? AND r.scope = 'thread'"
        " AND (r.observation_tokens > 0 OR EXISTS (SELECT 1 FROM om_chunks c WHERE c.record_key = r.key))"
        " ORDER BY r.key = ? DESC, COALESCE(r.last_observed_at, '') DESC, r.updated_at DESC LIMIT 1",
        (resource_id, own),
    ).fetchone()
    return row[0] if row else None


def _hints(conn: sqlite3.Connection, key: str, session_id: str) -> tuple[str | None, str | None]:
    """This session's hints, else those of the record's most recently active session."""
    row = conn.execute(
        "SELECT c.current_task, c.suggested_response FROM om_cursors c JOIN threads t ON t.id = c.thread_id"
        " WHERE c.record_key = ? AND (c.current_task IS NOT NULL OR c.suggested_response IS NOT NULL)"
        " ORDER BY c.thread_id = ? DESC, t.updated_at DESC LIMIT 1",
        (key, session_id),
    ).fetchone()
    return (row[0], row[1]) if row else (None, None)


def _memory_text(stored: str) -> str:
    """Markdown as written; schema mode's JSON object as indented JSON."""
    try:
        value = json.loads(stored)
    except ValueError:
        return stored
    return json.dumps(value, ensure_ascii=False, indent=2) if isinstance(value, (dict, list)) else stored
