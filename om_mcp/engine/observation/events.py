"""Lifecycle events: their names, and how they leave a cycle.

An event is persisted (usually inside the cycle's own commit), then handed to
the listeners (the MCP adapter turns them into notifications), to the caller
collecting events for its request, and to the library hooks. A failing listener
or hook is logged and never affects the cycle. Payloads carry one line of error
text, never a traceback.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from om_mcp.config import HooksConfig
from om_mcp.logs import one_line
from om_mcp.privacy.redact import import_hook

if TYPE_CHECKING:
    from om_mcp.store import Store

log = logging.getLogger(__name__)


class EventType(StrEnum):
    OBSERVATION_START = "data-om-observation-start"
    OBSERVATION_END = "data-om-observation-end"
    OBSERVATION_FAILED = "data-om-observation-failed"
    # A cycle whose result came after what it read changed (a lost race, the user's edit): not a failure.
    OBSERVATION_SKIPPED = "data-om-observation-skipped"
    BUFFERING_START = "data-om-buffering-start"
    BUFFERING_END = "data-om-buffering-end"
    BUFFERING_FAILED = "data-om-buffering-failed"
    BUFFERING_SKIPPED = "data-om-buffering-skipped"
    ACTIVATION = "data-om-activation"
    THREAD_UPDATE = "data-om-thread-update"
    WORKING_MEMORY_UPDATE = "data-om-working-memory-update"
    TEMPORAL_GAP = "data-om-temporal-gap"
    REDACTION = "data-om-redaction"  # om_mcp.privacy.REDACTION_EVENT: secrets kept out of an append
    FORGET = "data-om-forget"  # the user forgot messages or observations (kinds and counts, never the text)
    EDIT = "data-om-edit"  # the user corrected an observation line
    RESTORE = "data-om-restore"  # the user made an earlier generation (or a retired line) active again
    REMEMBER = "data-om-remember"  # the user had a line remembered word for word (om-mcp remember, update_thread)


Event = dict[str, Any]
Listener = Callable[[Event], Awaitable[None]]
Hook = Callable[[dict[str, Any]], Any]

# Events emitted while a caller's block runs are also handed to it (the MCP
# adapter turns them into notifications for that request).
_collector: ContextVar[list[Event] | None] = ContextVar("om_event_collector", default=None)


@dataclass
class Hooks:
    """Library callbacks; each receives the event payload (on_extracted: the extracted values)."""

    on_observation_start: Hook | None = None
    on_observation_end: Hook | None = None
    on_reflection_start: Hook | None = None
    on_reflection_end: Hook | None = None
    on_debug_event: Hook | None = None
    on_extracted: Hook | None = None

    @classmethod
    def from_config(cls, config: HooksConfig, given: Hooks | None = None) -> Hooks:
        """Hooks passed in code win; the rest come from dotted paths in the config."""
        values = {}
        for spec in fields(cls):
            hook = getattr(given, spec.name, None) if given else None
            path = getattr(config, spec.name)
            values[spec.name] = (
                hook
                if hook is not None
                else (import_hook(path, f"observational_memory.hooks.{spec.name}") if path else None)
            )
        return cls(**values)


def user_event(kind: EventType, thread_id: str | None, resource_id: str | None, **fields: Any) -> Event:
    """An event of a change the user made (forget, edit, restore): kinds and counts, never text."""
    return {"type": kind, "thread_id": thread_id, "resource_id": resource_id, **fields}


def windows(limits: Any, share_token_budget: bool) -> dict[str, int]:
    """The `windows` object of a cycle-ending event: the thresholds now; the store adds the
    record's unobserved and observation tokens as they stand after the commit. With a
    shared budget the message threshold is max(shared_budget - observation tokens, it)."""
    out = {"message_threshold": limits.message_tokens, "observation_threshold": limits.observation_tokens}
    if share_token_budget:
        out["shared_budget"] = limits.message_tokens + limits.observation_tokens
    return out


class Events:
    def __init__(self, store: Store, hooks: Hooks):
        self.store = store
        self.hooks = hooks
        self.listeners: list[Listener] = []

    @contextmanager
    def collect(self) -> Iterator[list[Event]]:
        """Gather the events emitted (in this task and tasks it starts) during the block."""
        events: list[Event] = []
        token = _collector.set(events)
        try:
            yield events
        finally:
            _collector.reset(token)

    async def emit(self, events: list[Event], persisted: bool = False) -> None:
        """Persist (unless the cycle's commit already did) and tell everyone listening."""
        if not events:
            return
        if not persisted:
            await self.store.add_events(events)
        collected = _collector.get()
        if collected is not None:
            collected.extend(events)
        for event in events:
            await self._hooks_for(event)
            for listener in list(self.listeners):
                try:
                    await listener(event)
                except Exception as error:  # noqa: BLE001 - a listener must never break a cycle
                    log.debug("event listener failed: %s", one_line(error))

    async def _hooks_for(self, event: Event) -> None:
        kind, operation = event["type"], event.get("operation_type")
        role = "reflection" if operation == "reflection" else "observation"
        if kind in (EventType.OBSERVATION_START, EventType.BUFFERING_START):
            await self.call(f"on_{role}_start", event)
        elif kind in (
            EventType.OBSERVATION_END,
            EventType.BUFFERING_END,
            EventType.OBSERVATION_FAILED,
            EventType.BUFFERING_FAILED,
            EventType.OBSERVATION_SKIPPED,
            EventType.BUFFERING_SKIPPED,
        ) and not event.get("retrying"):
            await self.call(f"on_{role}_end", event)
        await self.call("on_debug_event", event)

    async def call(self, name: str, payload: dict[str, Any]) -> None:
        hook = getattr(self.hooks, name, None)
        if hook is None:
            return
        try:
            outcome = hook(payload)
            if inspect.isawaitable(outcome):
                await outcome
        except Exception as error:  # noqa: BLE001 - a hook must never break a cycle
            log.warning("hook %s raised: %s", name, one_line(error))
