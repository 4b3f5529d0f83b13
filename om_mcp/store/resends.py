"""Messages sent with neither an id nor a time: recognising a re-send, and naming the rest.

A message with an id, or with a time, has a stable identity and is deduplicated by id. One with neither (the
common `user=`/`assistant=` turn) could be a re-send of the exchange just stored, or a new message that happens
to repeat old words ("yes", "Thanks!"). Hashing the words alone would silently drop the second kind, so:

* a leading run of such messages that repeats the thread's last messages word for word is a re-send;
* every other one gets an id chained to the message before it, so the same history yields the same id
  (a retried append after a lost acknowledgement is still recognised) and repeated words never collide.

Temporal-gap markers are written by the engine before a user message; they follow their message's fate.
Both store backends call `settle_against_tail`, inside the append transaction, with the thread's stored tail
(`tail_size` of its newest messages), then `new_by_id` with the stored messages of the batch's ids.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from datetime import datetime

from om_mcp.store.errors import StoreError
from om_mcp.store.rows import Message, NewMessage

GAP_KIND = "temporal-gap"


def is_gap_marker(message: Message | NewMessage) -> bool:
    return message.role == "system" and message.metadata.get("om_kind") == GAP_KIND


def untimed(message: NewMessage) -> bool:
    return not message.id_given and not message.created_at_given


def leading_untimed(messages: list[NewMessage]) -> int:
    """How many stored messages `settle` needs to see: the leading run of untimed messages, markers aside."""
    count = 0
    for message in messages:
        if is_gap_marker(message):
            continue
        if not untimed(message):
            break
        count += 1
    return count


def tail_size(messages: list[NewMessage]) -> int:
    """How many of the thread's newest stored messages `settle_against_tail` needs (0: none)."""
    if not any(untimed(m) for m in messages):
        return 0
    # A marker precedes at most one message, so twice the run always reaches far enough back.
    return 2 * leading_untimed(messages) + 1


def settle_against_tail(stored: list[Message], messages: list[NewMessage]) -> tuple[list[NewMessage], int]:
    """`settle` given the thread's newest stored messages, oldest first, markers included."""
    tail = [m for m in stored if not is_gap_marker(m)]
    return settle(tail, stored[-1].id if stored else None, messages)


def new_by_id(thread_id: str, messages: list[NewMessage], stored: dict[str, Message]) -> tuple[list[NewMessage], int]:
    """(the messages not stored yet; how many were re-sends), given the stored messages of the batch's ids.
    A re-send must match what is stored; an id with other content is refused, naming the message."""
    seen: dict[str, NewMessage] = {}
    fresh: list[NewMessage] = []
    skipped = 0
    for index, new in enumerate(messages):
        earlier = seen.get(new.id)
        if earlier is not None:
            same = (earlier.role, earlier.parts, earlier.metadata) == (new.role, new.parts, new.metadata) and (
                not new.created_at_given or earlier.created_at == new.created_at
            )
            if not same:
                raise StoreError(
                    f"messages[{index}].id {new.id!r} appears twice in the batch with different content",
                    field=f"messages[{index}].id",
                )
            skipped += 1
            continue
        seen[new.id] = new
        if new.id in stored:
            if not _same_message(stored[new.id], new):
                raise StoreError(
                    f"messages[{index}].id {new.id!r} already exists in thread {thread_id!r} with different"
                    " content; message ids are immutable",
                    field=f"messages[{index}].id",
                )
            skipped += 1
            continue
        fresh.append(new)
    return fresh, skipped


def settle(tail: list[Message], last_id: str | None, messages: list[NewMessage]) -> tuple[list[NewMessage], int]:
    """(the messages to store, with final ids; how many were re-sends).

    `tail` is the thread's last stored messages, oldest first, markers excluded, at least `leading_untimed`
    of them when the thread has that many; `last_id` is the id of the thread's last stored message."""
    if not any(untimed(m) for m in messages):
        return messages, 0
    core = [m for m in messages if not is_gap_marker(m)]
    run = leading_untimed(messages)
    resent = _overlap(tail, core[:run])
    skipped = {id(m) for m in core[:resent]}
    out: list[NewMessage] = []
    previous = last_id
    pending_marker: NewMessage | None = None
    for message in messages:
        if is_gap_marker(message):
            pending_marker = message
            continue
        if id(message) in skipped:
            pending_marker = None
            continue
        if untimed(message):
            message = replace(message, id=chained_id(previous, message))
        if pending_marker is not None:
            out.append(replace(pending_marker, id=f"{message.id}~gap"))
            pending_marker = None
        out.append(message)
        previous = message.id
    return out, resent


def chained_id(previous: str | None, message: NewMessage) -> str:
    payload = json.dumps([previous, message.role, message.parts, message.metadata], sort_keys=True, ensure_ascii=False)
    return "m-" + hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()[:20]


def _overlap(tail: list[Message], run: list[NewMessage]) -> int:
    """The longest prefix of `run` equal to the end of `tail`."""
    for size in range(min(len(tail), len(run)), 0, -1):
        if all(_same_words(stored, new) for stored, new in zip(tail[-size:], run[:size])):
            return size
    return 0


def _same_words(stored: Message, new: NewMessage) -> bool:
    return (stored.role, stored.parts, stored.metadata) == (new.role, new.parts, new.metadata)


def _same_message(stored: Message, new: NewMessage) -> bool:
    if not _same_words(stored, new):
        return False
    return not new.created_at_given or (
        datetime.fromisoformat(stored.created_at) == datetime.fromisoformat(new.created_at)
    )
