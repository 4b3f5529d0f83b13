"""`Memory`: the engine's public face, usable as a plain Python library.

    memory = await Memory.open(load_config())
    await memory.append_messages("t1", [{"role": "user", "content": "hi"}])
    context = await memory.get_context("t1")

It validates input, counts tokens, stores, and composes the context an agent
sees. It knows nothing of MCP: the server is a thin adapter over it.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from contextlib import asynccontextmanager
from datetime import datetime, timedelta, timezone
from typing import Any, AsyncIterator, Literal

import anyio

from pydantic import TypeAdapter, ValidationError

from om_mcp.config import Config
from om_mcp.engine import working_memory as wm
from om_mcp.engine.context import build_blocks, fit_groups, render_groups
from om_mcp.engine.errors import InputError, NotFound
from om_mcp.engine.messages import MessageIn
from om_mcp.engine.observational import CycleOutcome, Hooks, ObservationalMemory
from om_mcp.engine.prompts import temporal_gap_text
from om_mcp.engine.recall import fit_to_budget, part_matches, render_low, render_part
from om_mcp.engine.results import (
    AppendOutcome, ContextOut, DeleteOut, MessageOut, RecallOut, Status,
    ThreadOut, WorkingMemoryOut,
)
from om_mcp.engine.retrieval import Retrieval
from om_mcp.engine.search import index_text, parse_query
from om_mcp.engine.tokens import TokenCounter, get_token_counter
from om_mcp.engine.worker import Worker
from om_mcp.models import ModelClient
from om_mcp.models.litellm_client import load_litellm
from om_mcp.store import Message, Store, Thread, Transaction

log = logging.getLogger(__name__)

_MESSAGES = TypeAdapter(list[MessageIn])
MAX_RECALL_LIMIT = 20
MAX_SEARCH_LIMIT = 50
MAX_THREADS_LIMIT = 50
TEMPORAL_GAP = timedelta(minutes=10)
WARM_UP_DELAY_SECONDS = 1.0


class Memory:
    """Long-term memory over one SQLite database."""

    def __init__(
        self,
        store: Store,
        config: Config,
        counter: TokenCounter | None = None,
        *,
        client: ModelClient | None = None,
        hooks: Hooks | None = None,
    ):
        self.store = store
        self.config = config
        self.counter = counter or get_token_counter()
        self.worker = Worker()
        self.om = ObservationalMemory(store, config, self.counter, client=client, hooks=hooks, worker=self.worker)
        self.retrieval = Retrieval(store, config.observational_memory.retrieval_config)

    @classmethod
    async def open(
        cls, config: Config | None = None, db_path: str | None = None, *, client: ModelClient | None = None,
        hooks: Hooks | None = None,
    ) -> "Memory":
        """Open the database. Without `running()`, model work runs inline."""
        config = config or Config()
        path = db_path or str(config.resolved_db_path())
        return cls(await Store.open(path), config, client=client, hooks=hooks)

    @asynccontextmanager
    async def running(self) -> AsyncIterator["Memory"]:
        """Run the background worker for as long as the block lasts."""
        async with anyio.create_task_group() as group:
            self.worker.attach(group)
            try:
                yield self
            finally:
                self.worker.attach(None)
                group.cancel_scope.cancel()

    def warm_up(self) -> None:
        """Load the tokenizer, then the model library, in the background, so
        the first append and the first cycle do not pay for them. A daemon
        thread: a server told to stop must not wait for it."""

        def load() -> None:
            # Let the MCP handshake finish first: this thread competes with it for the GIL.
            time.sleep(WARM_UP_DELAY_SECONDS)
            self.counter.count_text("warm up")
            if self.config.observational_memory.enabled:
                try:
                    load_litellm()
                except Exception as error:  # noqa: BLE001 - the first real call reports it
                    log.debug("model library warm-up failed: %s", error)

        threading.Thread(target=load, daemon=True, name="om-warm-up").start()

    async def recount_tokens(self) -> int:
        """Recount messages whose stored counts came from another tokenizer or
        cache version (per-part counts still valid are reused). Returns how many."""
        done = 0
        while True:
            stale = await self.store.stale_token_counts(self.counter.cache_key)
            if not stale:
                return done
            counts = []
            for row in stale:
                tokens, cache = await anyio.to_thread.run_sync(self.counter.count_message, row, row["token_cache"])
                counts.append((row["seq"], tokens, cache))
            await self.store.set_token_counts(counts)
            done += len(counts)

    async def close(self) -> None:
        await self.store.close()

    async def __aenter__(self) -> "Memory":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- identity --------------------------------------------------------------

    async def _resolve(self, thread_id: str, resource_id: str | None) -> tuple[str, Thread | None]:
        """An omitted resource id means the thread's own resource, else the default."""
        if not thread_id or not thread_id.strip():
            raise InputError("thread_id must be a non-empty string", field="thread_id")
        thread = await self.store.get_thread(thread_id)
        if resource_id is None:
            return (thread.resource_id if thread else self.config.default_resource_id), thread
        if not resource_id.strip():
            raise InputError("resource_id must be a non-empty string", field="resource_id")
        if thread is not None and thread.resource_id != resource_id:
            raise InputError(
                f"thread {thread_id!r} belongs to resource {thread.resource_id!r}, not {resource_id!r}",
                field="resource_id",
            )
        return resource_id, thread

    async def _existing_thread(self, thread_id: str, resource_id: str | None) -> tuple[str, Thread]:
        resource_id, thread = await self._resolve(thread_id, resource_id)
        if thread is None:
            raise NotFound(f"unknown thread {thread_id!r}", field="thread_id")
        return resource_id, thread

    # -- messages --------------------------------------------------------------

    def _validate(self, messages: list[Any]) -> list[dict[str, Any]]:
        if not isinstance(messages, list) or not messages:
            raise InputError("messages must be a non-empty list", field="messages")
        if len(messages) > self.config.max_batch_messages:
            raise InputError(
                f"messages holds {len(messages)} items; the limit per call is {self.config.max_batch_messages}",
                field="messages",
            )
        try:
            parsed = _MESSAGES.validate_python(messages)
        except ValidationError as error:
            first = error.errors()[0]
            where = "messages" + "".join(
                f"[{p}]" if isinstance(p, int) else f".{p}" for p in first["loc"] if p not in _UNION_LABELS
            )
            raise InputError(f"{where}: {first['msg']}", field=where) from None
        now = datetime.now(timezone.utc)
        records = []
        for index, message in enumerate(parsed):
            record = message.to_record(now)
            size = len(json.dumps(record["parts"], ensure_ascii=False))
            if size > self.config.max_message_chars:
                raise InputError(
                    f"messages[{index}] is {size} characters; the limit is {self.config.max_message_chars}",
                    field=f"messages[{index}].content",
                )
            record["tokens"], record["token_cache"] = self.counter.count_message(record)
            record["index_text"] = index_text(record["parts"], record["metadata"])
            records.append(record)
        return records

    async def append_messages(
        self,
        thread_id: str,
        messages: list[dict[str, Any] | MessageIn],
        resource_id: str | None = None,
        thread_metadata: dict[str, Any] | None = None,
    ) -> AppendOutcome:
        """Store a batch (all or nothing). Re-sent ids are skipped and counted."""
        resource_id, _ = await self._resolve(thread_id, resource_id)
        records = self._validate([m.model_dump() if isinstance(m, MessageIn) else m for m in messages])

        async def seed_working_memory(tx: Transaction, thread: Thread) -> None:
            initial = (thread_metadata or {}).get("working_memory")
            if initial is not None:
                await self._seed_working_memory(tx, thread.id, resource_id, initial)

        if self.config.observational_memory.temporal_markers:
            records = await self._with_gap_markers(thread_id, records)
        result = await self.store.append_messages(
            thread_id, resource_id, records, thread_metadata=thread_metadata, on_thread_created=seed_working_memory
        )
        events = [
            {"type": "data-om-temporal-gap", "thread_id": thread_id, "resource_id": resource_id,
             "message_id": m.id, "text": m.parts[0]["text"], "created_at": m.created_at}
            for m in result.appended if m.metadata.get("om_kind") == "temporal-gap"
        ]
        if events:
            await self.om._emit(events)
        if result.appended:
            await self.om.after_append(thread_id, resource_id, turn_ended=result.appended[-1].role == "assistant")
            if self.retrieval.embedder is not None:
                await self.worker.submit(
                    f"resource:{resource_id}", "embed", lambda: self.retrieval.index(resource_id), rerun=True
                )
        return AppendOutcome(
            appended=len([m for m in result.appended if m.metadata.get("om_kind") != "temporal-gap"]),
            skipped_duplicates=result.skipped_duplicates,
            thread_id=thread_id,
            resource_id=resource_id,
            thread_created=result.thread_created,
            status=await self.om.status(thread_id, resource_id),
            events=events,
        )

    async def _with_gap_markers(self, thread_id: str, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Put a persisted reminder before a user message that comes 10+ minutes
        after the previous message, so the Observer sees the pause."""
        latest = await self.store.thread_messages(thread_id, newest_first=True, limit=1)
        previous = datetime.fromisoformat(latest[0].created_at) if latest else None
        out = []
        for record in records:
            created = datetime.fromisoformat(record["created_at"])
            if record["role"] == "user" and previous is not None and created - previous >= TEMPORAL_GAP:
                text = temporal_gap_text(created - previous)
                gap = {
                    "id": f"{record['id']}~gap", "role": "system", "parts": [{"type": "text", "text": text}],
                    "created_at": record["created_at"], "metadata": {"om_kind": "temporal-gap"},
                    "index_text": "", "created_at_given": record.get("created_at_given", True),
                }
                gap["tokens"], gap["token_cache"] = self.counter.count_message(gap)
                out.append(gap)
            out.append(record)
            previous = max(previous, created) if previous else created
        return out

    # -- status and context ------------------------------------------------------

    async def status(self, thread_id: str, resource_id: str | None = None) -> Status:
        resource_id, _ = await self._resolve(thread_id, resource_id)
        return await self.om.status(thread_id, resource_id)

    async def get_context(
        self, thread_id: str, resource_id: str | None = None, max_tokens: int | None = None,
        actor_model: str | None = None,
    ) -> ContextOut:
        """What the agent should see now: memory blocks, then the unobserved
        messages that fit. Runs what is due first (activation, reflection, and
        a bounded synchronous observation only past block_after)."""
        budget = self._context_budget(max_tokens)
        resource_id, thread = await self._resolve(thread_id, resource_id)
        om = self.config.observational_memory
        if thread is None:
            snap = None
        else:
            snap = await self.om.before_context(thread_id, resource_id, actor_model)
        wm_text = ""
        wm_value = None
        if self.config.working_memory.enabled:
            wm_value = await self._read_working_memory(thread_id, resource_id)
            wm_text = wm.render_for_context(self._wm_config(), wm_value)
        record = snap.record if snap else None
        if record is not None and om.scope == "resource":
            # Continuation hints belong to the thread, even when the log is shared.
            hints = thread.metadata.get("om") or {}
            record.current_task, record.suggested_response = hints.get("current_task"), hints.get("suggested_response")
        groups = await self.store.om.groups(record.key) if record and snap.observation_tokens else []
        others = await self._other_threads(thread_id, resource_id) if om.scope == "resource" and record else None
        obscure = om.obscure_thread_ids if om.obscure_thread_ids is not None else om.scope == "resource"
        retrieval = om.retrieval_config

        def blocks_for(kept):
            return build_blocks(
                record, kept, working_memory=wm_text, retrieval=retrieval, scope=om.scope, obscure=obscure,
                other_threads=others,
            )

        fixed = self.counter.count_text(blocks_for([]).system_text())
        kept, dropped = fit_groups(groups, max(int((budget - fixed) * 0.7), 0))
        blocks = blocks_for(kept)
        if dropped:
            blocks.observations = (
                f"[{dropped} older observation groups omitted to fit max_tokens; raise max_tokens to see them]\n"
                + blocks.observations
            )
        system_text = blocks.system_text()
        remaining = budget - self.counter.count_text(system_text)
        if record is not None:
            chosen, omitted = await self.store.om.unobserved_tail(record.key, resource_id, thread_id, remaining)
        else:
            chosen, omitted = [], 0
        return ContextOut(
            thread_id=thread_id,
            resource_id=resource_id,
            system_text=system_text,
            observations=blocks.observations or None,
            current_task=record.current_task if record else None,
            suggested_response=record.suggested_response if record else None,
            working_memory=wm_value,
            messages=[_message_out(m) for m in chosen],
            omitted_messages=omitted,
            truncated=omitted > 0 or dropped > 0,
            status=await self.om.status(thread_id, resource_id, snap) if snap else await self.status(thread_id, resource_id),
        )

    async def _other_threads(self, thread_id: str, resource_id: str) -> dict[str, list[Message]]:
        out: dict[str, list[Message]] = {}
        for message in await self.om.unobserved(thread_id, resource_id, all_threads=True):
            if message.thread_id != thread_id:
                out.setdefault(message.thread_id, []).append(message)
        return out

    # -- observation -----------------------------------------------------------------

    async def observe(
        self, thread_id: str, resource_id: str | None = None, instruction: str | None = None, progress=None
    ) -> CycleOutcome:
        """Observe the unobserved messages now (trigger 'manual')."""
        resource_id, _ = await self._existing_thread(thread_id, resource_id)
        return await self._single_flight(
            thread_id, resource_id, "observe", lambda: self.om.observe(thread_id, resource_id, "manual", instruction, progress)
        )

    async def reflect(
        self, thread_id: str, resource_id: str | None = None, instruction: str | None = None, progress=None
    ) -> CycleOutcome:
        """Condense the observation log now (trigger 'manual', compression level 0 first)."""
        resource_id, _ = await self._existing_thread(thread_id, resource_id)
        return await self._single_flight(
            thread_id, resource_id, "reflect", lambda: self.om.reflect(thread_id, resource_id, "manual", instruction, progress)
        )

    async def _single_flight(self, thread_id: str, resource_id: str, op: str, run) -> CycleOutcome:
        """Run a manual cycle through the worker, so it never races a background
        cycle of the same kind in this process (it joins it instead)."""
        job = await self.worker.submit(self.om.record_key(thread_id, resource_id), op, run)
        await job.wait()
        if job.error is not None:
            raise job.error
        return job.result

    async def observations(self, thread_id: str, resource_id: str | None = None, history: bool = False) -> dict:
        resource_id, _ = await self._resolve(thread_id, resource_id)
        record = await self.om.record(thread_id, resource_id)
        return await self.observations_for_key(record.key, history)

    async def observations_for_key(self, key: str, history: bool = False) -> dict:
        record = await self.store.om.record(key)
        if record is None:
            raise NotFound(f"no observations for {key!r}", field="key")
        om = self.config.observational_memory
        obscure = om.obscure_thread_ids if om.obscure_thread_ids is not None else om.scope == "resource"

        def view(groups):
            return {
                "text": render_groups(groups, ranges=True, scope=om.scope, obscure=obscure),
                "tokens": sum(g.tokens for g in groups),
                "groups": [
                    {"id": g.id, "kind": g.kind, "range": g.range, "thread_id": g.thread_id, "tokens": g.tokens}
                    for g in groups
                ],
            }

        if history:
            generations = await self.store.om.generations(key)
            return {"record_id": key, "generations": [{"generation": n, **view(gs)} for n, gs in generations]}
        groups = await self.store.om.groups(key)
        return {
            "record_id": key, "generation": record.generation, "last_observed_at": record.last_observed_at,
            "current_task": record.current_task, "suggested_response": record.suggested_response,
            "extracted": record.extracted, **view(groups),
        }

    def _context_budget(self, max_tokens: int | None) -> int:
        if max_tokens is None:
            return self.config.output_token_budget
        if max_tokens < 100:
            raise InputError("max_tokens must be at least 100", field="max_tokens")
        return max_tokens

    # -- working memory -----------------------------------------------------------

    def _wm_config(self, read_only: bool | None = None) -> wm.WorkingMemoryConfig:
        config = self.config.working_memory
        if read_only and not config.read_only:
            config = config.model_copy(update={"read_only": True})
        return config

    def _wm_key(self, thread_id: str, resource_id: str) -> tuple[str, str]:
        scope = self.config.working_memory.scope
        return scope, (resource_id if scope == "resource" else thread_id)

    def _decode_wm(self, stored: str | None) -> str | dict | None:
        if stored is None:
            return None
        if self.config.working_memory.mode == "schema":
            try:
                return json.loads(stored)
            except ValueError:
                return stored
        return stored

    @staticmethod
    def _encode_wm(value: str | dict) -> str:
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)

    def _wm_out(self, thread_id: str, resource_id: str, memory: Any, **extra: Any) -> WorkingMemoryOut:
        config = self.config.working_memory
        return WorkingMemoryOut(
            scope=config.scope,
            mode=config.mode,
            thread_id=thread_id,
            resource_id=resource_id,
            memory=memory,
            template=config.effective_template,
            schema_=config.schema_,
            read_only=config.read_only,
            **extra,
        )

    async def get_working_memory(self, thread_id: str, resource_id: str | None = None) -> WorkingMemoryOut:
        resource_id, _ = await self._resolve(thread_id, resource_id)
        self._require_wm()
        return self._wm_out(thread_id, resource_id, await self._read_working_memory(thread_id, resource_id))

    async def resource_working_memory(self, resource_id: str) -> str | dict | None:
        """The stored resource-scoped working memory, or None."""
        return self._decode_wm(await self.store.get_working_memory("resource", resource_id))

    async def _read_working_memory(self, thread_id: str, resource_id: str) -> str | dict:
        scope, key = self._wm_key(thread_id, resource_id)
        stored = self._decode_wm(await self.store.get_working_memory(scope, key))
        return stored if stored is not None else wm.initial_value(self.config.working_memory)

    async def update_working_memory(
        self, thread_id: str, memory: Any, resource_id: str | None = None, read_only: bool | None = None
    ) -> WorkingMemoryOut:
        """Template mode replaces the Markdown; schema mode merges a partial object."""
        resource_id, thread = await self._resolve(thread_id, resource_id)
        self._require_wm()
        config = self._wm_config(read_only)
        scope, key = self._wm_key(thread_id, resource_id)
        if scope == "thread" and thread is None:
            raise NotFound(f"unknown thread {thread_id!r}: append a message first", field="thread_id")
        outcome: dict[str, wm.UpdateResult] = {}

        def update(current: str | None) -> str | None:
            result = wm.apply_update(config, self._decode_wm(current), memory)
            outcome["result"] = result
            return self._encode_wm(result.value) if result.changed else None

        try:
            await self.store.update_working_memory(scope, key, update, resource_id=resource_id)
        except wm.WorkingMemoryError as error:
            raise InputError(str(error), field=error.field) from None
        result = outcome["result"]
        return self._wm_out(thread_id, resource_id, result.value, updated=result.changed, notice=result.notice)

    async def _seed_working_memory(self, tx: Transaction, thread_id: str, resource_id: str, initial: Any) -> None:
        config = self.config.working_memory
        if not config.enabled:
            return
        try:
            result = wm.apply_update(config.model_copy(update={"read_only": False}), None, initial)
        except wm.WorkingMemoryError as error:
            raise InputError(f"thread metadata working_memory: {error}", field="metadata.working_memory") from None
        scope, key = self._wm_key(thread_id, resource_id)
        if scope == "resource":
            current = await tx.value("SELECT working_memory FROM resources WHERE id = ?", (key,))
            if current is not None and not wm.is_empty(config, self._decode_wm(current)):
                return  # a new thread never erases what the user's memory already holds
        await self.store.set_working_memory_in_tx(tx, scope, key, self._encode_wm(result.value))

    def _require_wm(self) -> None:
        if not self.config.working_memory.enabled:
            raise InputError("working memory is disabled in the configuration", field="working_memory.enabled")

    # -- threads -------------------------------------------------------------------

    async def update_thread(
        self, thread_id: str, title: str | None = None, metadata: dict[str, Any] | None = None
    ) -> ThreadOut:
        if title is not None and not title.strip():
            raise InputError("title must not be blank", field="title")
        thread = await self.store.update_thread(
            thread_id, title=title, metadata=metadata, pin_title=True if title is not None else None
        )
        if metadata and metadata.get("working_memory") is not None and self.config.working_memory.enabled:
            await self.update_working_memory(thread_id, metadata["working_memory"], thread.resource_id)
        return _thread_out(thread)

    async def delete_thread(self, thread_id: str) -> DeleteOut:
        count = await self.store.delete_thread(thread_id)
        return DeleteOut(thread_id=thread_id, deleted_messages=count)

    # -- recall --------------------------------------------------------------------

    async def recall(
        self,
        thread_id: str,
        mode: Literal["messages", "threads", "search"] = "messages",
        *,
        resource_id: str | None = None,
        query: str | None = None,
        cursor: str | None = None,
        target_thread_id: str | None = None,
        anchor: Literal["start", "end"] = "start",
        page: int = 1,
        limit: int = 20,
        detail: Literal["low", "high"] = "low",
        part_type: str | None = None,
        tool_name: str | None = None,
        part_index: int | None = None,
        char_offset: int = 0,
        before: str | None = None,
        after: str | None = None,
        scope: Literal["thread", "resource"] = "resource",
    ) -> RecallOut:
        """Browse raw messages, list threads, or search. See the recall tool's description."""
        resource_id, _ = await self._resolve(thread_id, resource_id)
        if limit < 1:
            raise InputError("limit must be at least 1", field="limit")
        retrieval = self.config.observational_memory.retrieval_config
        if retrieval is not None and retrieval.scope == "thread":
            # Configured to keep recall inside the current conversation.
            if mode == "threads":
                raise InputError("mode 'threads' is off: retrieval.scope is 'thread'", field="mode")
            if target_thread_id not in (None, "current", thread_id):
                raise InputError("other threads are off: retrieval.scope is 'thread'", field="target_thread_id")
            scope = "thread"
        if mode == "threads":
            return await self._recall_threads(thread_id, resource_id, page, min(limit, MAX_THREADS_LIMIT), before, after)
        if mode == "search":
            if query is None:
                raise InputError("mode 'search' needs a query", field="query")
            return await self._recall_search(thread_id, resource_id, query, min(limit, MAX_SEARCH_LIMIT), scope)
        return await self._recall_messages(
            thread_id, resource_id, cursor=cursor, target_thread_id=target_thread_id, anchor=anchor, page=page,
            limit=min(limit, MAX_RECALL_LIMIT), detail=detail, part_type=part_type, tool_name=tool_name,
            part_index=part_index, char_offset=char_offset,
        )

    async def _recall_threads(
        self, current: str, resource_id: str, page: int, limit: int, before: str | None, after: str | None
    ) -> RecallOut:
        bounds = {name: _iso_bound(value, name) for name, value in (("before", before), ("after", after))}
        page = max(page, 1)
        threads, has_more = await self.store.list_threads(
            resource_id, before=bounds["before"], after=bounds["after"], limit=limit, offset=(page - 1) * limit
        )
        out = [_thread_out(t, current=t.id == current) for t in threads]
        lines = [
            f"- **{t.title or '(untitled)'}**{' ← current' if t.current else ''}\n"
            f"  id: {t.id}\n  updated: {t.updated_at} | created: {t.created_at} | messages: {t.message_count}"
            for t in out
        ]
        text = "\n".join(lines) or "No threads."
        if has_more:
            text += f"\n(more threads: call recall mode='threads' page={page + 1})"
        return RecallOut(
            mode="threads", text=text, threads=out, count=len(out), page=page, limit=limit,
            has_next_page=has_more, has_prev_page=page > 1,
        )

    async def _recall_search(
        self, thread_id: str, resource_id: str, query: str, limit: int, scope: str
    ) -> RecallOut:
        results = await self.retrieval.search(
            resource_id, query, thread_id=thread_id if scope == "thread" else None, limit=limit
        )
        blocks = [
            f"{i}. [{r.message_id}] thread {r.thread_id}, {r.role}, {r.created_at}"
            + (f", observation of {r.range}" if r.range else "") + f"\n   {r.snippet}"
            for i, r in enumerate(results, 1)
        ]
        kept, truncated, cut = fit_to_budget(blocks, self.config.output_token_budget, self.counter.count_text)
        results = results[: len(kept)]
        searchable = bool(parse_query(query).terms)
        text = "\n".join(kept) if kept else (
            "No matches." if searchable else "The query has no searchable words (only stop words or symbols)."
        )
        if results:
            text += "\nTo read around a match: recall mode='messages' cursor=<message id> target_thread_id=<thread id>."
        return RecallOut(
            mode="search", text=text, results=results, count=len(results), limit=limit,
            truncated=truncated, token_offset=cut or None,
        )

    async def _recall_messages(
        self, thread_id: str, resource_id: str, *, cursor: str | None, target_thread_id: str | None,
        anchor: str, page: int, limit: int, detail: str, part_type: str | None, tool_name: str | None,
        part_index: int | None, char_offset: int,
    ) -> RecallOut:
        browse = thread_id if target_thread_id in (None, "current") else target_thread_id
        if browse != thread_id:
            other = await self.store.get_thread(browse)
            if other is None or other.resource_id != resource_id:
                raise NotFound(f"unknown thread {browse!r}", field="thread_id")
        anchor_message = None
        if cursor is not None:
            if ":" in cursor and await self.store.find_message(resource_id, cursor) is None:
                start, _, end = cursor.partition(":")
                raise InputError(
                    f"cursor {cursor!r} looks like a range; pass one id: cursor={start!r} to read from its"
                    f" start or cursor={end!r} to read back from its end",
                    field="cursor",
                )
            anchor_message = await self.store.find_message(
                resource_id, cursor, thread_id=None if target_thread_id is None else browse
            )
            if anchor_message is None:
                raise NotFound(f"no message {cursor!r} in this resource", field="cursor")
            browse = anchor_message.thread_id
        if part_index is not None:
            if anchor_message is None:
                raise InputError("part_index needs a cursor naming the message to read", field="cursor")
            return await self._recall_part(anchor_message, part_index, char_offset)
        page = 1 if page == 0 else page
        messages, has_prev, has_next = await self._page(
            browse, anchor_message, anchor, page, limit, part_type, tool_name
        )
        if detail == "high" and messages:
            sliced = await self._recall_part(messages[0], 0, 0)
            sliced.page, sliced.limit, sliced.cursor = page, limit, cursor
            return sliced
        rendered = [render_low(m, part_type, tool_name) for m in messages]
        kept, truncated, cut = fit_to_budget(
            [r.text() for r in rendered], self.config.output_token_budget, self.counter.count_text
        )
        rendered = rendered[: len(kept)]
        text = "\n\n".join(kept) if kept else "No messages."
        if truncated and rendered:
            next_id = messages[len(rendered)].id
            text += f"\n\n(output budget reached; continue with cursor={next_id!r} page=1)"
            has_next = True
        return RecallOut(
            mode="messages", text=text, messages=[r.__dict__ for r in rendered], count=len(rendered),
            cursor=cursor, page=page, limit=limit, detail=detail, has_next_page=has_next,
            has_prev_page=has_prev, truncated=truncated, token_offset=cut or None,
        )

    async def _page(
        self, thread_id: str, cursor: Message | None, anchor: str, page: int, limit: int,
        part_type: str | None, tool_name: str | None,
    ) -> tuple[list[Message], bool, bool]:
        """A page of messages in time order, and whether more exist before and after it."""
        all_messages = await self.store.thread_messages(thread_id)
        if part_type or tool_name:
            all_messages = [m for m in all_messages if any(part_matches(p, part_type, tool_name) for p in m.parts)]
        if cursor is not None:
            # The cursor message is included: page 1 starts with it, page -1 ends with it,
            # so a range read from its first id (or back from its last) misses nothing.
            position = next((i for i, m in enumerate(all_messages) if m.seq >= cursor.seq), len(all_messages))
            if page > 0:
                start = position + (page - 1) * limit
            else:
                end = position + 1 if position < len(all_messages) and all_messages[position].seq == cursor.seq else position
                start = max(end - (-page) * limit, 0)
                limit = max(min(limit, end - (-page - 1) * limit - start), 0)
        elif anchor == "end":
            end = len(all_messages) - (abs(page) - 1) * limit
            start = max(end - limit, 0)
            limit = max(end - start, 0)
        else:
            start = (abs(page) - 1) * limit
        chosen = all_messages[start: start + limit] if limit > 0 else []
        has_prev = start > 0
        has_next = start + len(chosen) < len(all_messages)
        return chosen, has_prev, has_next

    async def _recall_part(self, message: Message, part_index: int, char_offset: int) -> RecallOut:
        if part_index < 0 or char_offset < 0:
            raise InputError("part_index and char_offset must be >= 0", field="part_index")
        if part_index >= len(message.parts):
            following = await self.store.thread_messages(message.thread_id, after_seq=message.seq, limit=1)
            if not following:
                return RecallOut(mode="messages", text="No more parts or messages after this one.", detail="high")
            message, part_index, char_offset = following[0], 0, 0
        part = render_part(message, part_index, char_offset)
        hints = []
        if part.next_char_offset is not None:
            hints.append(
                f'this part continues: recall cursor="{message.id}" part_index={part_index}'
                f" char_offset={part.next_char_offset}"
            )
        elif part_index + 1 < part.part_count:
            hints.append(f'next part: recall cursor="{message.id}" part_index={part_index + 1} detail="high"')
        else:
            hints.append(f'next message: recall cursor="{message.id}" page=1')
        text = part.rendered.text() + "\n\n" + "High detail shows one part at a time; " + "; ".join(hints) + "."
        return RecallOut(
            mode="messages", text=text, messages=[part.rendered.__dict__], count=1, cursor=message.id,
            detail="high", part_index=part_index, next_char_offset=part.next_char_offset, hint="; ".join(hints),
            has_next_page=part.next_char_offset is not None or part_index + 1 < part.part_count,
        )


_UNION_LABELS = {"str", "list[tagged-union[TextPart,ReasoningPart,ToolCallPart,ToolResultPart,ImagePart,FilePart]]"}


def _message_out(message: Message) -> MessageOut:
    return MessageOut(
        id=message.id, thread_id=message.thread_id, role=message.role, created_at=message.created_at,
        parts=message.parts,
    )


def _thread_out(thread: Thread, current: bool = False) -> ThreadOut:
    return ThreadOut(
        id=thread.id, resource_id=thread.resource_id, title=thread.title, created_at=thread.created_at,
        updated_at=thread.updated_at, message_count=thread.message_count, metadata=thread.metadata, current=current,
    )


def _iso_bound(value: str | None, field: str) -> str | None:
    if value is None:
        return None
    try:
        dt = datetime.fromisoformat(value)
    except ValueError:
        raise InputError(f"{field} must be an ISO-8601 date or datetime, got {value!r}", field=field) from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.astimezone(timezone.utc).isoformat()
