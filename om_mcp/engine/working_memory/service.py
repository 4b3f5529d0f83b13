"""Working memory against the store: read, update atomically, seed a new thread's."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from om_mcp.config import WorkingMemoryConfig
from om_mcp.engine import intake
from om_mcp.engine.errors import InputError, NotFound
from om_mcp.engine.results import WorkingMemoryOut
from om_mcp.engine.working_memory.render import render_for_context
from om_mcp.engine.working_memory.update import WorkingMemoryError, apply_update, initial_value, is_empty
from om_mcp.store import ContextRead, Scope, Store

Seed = tuple[Scope, Callable[[str | None], str | None]]


def decode(mode: str, stored: str | None) -> str | dict | None:
    if stored is None or mode != "schema":
        return stored
    try:
        return json.loads(stored)
    except ValueError:
        return stored


def encode(value: str | dict) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


class WorkingMemory:
    def __init__(self, store: Store, config: WorkingMemoryConfig):
        self.store = store
        self.config = config

    def location(self, thread_id: str, resource_id: str) -> tuple[Scope, str]:
        scope = self.config.scope
        return scope, (resource_id if scope == "resource" else thread_id)

    def value(self, stored: str | None) -> str | dict:
        """The value the agent sees: what is stored, else the starting value (the template)."""
        value = decode(self.config.mode, stored)
        return value if value is not None else initial_value(self.config)

    async def stored(self, scope: Scope, key: str) -> str | dict | None:
        return decode(self.config.mode, await self.store.get_working_memory(scope, key))

    def context_location(self, thread_id: str, resource_id: str) -> tuple[str, str] | None:
        """Where the context read finds the working memory, as (table, key); None when it is off."""
        if not self.config.enabled:
            return None
        scope, key = self.location(thread_id, resource_id)
        return ("resources" if scope == "resource" else "threads"), key

    async def for_context(self, resource_id: str, read: ContextRead | None) -> tuple[str | dict | None, str]:
        """The value a context shows, and its rendered block: what the context read found; for a
        thread not stored yet (no read), the resource's memory, as a thread's cannot exist yet."""
        if not self.config.enabled:
            return None, ""
        if read is not None:
            stored = read.working_memory
        elif self.config.scope == "resource":
            stored = await self.store.get_working_memory("resource", resource_id)
        else:
            stored = None
        memory = self.value(stored)
        return memory, render_for_context(self.config, memory)

    def _require(self) -> None:
        if not self.config.enabled:
            raise InputError("working memory is disabled in the configuration", field="working_memory.enabled")

    async def get(self, thread_id: str, resource_id: str) -> WorkingMemoryOut:
        self._require()
        scope, key = self.location(thread_id, resource_id)
        return self._out(thread_id, resource_id, self.value(await self.store.get_working_memory(scope, key)))

    async def update(
        self, thread_id: str, resource_id: str, memory: Any, *, exists: bool, read_only: bool | None = None
    ) -> WorkingMemoryOut:
        self._require()
        intake.check_text(memory, "memory", nul=True)
        config = self.config
        if read_only and not config.read_only:
            config = config.model_copy(update={"read_only": True})
        scope, key = self.location(thread_id, resource_id)
        if scope == "thread" and not exists:
            raise NotFound(f"unknown thread {thread_id!r}: append a message first", field="thread_id")
        outcome: dict[str, Any] = {}

        def update(current: str | None) -> str | None:
            result = apply_update(config, decode(config.mode, current), memory)
            outcome["result"] = result
            return encode(result.value) if result.changed else None

        try:
            await self.store.update_working_memory(scope, key, update)
        except WorkingMemoryError as error:
            raise InputError(str(error), field=error.field) from None
        result = outcome["result"]
        return self._out(thread_id, resource_id, result.value, updated=result.changed, notice=result.notice)

    async def merge(
        self, thread_id: str, resource_id: str, partial: dict[str, Any], *, exists: bool
    ) -> WorkingMemoryOut:
        """Merge a partial object into resource-scoped schema working memory, atomically
        (one write-locked transaction, so concurrent merges of different fields all survive)."""
        if self.config.mode != "schema" or self.config.scope != "resource":
            raise InputError("merge_working_memory needs schema mode and resource scope", field="working_memory")
        return await self.update(thread_id, resource_id, partial, exists=exists)

    def seed(self, initial: Any) -> Seed | None:
        """The working memory a new thread brings in its metadata (`metadata.working_memory`), as a store seed."""
        config = self.config
        if initial is None or not config.enabled:
            return None
        try:
            value = apply_update(config.model_copy(update={"read_only": False}), None, initial).value
        except WorkingMemoryError as error:
            raise InputError(
                f"thread_metadata.working_memory: {error}", field="thread_metadata.working_memory"
            ) from None
        encoded = encode(value)

        def seed(stored: str | None) -> str | None:
            # A new thread never erases what the user's memory already holds.
            if stored is not None and not is_empty(config, decode(config.mode, stored)):
                return None
            return encoded

        return config.scope, seed

    def _out(self, thread_id: str, resource_id: str, memory: Any, **extra: Any) -> WorkingMemoryOut:
        return WorkingMemoryOut(
            scope=self.config.scope,
            mode=self.config.mode,
            thread_id=thread_id,
            resource_id=resource_id,
            memory=memory,
            read_only=self.config.read_only,
            **extra,
        )
