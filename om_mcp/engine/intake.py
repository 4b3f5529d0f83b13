"""Requests on their way in: ids checked and resolved to a thread and resource; messages
validated (errors name the field), given ids, counted, made searchable, and marked with
pauses. Bad input changes nothing.

Every way a message comes in (an MCP client's `append_messages`, an import, a host hook)
ends in `message_row`, so what is stored is the same. Importing this module loads no
pydantic and no event loop (the hook process uses it); `prepare`'s validation does, when
it runs."""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import TYPE_CHECKING, Any, TypeVar

from om_mcp.engine.errors import InputError, NotFound
from om_mcp.engine.prompts.agent import temporal_gap_text
from om_mcp.engine.text import index_text
from om_mcp.engine.tokens import TokenCounter
from om_mcp.privacy import HookFailed, redaction_event
from om_mcp.store import Access, Message, NewMessage, Store, Thread, gate_for
from om_mcp.store.resends import GAP_KIND as TEMPORAL_GAP_KIND  # the store's name for it (no zoneinfo to load)

if TYPE_CHECKING:
    from pydantic import TypeAdapter

    from om_mcp.config import Config
    from om_mcp.messages import MessageIn

T = TypeVar("T")
TEMPORAL_GAP = timedelta(minutes=10)
MAX_ID_CHARS = 200
MAX_TITLE_CHARS = 500
MAX_METADATA_CHARS = 16_000
_BAD_ID = re.compile(r"[\x00-\x1f\x7f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
TAKEN = (
    "{id!r} is already in use on this server (thread ids are shared by everyone who uses it);"
    " choose another id, for example one that starts with your resource"
)


def check_id(value: Any, field: str) -> str:
    """Ids are plain one-line text: no control characters, no broken Unicode."""
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"{field} must be a non-empty string", field=field)
    if len(value) > MAX_ID_CHARS:
        raise InputError(f"{field} is {len(value)} characters; the limit is {MAX_ID_CHARS}", field=field)
    if _BAD_ID.search(value) or _SURROGATE.search(value):
        raise InputError(f"{field} contains control characters or invalid Unicode", field=field)
    return value


def unknown_thread(thread_id: str, field: str = "thread_id") -> NotFound:
    """What a thread nobody holds gets, and so what another tenant's thread gets too."""
    return NotFound(f"unknown thread {thread_id!r}", field=field)


def check_access(access: Access, resource_id: str, field: str = "resource_id") -> str:
    """`resource_id`, or refused when the caller's access does not grant it (the same words whether
    the resource exists or not)."""
    if not access.allows(resource_id):
        raise InputError(
            f"resource {resource_id!r} is not allowed for this token (it may use: {access.describe()})", field=field
        )
    return resource_id


async def resolve(
    store: Store,
    default_resource_id: str,
    thread_id: str,
    resource_id: str | None,
    access: Access,
    *,
    creates: bool = False,
) -> tuple[str, Thread | None]:
    """A request's resource id and its thread (None before the thread's first message), within the
    caller's `access`. An omitted resource id means the thread's own resource, else the one resource
    the access is bound to, else the default. A thread of a resource outside the access is answered
    as one nobody holds; `creates` (the call would make the thread): its id is said to be in use,
    which is all a caller may learn of it (thread ids are one space for the whole server)."""
    check_id(thread_id, "thread_id")
    thread = await store.get_thread(thread_id)
    if thread is not None and not access.allows(thread.resource_id):
        if creates:
            raise InputError(TAKEN.format(id=thread_id), field="thread_id")
        raise unknown_thread(thread_id)
    if resource_id is None:
        if thread is not None:
            return thread.resource_id, thread
        return check_access(access, access.only or default_resource_id), None
    check_id(resource_id, "resource_id")
    check_access(access, resource_id)
    if thread is not None and thread.resource_id != resource_id:
        raise InputError(
            f"thread {thread_id!r} belongs to resource {thread.resource_id!r}, not {resource_id!r}", field="resource_id"
        )
    return resource_id, thread


def check_text(value: Any, field: str, *, nul: bool = False) -> None:
    """No lone surrogates anywhere (they cannot be stored as UTF-8), and with `nul` no NUL
    character (C readers of the stored text stop at it); say where."""
    if isinstance(value, str):
        if _SURROGATE.search(value):
            raise InputError(f"{field} contains invalid Unicode (a lone surrogate)", field=field)
        if nul and "\x00" in value:
            raise InputError(f"{field} contains a NUL character (\\u0000): remove it", field=field)
    elif isinstance(value, dict):
        for key, item in value.items():
            check_text(key, field, nul=nul)
            check_text(item, f"{field}.{key}", nul=nul)
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            check_text(item, f"{field}[{index}]", nul=nul)


