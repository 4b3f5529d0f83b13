"""Database rows to typed rows, for both backends: the column lists and the functions that read them."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from om_mcp.store.rows import BufferedReflection, Chunk, Event, Group, Message, Record, Thread

MESSAGE_COLUMNS = "m.seq, m.id, m.thread_id, m.resource_id, m.role, m.body, m.parts, m.created_at, m.metadata, m.tokens"
THREAD_COLUMNS = (
    "t.id, t.resource_id, t.title, t.title_pinned, t.metadata, t.created_at, t.updated_at, t.message_count,"
    " t.last_assistant_at, t.last_assistant_id, t.last_model, t.previous_model"
)
RECORD_COLUMNS = (
    "key, scope, resource_id, thread_id, generation, extracted, last_observed_at, last_reflection_at,"
    " reflection_blocked_at, last_buffered_at_tokens, observation_tokens, version, edits"
)
GROUP_COLUMNS = (
    "g.id, g.generation, g.position, g.kind, g.thread_id, g.first_seq, g.last_seq, g.first_message_id,"
    " g.last_message_id, g.text, g.tokens, g.observed_at, g.created_at, g.retired_by, g.retired_reason, g.replaced_by"
)
CHUNK_COLUMNS = (
    "id, cycle_id, thread_id, first_seq, last_seq, first_message_id, last_message_id, message_count,"
    " message_tokens, text, tokens, hints, last_message_at, created_at"
)
REFLECTION_COLUMNS = "cycle_id, generation, covered, input_tokens, text, tokens, hints"
EVENT_COLUMNS = "id, type, cycle_id, record_key, resource_id, thread_id, anchor_message_id, payload, created_at"


def now_iso() -> str:
    return datetime.now(UTC).isoformat()


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def message(row: Sequence[Any]) -> Message:
    seq, mid, thread_id, resource_id, role, body, parts, created_at, metadata, tokens = row
    return Message(
        seq=seq,
        id=mid,
        thread_id=thread_id,
        resource_id=resource_id,
        role=role,
        parts=json.loads(parts) if parts is not None else [{"type": "text", "text": body}],
        created_at=created_at,
        metadata=json.loads(metadata) if metadata else {},
        tokens=tokens,
    )


def stored_parts(parts: list[dict[str, Any]], body: str) -> str | None:
    """NULL for the common message (one text part equal to the body): its text is stored once."""
    return None if parts == [{"type": "text", "text": body}] else dumps(parts)


def thread(row: Sequence[Any]) -> Thread:
    (
        tid,
        resource_id,
        title,
        pinned,
        metadata,
        created,
        updated,
        count,
        last_assistant,
        last_assistant_id,
        last_model,
        previous_model,
    ) = row
    return Thread(
        id=tid,
        resource_id=resource_id,
        title=title,
        title_pinned=bool(pinned),
        metadata=json.loads(metadata) if metadata else {},
        created_at=created,
        updated_at=updated,
        message_count=count,
        last_assistant_at=last_assistant,
        last_assistant_id=last_assistant_id,
        last_model=last_model,
        previous_model=previous_model,
    )


def record(row: Sequence[Any], cursors: dict[str, int]) -> Record:
    (
        key,
        scope,
        resource_id,
        thread_id,
        generation,
        extracted,
        observed_at,
        reflected_at,
        blocked_at,
        buffered_at,
        observation_tokens,
        version,
        edits,
    ) = row
    return Record(
        key=key,
        scope=scope,
        resource_id=resource_id,
        thread_id=thread_id,
        generation=generation,
        extracted=json.loads(extracted or "{}"),
        last_observed_at=observed_at,
        last_reflection_at=reflected_at,
        reflection_blocked_at=blocked_at,
        last_buffered_at_tokens=buffered_at,
        observation_tokens=observation_tokens,
        version=version,
        edits=edits,
        cursors=cursors,
    )


def group(row: Sequence[Any]) -> Group:
    return Group(*row)


def chunk(row: Sequence[Any]) -> Chunk:
    values = list(row)
    values[11] = json.loads(values[11] or "{}")
    return Chunk(*values)


def buffered_reflection(row: Sequence[Any]) -> BufferedReflection:
    values = list(row)
    values[6] = json.loads(values[6] or "{}")
    return BufferedReflection(*values)


def event(row: Sequence[Any]) -> Event:
    values = list(row)
    values[7] = json.loads(values[7])
    return Event(*values)
