"""What a session starts with: the project's observation log, working
memory and continuation hints, read in one snapshot and cut to size by
`text.render_session_context`.

The log is the record's active groups plus its buffered chunks (observations
made in the background but not yet swapped in: the raw messages they cover are
in another session, which this one never sees). In thread scope a new session
has no log of its own, so the project's most recently observed session lends
its log and hints. With no log at all (no model yet), the project's recent
sessions are listed instead (`text.render_session_index`).
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime

from om_mcp.engine import user_layer
from om_mcp.engine.context.observations import prepare_observations_for_context
from om_mcp.engine.recorder.settings import RecorderSettings
from om_mcp.engine.recorder.text import (
    RECALL_WITH_IDS,
    SessionLine,
    preselect_observations,
    render_session_context,
    render_session_index,
)
from om_mcp.store import SessionSummary, Transaction, local, record_key, resource_key

SESSIONS_LISTED = 5

# Compacting the log and adding relative dates never lengthens an observation by much, so a
# first cut to twice the final size keeps every line the final cut would keep.
PRECUT = 2


def session_context(
    conn: sqlite3.Connection,
    settings: RecorderSettings,
    session_id: str,
    resource_id: str,
    max_chars: int,
    now: datetime | None = None,
) -> str:
    """The text a session starts with (SessionStart's additionalContext)."""

    async def snapshot(store: Transaction) -> tuple[str, str | None, tuple[str | None, str | None], list, str]:
        key = await _record_for(store, settings, session_id, resource_id)
        log = ""
        hints: tuple[str | None, str | None] = (None, None)
        if key is not None:
            texts = [g.text for g in await store.groups(key)]
            texts += [c.text for c in await store.chunks(key)]
            log = "\n\n".join(t.strip() for t in texts if t and t.strip())
            hints = await store.session_hints(key, session_id)
        memory = None
        if settings.working_memory == "resource":
            memory = await store.get_working_memory("resource", resource_id)
        elif settings.working_memory == "thread":
            memory = await store.get_working_memory("thread", session_id)
        recent = [] if log else await store.recent_sessions(resource_id, session_id, SESSIONS_LISTED)
        return log, memory, hints, recent, await _user_memory(store, settings, resource_id)

    log, memory, (task, response), recent, person = local.read(conn, snapshot)
    # Everything read here is neutralised by the renderer (text.py), the session's ids too.
    recall = RECALL_WITH_IDS.format(thread=json.dumps(session_id), resource=json.dumps(resource_id))
    if not log and not memory:
        return render_session_index([_line(s) for s in recent], recall, max_chars, user_memory=person)
    omitted = 0
    if len(log) > PRECUT * max_chars:  # a long log: cut it roughly first, then prepare what is left
        log, omitted = preselect_observations(log, PRECUT * max_chars)
    text = prepare_observations_for_context(log, now or datetime.now(UTC)) if log else ""
    return render_session_context(
        text,
        _memory_text(memory) if memory else None,
        task,
        response,
        max_chars,
        recall_line=recall,
        omitted=omitted,
        user_memory=person,
    )


async def _user_memory(store: Transaction, settings: RecorderSettings, resource_id: str) -> str:
    """The person layer's block (engine/user_layer.py); "" (and nothing read) when it is off."""
    if settings.user_tokens is None or resource_id == user_layer.USER_RESOURCE:
        return ""
    from om_mcp.engine.tokens import get_token_counter

    groups = await store.groups(resource_key(user_layer.USER_RESOURCE))
    memory = await store.get_working_memory("resource", user_layer.USER_RESOURCE)
    return user_layer.block(groups, memory, settings.user_tokens, get_token_counter().count_text)


def _line(session: SessionSummary) -> SessionLine:
    """A stored session as the index shows it (the renderer neutralises its text)."""
    return SessionLine(
        thread_id=session.thread_id,
        when=session.updated_at,
        messages=session.messages,
        title=session.title,
        first_prompt=session.first_prompt,
        last_prompt=session.last_prompt,
    )


async def _record_for(store: Transaction, settings: RecorderSettings, session_id: str, resource_id: str) -> str | None:
    if settings.scope == "resource":
        return record_key("resource", session_id, resource_id)
    return await store.lending_record(record_key("thread", session_id, resource_id), resource_id)


def _memory_text(stored: str) -> str:
    """Markdown as written; schema mode's JSON object as indented JSON."""
    try:
        value = json.loads(stored)
    except ValueError:
        return stored
    return json.dumps(value, ensure_ascii=False, indent=2) if isinstance(value, (dict, list)) else stored