def check_title(value: Any, field: str) -> str:
    """A title is one line of text: a string, no control characters, at most MAX_TITLE_CHARS."""
    if not isinstance(value, str):
        raise InputError(f"{field} must be a string", field=field)
    if len(value) > MAX_TITLE_CHARS:
        raise InputError(f"{field} is {len(value)} characters; the limit is {MAX_TITLE_CHARS}", field=field)
    if _BAD_ID.search(value) or _SURROGATE.search(value):
        raise InputError(f"{field} must be one line of text: no control characters or invalid Unicode", field=field)
    return value


def check_metadata(value: Any, field: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InputError(f"{field} must be an object", field=field)
    check_text(value, field, nul=True)
    size = len(json.dumps(value, ensure_ascii=False, default=str))
    if size > MAX_METADATA_CHARS:
        raise InputError(f"{field} is {size} characters of JSON; the limit is {MAX_METADATA_CHARS}", field=field)
    return value


def check_thread_metadata(value: Any) -> dict[str, Any]:
    metadata = check_metadata(value, "thread_metadata")
    if metadata.get("title") is not None:
        check_title(metadata["title"], "thread_metadata.title")
    return metadata


def scrubbed(config: Config, value: T) -> T:
    """A value that is not a message (a title, thread metadata, working memory, a line to remember, an
    instruction for a model, what an import brings besides messages), as the gate's scan leaves it
    (`store/gate.py`): scanned here, before it is echoed back or sent to a model, and again on its
    way into a column."""
    return gate_for(config.privacy.settings()).value(value)[0]


@cache
def _validator() -> TypeAdapter[list[MessageIn]]:
    from pydantic import TypeAdapter

    from om_mcp.messages import MessageIn

    return TypeAdapter(list[MessageIn])


def prepare(config: Config, counter: TokenCounter, messages: list[Any]) -> list[NewMessage]:
    """Validate a batch and turn it into rows to insert."""
    from pydantic import ValidationError

    from om_mcp.messages import MessageIn, derived_id

    if not isinstance(messages, list) or not messages:
        raise InputError("messages must be a non-empty list", field="messages")
    if len(messages) > config.max_batch_messages:
        raise InputError(
            f"messages holds {len(messages)} items; the limit per call is {config.max_batch_messages}", field="messages"
        )
    raw = [m.model_dump() if isinstance(m, MessageIn) else m for m in messages]
    check_text(raw, "messages")
    try:
        parsed = _validator().validate_python(raw)
    except ValidationError as error:
        # A union (string or parts) reports each branch; the deepest error is the real one.
        first = max(error.errors(), key=lambda e: len(e["loc"]))
        where = "messages" + "".join(
            f"[{p}]" if isinstance(p, int) else f".{p}"
            for p in first["loc"]
            if not str(p).startswith(("str", "list[", "tagged-union"))
        )
        raise InputError(f"{where}: {first['msg']}", field=where) from None
    now = datetime.now(UTC)
    seen: Counter[str] = Counter()
    gate = gate_for(config.privacy.settings())
    out = []
    for index, message in enumerate(parsed):
        metadata = check_metadata(message.metadata, f"messages[{index}].metadata")
        # Before anything is derived from the text (its id, its size, its index): secrets never get in.
        try:
            clean, receipt = gate.message(message.role, message.parts(), metadata)
        except HookFailed as error:
            raise InputError(str(error), field=f"messages[{index}]") from None
        parts, metadata = clean.parts, clean.metadata
        size = len(json.dumps(parts, ensure_ascii=False))
        if size > config.max_message_chars:
            raise InputError(
                f"messages[{index}] is {size} characters; the limit is {config.max_message_chars}",
                field=f"messages[{index}].content",
            )
        if message.id is not None:
            message_id = check_id(message.id, f"messages[{index}].id")
        else:
            base = derived_id(message.role, parts, message.created_at, 0)
            message_id = derived_id(message.role, parts, message.created_at, seen[base])
            seen[base] += 1
        given, created = message.id is not None, message.created_at
        out.append(
            message_row(
                counter,
                message_id,
                message.role,
                parts,
                metadata,
                created,
                now,
                id_given=given,
                redactions=clean.counts,
                receipt=receipt,
            )
        )
    return out


def message_row(
    counter: TokenCounter,
    message_id: str,
    role: str,
    parts: list[dict[str, Any]],
    metadata: dict[str, Any],
    created_at: datetime | None,
    now: datetime,
    *,
    id_given: bool,
    redactions: dict[str, int] | None = None,
    receipt: Any = None,
) -> NewMessage:
    """The row stored for a valid message: its time (`now` when it has none), its searchable
    body, its token counts (whole and per part)."""
    tokens, counts = counter.count_message({"role": role, "parts": parts})
    return NewMessage(
        id=message_id,
        role=role,
        parts=parts,
        created_at=(created_at or now).isoformat(),
        metadata=metadata,
        body=index_text(parts, metadata),
        tokens=tokens,
        part_tokens=counts["parts"],
        observable=role != "system",
        created_at_given=created_at is not None,
        id_given=id_given,
        redactions=dict(redactions or {}),
        receipt=receipt,  # the gate's, when `parts` and `metadata` are what its scan left
    )


# Fields a part may carry (om_mcp/messages.py's part models).
_PART_FIELDS = {
    "text": ("type", "text"),
    "reasoning": ("type", "text"),
    "tool-call": ("type", "tool_name", "args", "tool_call_id"),
    "tool-result": ("type", "tool_name", "result", "tool_call_id", "is_error"),
    "image": ("type", "mime_type", "name", "data", "url", "width", "height"),
    "file": ("type", "mime_type", "name", "data", "url", "width", "height"),
}


def normalise_parts(content: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Parts that are valid by construction (a host converter's), as `MessageIn.parts()` stores
    them: no None fields, `is_error` only when true, no field a part does not carry."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    out = []
    for part in content:
        kind = part.get("type")
        fields = _PART_FIELDS.get(kind, tuple(part)) if isinstance(kind, str) else tuple(part)
        clean = {k: part[k] for k in fields if part.get(k) is not None}
        if clean.get("type") == "text":
            clean.setdefault("text", "")
        if clean.get("type") == "tool-result" and not clean.get("is_error"):
            clean.pop("is_error", None)
        out.append(clean)
    return out


def with_gap_markers(counter: TokenCounter, previous: str | None, messages: list[NewMessage]) -> list[NewMessage]:
    """A persisted reminder before a user message that comes 10+ minutes after the one
    before it, so the Observer sees the pause."""
    last = datetime.fromisoformat(previous) if previous else None
    out = []
    for message in messages:
        created = datetime.fromisoformat(message.created_at)
        if message.role == "user" and last is not None and created - last >= TEMPORAL_GAP:
            text = temporal_gap_text(created - last)
            parts = [{"type": "text", "text": text}]
            tokens, cache = counter.count_message({"role": "system", "parts": parts})
            out.append(
                NewMessage(
                    id=f"{message.id}~gap",
                    role="system",
                    parts=parts,
                    created_at=message.created_at,
                    metadata={"om_kind": TEMPORAL_GAP_KIND},
                    body="",
                    tokens=tokens,
                    part_tokens=cache["parts"],
                    observable=True,
                    created_at_given=message.created_at_given,
                    id_given=message.id_given,
                )
            )
        out.append(message)
        last = max(last, created) if last else created
    return out


async def rows(
    config: Config, counter: TokenCounter, store: Store, thread_id: str, messages: list[Any]
) -> list[NewMessage]:
    """A batch as rows to append to the thread, with pause markers when temporal markers are on."""
    prepared = prepare(config, counter, messages)
    if config.observational_memory.temporal_markers:
        prepared = with_gap_markers(counter, await store.last_message_time(thread_id), prepared)
    return prepared


def redaction_events(thread_id: str, resource_id: str, redactions: dict[str, int]) -> list[dict[str, Any]]:
    """The event an append that kept secrets out records: per rule, how many, never the text."""
    return [redaction_event(thread_id, resource_id, redactions)] if redactions else []


def is_gap_marker(message: Message) -> bool:
    return message.metadata.get("om_kind") == TEMPORAL_GAP_KIND


def gap_events(thread_id: str, resource_id: str, appended: list[Message]) -> list[dict[str, Any]]:
    """A TEMPORAL_GAP event for each pause marker an append stored."""
    from om_mcp.engine.observation.events import EventType  # the config's hooks: pydantic

    return [
        {
            "type": EventType.TEMPORAL_GAP,
            "thread_id": thread_id,
            "resource_id": resource_id,
            "message_id": m.id,
            "text": m.parts[0]["text"],
            "created_at": m.created_at,
        }
        for m in appended
        if is_gap_marker(m)
    ]


async def recount(store: Store, counter: TokenCounter, counted_by: int, after_seq: int = 0) -> int:
    """Recount the messages another tokenizer counted, off the event loop; returns how many."""
    import anyio.to_thread

    done = 0
    while True:
        stale = await store.stale_token_counts(counted_by, after_seq=after_seq)
        if not stale:
            return done
        counts = []
        for row in stale:
            tokens, cache = await anyio.to_thread.run_sync(counter.count_message, row)
            counts.append((row["seq"], tokens, cache["parts"]))
        await store.set_token_counts(counted_by, counts)
        done += len(counts)
