"""`Memory`: the engine's public face, usable as a plain Python library.

    memory = await Memory.open(load_config())
    async with memory.running():          # the background worker (buffering, reflection)
        await memory.append_messages("t1", [{"role": "user", "content": "hi"}])
        context = await memory.get_context("t1")

It knows nothing of MCP: the server is a thin adapter over these operations.

Every operation that reads or changes a tenant's data works within `memory.access`, the resources
its caller may touch. Whoever opens the database holds all of it (`EVERY_RESOURCE`: the shell
commands, the hooks, a stdio server); a server narrows it per request to the caller's access,
resolved once where the request comes in (`memory.with_access(access)`, a view sharing everything
else). A thread, message, line or generation of a resource outside the access is answered as one
nobody holds.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio

from om_mcp.config import Config, Limits
from om_mcp.engine import append, intake, remember
from om_mcp.engine.budget import Clock
from om_mcp.engine.context.assemble import SeenMessages, assemble, context_budget, parse_as_of
from om_mcp.engine.context.build import generation_diff, log_view, observation_log
from om_mcp.engine.control import Control
from om_mcp.engine.drain import Drainer
from om_mcp.engine.errors import InputError, NotFound, translated
from om_mcp.engine.grants import Grants
from om_mcp.engine.observation.cycle import CycleOutcome
from om_mcp.engine.observation.engine import ObservationEngine, Progress
from om_mcp.engine.observation.events import EventType, Hooks, user_event
from om_mcp.engine.observation.lines import line_hash
from om_mcp.engine.observation.manual import run_manual
from om_mcp.engine.overview import MemoryOverview
from om_mcp.engine.recall import RecallOut, RecallQuery
from om_mcp.engine.recall.run import recall, thread_only
from om_mcp.engine.results import (
    AppendOutcome,
    ContextOut,
    DeleteOut,
    MessageOut,
    RememberOut,
    Status,
    ThreadOut,
    WorkingMemoryOut,
    message_out,
    thread_out,
)
from om_mcp.engine.search import Retrieval
from om_mcp.engine.tokens import TokenCounter, get_token_counter
from om_mcp.engine.user_layer import USER_RESOURCE
from om_mcp.engine.worker import Worker
from om_mcp.engine.working_memory.service import WorkingMemory
from om_mcp.messages import MessageIn
from om_mcp.models import ModelClient
from om_mcp.models.sampler import Sampler
from om_mcp.store import (
    EVERY_RESOURCE,
    Access,
    NewGroup,
    Scope,
    Store,
    Thread,
    Transaction,
    gate_for,
    open_store,
    parse_key,
    resource_key,
    thread_key,
)

POLL_SECONDS = 5.0
MAX_VIEWS = 1024  # views kept by access (`with_access`), each a few small objects
THREADS_KNOWN = 4096  # threads whose resource a process keeps (`Memory._known`)


class Memory:
    """Long-term memory over one database."""

    def __init__(
        self,
        store: Store,
        config: Config,
        counter: TokenCounter | None = None,
        *,
        client: ModelClient | None = None,
        hooks: Hooks | None = None,
        sampling: Sampler | None = None,
        clock: Clock | None = None,
    ):
        self.store = store
        self.config = config
        # Every write of this memory passes the gate with its privacy settings (store/gate.py).
        store.gate = gate_for(config.privacy.settings())
        self.counter = counter or get_token_counter()
        self.worker = Worker()
        self.observation = ObservationEngine(
            store, config, self.counter, client=client, hooks=hooks, worker=self.worker, sampling=sampling, clock=clock
        )
        self.retrieval = Retrieval(store, config.observational_memory.retrieval_config)
        self.working_memory = WorkingMemory(store, config.working_memory)
        # forget one thing, correct a line, undo a reflection
        self.control = Control(store, config, self.counter, self.observation)
        # what the status page reads
        self.overview = MemoryOverview(store, config, self.observation.budget, self.retrieval, self.observation)
        # what remote clients were granted (OAuth), and the secrets of its flow
        self.grants = Grants(store, config)
        self._counted_by: int | None = None
        self._seen = SeenMessages()  # each thread's last context window, reused by the next
        self._homes: dict[str, str] = {}  # thread -> its resource, for the threads seen (`_known`)
        self.database: str | Path | None = None  # what `open` opened (a URL keeps its password: never shown)
        # Whoever opens the database holds all of it; `with_access` narrows a view to a caller's.
        self.access: Access = EVERY_RESOURCE
        self._views: dict[Access, Memory] = {}

    def with_access(self, access: Access) -> Memory:
        """This memory as a caller with `access` sees it: the same engine, store and worker, every
        operation (and `control`, `overview`) within the resources `access` grants. A view narrows
        only: one that reaches every resource is the owner's, and the owner alone makes others. One
        view per access, kept: a request pays a dictionary lookup."""
        if access == self.access:
            return self
        if not self.access.every_resource:
            raise PermissionError(f"a memory narrowed to {self.access.describe()} makes no other view of it")
        view = self._views.get(access)
        if view is None:
            if len(self._views) >= MAX_VIEWS:  # many identities (an identity provider's users): start over
                self._views.clear()
            view = copy.copy(self)
            view.access = access
            view.control = self.control.with_access(access)
            view.overview = self.overview.with_access(access)
            self._views[access] = view
        return view

    @classmethod
    async def open(
        cls,
        config: Config | None = None,
        db_path: str | None = None,
        *,
        client: ModelClient | None = None,
        hooks: Hooks | None = None,
        sampling: Sampler | None = None,
        clock: Clock | None = None,
    ) -> Memory:
        """Open the database (`db_path`: a file or a postgresql:// URL; default: the config's). Without
        `running()`, model work runs inline. `sampling` runs the `sampling` model's prompts (the MCP
        server's broker, which reaches the clients that offer it); `clock` (UTC now) is what the spend caps read."""
        # Every field has a default; mypy without pydantic's plugin reads Field(default, ...) as required.
        config = config or Config()  # type: ignore[call-arg]
        database = db_path or config.database()
        store = await open_store(database)
        memory = cls(store, config, client=client, hooks=hooks, sampling=sampling, clock=clock)
        memory.database = database
        await memory.counter.ready()  # milliseconds: no append waits for it later
        return memory

    @asynccontextmanager
    async def running(self, poll_seconds: float | None = POLL_SECONDS) -> AsyncIterator[Memory]:
        """Run the background worker (and notice work other processes append) while the block lasts."""
        async with anyio.create_task_group() as group:
            self.worker.attach(group)
            if poll_seconds:
                group.start_soon(self._poll, poll_seconds)
            try:
                yield self
            finally:
                self.worker.attach(None)
                group.cancel_scope.cancel()

    async def _poll(self, seconds: float) -> None:
        """Drain what other processes append (hooks, other servers), holding the worker lease meanwhile."""
        await Drainer(self).poll_forever(seconds)

    # -- sharing with the other processes on this database ----------------------------------------

    @property
    def relays(self) -> bool:
        """Do other processes on this database hear what this one publishes? (SQLite's do not:
        they see the same file; PostgreSQL's replicas hear it through LISTEN/NOTIFY.)"""
        return self.store.backend != "sqlite"

    async def broadcast(self, message: dict[str, Any]) -> None:
        await self.store.broadcast(message)

    async def listen(self, callback: Callable[[dict[str, Any]], Awaitable[None]]) -> Callable[[], Awaitable[None]]:
        """Hear what the other processes broadcast; returns the function that stops listening."""
        return await self.store.listen(callback)

    async def close(self) -> None:
        await self.store.close()

    async def __aenter__(self) -> Memory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def sampler(self) -> Sampler:
        """What runs the `sampling` model's prompts: what `open(sampling=...)` was given, else nothing."""
        return self.observation.clients.sampler

    async def start_upkeep(self) -> None:
        """Queue a long-lived process's start-up work on the worker (inside `running()`): the
        token recount after a tokenizer change, then the counter's warm-up for non-ASCII text."""
        await self.worker.submit("tokens", "recount", self.recount_tokens)
        await self.worker.submit("tokens", "unicode", self.counter.warm)

    @property
    def events(self):
        """The event bus: append a listener to `events.listeners`; `events.collect()` for one call."""
        return self.observation.events

    # -- identity --------------------------------------------------------------------------

    async def _resolve(
        self, thread_id: str, resource_id: str | None, *, creates: bool = False
    ) -> tuple[str, Thread | None]:
        """The thread's resource (within `access`) and the thread, None before its first message."""
        return await intake.resolve(
            self.store, self.config.default_resource_id, thread_id, resource_id, self.access, creates=creates
        )

    async def _known(self, thread_id: str, resource_id: str | None, *, creates: bool = False) -> tuple[str, bool]:
        """`_resolve` for the hot paths (a store, a context, a search): the resource, and whether the
        thread is stored. A thread seen before is taken as it was, with no trip to the database (a thread
        keeps its resource for life): the store's append refuses a thread of another resource all the
        same (one deleted and made again elsewhere meanwhile), and a context read finds nothing of a
        deleted one."""
        home = self._homes.get(thread_id)
        if home is not None and resource_id in (None, home) and self.access.allows(home):
            return home, True
        resource_id, thread = await self._resolve(thread_id, resource_id, creates=creates)
        if thread is not None:
            self._homes.pop(thread_id, None)
            if len(self._homes) >= THREADS_KNOWN:
                del self._homes[next(iter(self._homes))]
            self._homes[thread_id] = thread.resource_id
        return resource_id, thread is not None

    async def _existing(self, thread_id: str, resource_id: str | None) -> tuple[str, Thread]:
        resource_id, thread = await self._resolve(thread_id, resource_id)
        if thread is None:
            raise intake.unknown_thread(thread_id)
        return resource_id, thread

    def check_resource(self, resource_id: str, field: str = "resource_id") -> str:
        """`resource_id`, or refused (InputError) when it is not an id or `access` does not grant it,
        in the same words whether the resource exists or not."""
        return intake.check_access(self.access, intake.check_id(resource_id, field), field)

    async def thread(self, thread_id: str) -> Thread | None:
        """The thread, or None when nobody holds it or its resource is outside `access`."""
        found = await self.store.get_thread(thread_id)
        return found if found is not None and self.access.allows(found.resource_id) else None

    def record_key(self, thread_id: str, resource_id: str) -> str:
        return self.observation.record_key(thread_id, resource_id)

    # -- messages ------------------------------------------------------------------------------

    async def append_messages(
        self,
        thread_id: str,
        messages: list[dict[str, Any] | MessageIn],
        resource_id: str | None = None,
        thread_metadata: dict[str, Any] | None = None,
        *,
        with_status: bool = False,
    ) -> AppendOutcome:
        """Store a batch, all or nothing (`engine/append.py`, the pipeline every way in takes);
        re-sent messages (same id, or the same content when sent without ids) are skipped and
        counted. Never waits for a model."""
        asked, seen = resource_id, self._homes.get(thread_id)
        resource_id, _ = await self._known(thread_id, resource_id, creates=True)
        if resource_id == USER_RESOURCE:
            raise InputError(
                f"resource {USER_RESOURCE!r} is the person layer: remember lines there with om-mcp remember --user",
                field="resource_id",
            )
        metadata = intake.scrubbed(self.config, intake.check_thread_metadata(thread_metadata))
        await self.counter.ready()
        batch = append.Batch(
            thread_id,
            resource_id,
            self.record_key(thread_id, resource_id),
            await intake.rows(self.config, self.counter, self.store, thread_id, messages),
            thread_metadata=metadata,
            working_memory=self.working_memory.seed(metadata.get("working_memory")),
            count=self.counter.count_text,
        )
        try:
            done, self._counted_by = await translated(self.store.transaction(self._record, batch))
        except InputError as error:
            if seen is None or error.field != "resource_id":
                raise
            # The thread was deleted and made again under another resource since this process saw it.
            self._homes.pop(thread_id, None)
            return await self.append_messages(thread_id, messages, asked, thread_metadata, with_status=with_status)
        if done.state is not None:
            self._homes.setdefault(thread_id, resource_id)
        await self.observation.events.emit(done.events, persisted=True)
        if done.appended and done.state is not None:
            await self.observation.after_append(
                thread_id, resource_id, done.state, turn_ended=done.appended[-1].role == "assistant"
            )
            if self.retrieval.embedder is not None:
                await self.worker.submit(
                    f"resource:{resource_id}", "embed", lambda: self.retrieval.index(resource_id), rerun=True
                )
        return AppendOutcome(
            appended=done.messages,
            skipped_duplicates=done.skipped,
            forgotten=done.forgotten,
            thread_id=thread_id,
            resource_id=resource_id,
            thread_created=done.thread_created,
            remembered=done.remembered,
            events=done.events,
            status=await self.observation.status(thread_id, resource_id) if with_status else None,
        )

    async def append_turn(
        self, thread_id: str, user: str | None = None, assistant: str | None = None, resource_id: str | None = None
    ) -> AppendOutcome:
        """The common case in few words: one user message and/or one assistant reply."""
        messages: list[dict[str, Any] | MessageIn] = [
            {"role": role, "content": text}
            for role, text in (("user", user), ("assistant", assistant))
            if text is not None
        ]
        if not messages:
            raise InputError("give user, assistant, or both", field="user")
        return await self.append_messages(thread_id, messages, resource_id)

    # -- status and context ----------------------------------------------------------------------

    async def status(self, thread_id: str, resource_id: str | None = None) -> Status:
        resource_id, _ = await self._known(thread_id, resource_id)
        return await self.observation.status(thread_id, resource_id)

    def model_state(self) -> tuple[bool, str | None]:
        """(can observation call its model now, why not): no network, no thread needed."""
        state = self.observation.observation_state(None)
        return state.model_ready, None if state.model_ready else state.reason

    def models(self) -> tuple[str, str, str]:
        """(the Observer's models, the Reflector's, how they were chosen), as logs and pages name them."""
        observation = self.observation
        return (
            observation.observer.router.describe(),
            observation.reflector.router.describe(),
            observation.readiness.reason,
        )

    @property
    def limits(self) -> Limits:
        """The thresholds as token counts (observe, reflect, buffer, block), resolved once from the config."""
        return self.observation.limits

    async def get_context(
        self,
        thread_id: str,
        resource_id: str | None = None,
        max_tokens: int | None = None,
        actor_model: str | None = None,
        *,
        with_status: bool = False,
        as_of: str | datetime | None = None,
    ) -> ContextOut:
        """What the agent should see now: memory blocks, then the unobserved messages that
        fit. Activates what is due first; only the block_after valve may wait, once.
        `as_of` (an ISO date, meaning the end of that day, or date-time; UTC unless it says):
        the log and working memory as they were then, and no message made after it."""
        budget = context_budget(self.config, max_tokens)
        at = parse_as_of(as_of) if as_of is not None else None
        await self.counter.ready()
        resource_id, exists = await self._known(thread_id, resource_id)
        return await assemble(
            self.observation,
            self.working_memory,
            thread_id,
            resource_id,
            exists=exists,
            budget=budget,
            actor_model=actor_model,
            with_status=with_status and at is None,
            as_of=at,
            access=self.access,
            seen=self._seen,
        )

    # -- remember exactly this ----------------------------------------------------------------

    async def remember(
        self, text: Any, *, thread_id: str | None = None, resource_id: str | None = None, user: bool = False
    ) -> RememberOut:
        """Write one line into the log word for word, high priority and user-stated, with no model:
        into a thread's memory, a resource's (resource scope), or the person layer (`user`)."""
        words = remember.said(intake.scrubbed(self.config, remember.check(text)))  # echoed and stored as scanned
        if user and (thread_id is not None or resource_id is not None):
            raise InputError("give one of thread, resource or user", field="user")
        if user:
            self._person_layer()
            resource_id, key, owner = USER_RESOURCE, resource_key(USER_RESOURCE), None
        elif thread_id is not None:
            resource_id, _ = await self._existing(thread_id, resource_id)
            key, owner = self.record_key(thread_id, resource_id), thread_id
        else:
            resource_id = self.check_resource(resource_id or self.access.only or self.config.default_resource_id)
            key, owner = resource_key(resource_id), None
            if self.config.observational_memory.scope == "thread":
                # A resource has no log of its own: the one its next session is shown is its most
                # recently observed session's (what SessionStart lends a new session).
                lent = await self.store.lending_record(thread_key(""), resource_id)
                if lent is None:
                    raise InputError(
                        "observational_memory.scope is 'thread' and no session of this resource has a log yet:"
                        " remember into a thread (--thread T), or use scope = 'resource'",
                        field="resource_id",
                    )
                key, owner = lent, parse_key(lent)[1]
        last = await self.store.message_page(owner, limit=1, newest_first=True) if owner else []
        text_of = remember.group_text(words, self.observation.budget.clock())
        group = NewGroup(
            text=text_of,
            tokens=self.counter.count_text(text_of),
            first_seq=last[0].seq if last else 0,
            last_seq=last[0].seq if last else 0,
            first_message_id=last[0].id if last else None,
            last_message_id=last[0].id if last else None,
            thread_id=owner,
        )
        event = user_event(EventType.REMEMBER, owner, resource_id, record_id=key, lines=1)
        group_id = await translated(self.store.remember(key, resource_id, owner, group, [event]))
        await self.observation.events.emit([event], persisted=True)
        line = text_of.splitlines()[-1]
        return RememberOut(id=f"{group_id}.{line_hash(line)}", text=line, record_key=key)

    # -- observation ------------------------------------------------------------------------------

    async def observe(
        self,
        thread_id: str,
        resource_id: str | None = None,
        instruction: str | None = None,
        progress: Progress | None = None,
    ) -> CycleOutcome:
        """Observe the unobserved messages now (trigger 'manual'), joining a running cycle if any.
        `instruction` is scanned before the model sees it, as everything sent to a model is."""
        resource_id, _ = await self._existing(thread_id, resource_id)
        instruction = _instruction(self.config, instruction)
        return await run_manual(self.observation, "observe", thread_id, resource_id, instruction, progress)

    async def reflect(
        self,
        thread_id: str,
        resource_id: str | None = None,
        instruction: str | None = None,
        progress: Progress | None = None,
    ) -> CycleOutcome:
        """Condense the observation log now (trigger 'manual', compression level 0 first);
        `instruction` is scanned as `observe`'s."""
        resource_id, _ = await self._existing(thread_id, resource_id)
        instruction = _instruction(self.config, instruction)
        return await run_manual(self.observation, "reflect", thread_id, resource_id, instruction, progress)

    async def observations(
        self, thread_id: str | None = None, resource_id: str | None = None, history: bool = False
    ) -> dict[str, Any]:
        """The active log (or every generation) of a thread's record, or of a resource's."""
        if thread_id is not None:
            resource_id, _ = await self._existing(thread_id, resource_id)
            key = self.record_key(thread_id, resource_id)
        elif resource_id is not None:
            key = resource_key(self.check_resource(resource_id))
        else:
            raise InputError("give thread_id or resource_id", field="thread_id")
        record = await self.store.record(key)
        if record is None:
            raise NotFound(f"no observations for {key!r}", field="thread_id" if thread_id else "resource_id")
        return await observation_log(self.store, record, self.config.observational_memory, history=history)

    async def observations_at(self, thread_id: str, as_of: Any, resource_id: str | None = None) -> dict[str, Any]:
        """A thread's log and working memory as they were at `as_of` (see get_context)."""
        at = parse_as_of(as_of)
        resource_id, _ = await self._existing(thread_id, resource_id)
        key, stamp = self.record_key(thread_id, resource_id), at.isoformat()
        generation, groups = await self.store.log_at(key, stamp)
        where = self.working_memory.context_location(thread_id, resource_id)
        memory = None
        if where is not None:
            scope: Scope = "resource" if where[0] == "resources" else "thread"
            memory = {
                "scope": scope,
                "of": where[1],
                "text": await self.store.working_memory_at(scope, where[1], stamp),
            }
        return {
            "record_id": key,
            "as_of": stamp,
            "generation": generation,
            **log_view(groups, self.config.observational_memory),
            "working_memory": memory,
        }

    async def generation_diff(self, thread_id: str, generation: Any, resource_id: str | None = None) -> dict[str, Any]:
        """What generation N of a thread's log changed against N-1 (lines added, lines gone and why)."""
        if isinstance(generation, bool) or not isinstance(generation, int) or generation < 1:
            raise InputError("generation must be a whole number, 1 or more", field="diff")
        resource_id, _ = await self._existing(thread_id, resource_id)
        return await generation_diff(self.store, self.record_key(thread_id, resource_id), generation)

    def _person_layer(self) -> None:
        """Refused unless the person layer is on and the caller's access reaches it (the local owner's)."""
        if not self.config.observational_memory.user.enabled:
            raise InputError(
                "the person layer is off: om-mcp config set observational_memory.user.enabled true", field="user"
            )
        intake.check_access(self.access, USER_RESOURCE, "user")

    async def set_user_working_memory(self, text: Any) -> str:
        """Replace the person layer's working memory (Markdown), which every resource's context shows."""
        self._person_layer()
        if not isinstance(text, str):
            raise InputError("working memory must be text", field="working_memory")
        intake.check_text(text, "working_memory", nul=True)
        text = intake.scrubbed(self.config, text)
        stored, _ = await translated(self.store.update_working_memory("resource", USER_RESOURCE, lambda _: text))
        return stored or ""

    async def user_layer(self) -> dict[str, Any]:
        """The person layer's log (lines remembered with `--user`, with their ids) and working memory."""
        intake.check_access(self.access, USER_RESOURCE, "user")
        record = await self.store.record(resource_key(USER_RESOURCE))
        log = await observation_log(self.store, record, self.config.observational_memory) if record else None
        return {
            "enabled": self.config.observational_memory.user.enabled,
            "resource_id": USER_RESOURCE,
            "observations": log,
            "working_memory": await self.store.get_working_memory("resource", USER_RESOURCE),
        }

    async def events_of(self, thread_id: str, after_id: int = 0, limit: int = 200) -> list[dict[str, Any]]:
        await self._existing(thread_id, None)
        return [
            {"id": e.id, **e.payload}
            for e in await self.store.events(thread_id=thread_id, after_id=after_id, limit=limit)
        ]

    # -- recall ------------------------------------------------------------------------------------

    async def recall(self, query: RecallQuery) -> RecallOut:
        """Browse raw messages, list threads, or search (see the recall tool's description)."""
        resource_id, _ = await self._known(query.thread_id, query.resource_id)
        return await recall(self.store, self.retrieval, self.config, self.counter.count_text, query, resource_id)

    async def search(
        self, thread_id: str, text: str, resource_id: str | None = None, limit: int = 20, scope: str = "resource"
    ):
        """Search results as data (recall's search mode renders them as text)."""
        resource_id, _ = await self._known(thread_id, resource_id)
        in_thread = scope == "thread" or thread_only(self.config)
        return await self.retrieval.search(resource_id, text, thread_id=thread_id if in_thread else None, limit=limit)

    # -- working memory ---------------------------------------------------------------------------------

    async def get_working_memory(self, thread_id: str, resource_id: str | None = None) -> WorkingMemoryOut:
        resource_id, _ = await self._known(thread_id, resource_id)
        return await self.working_memory.get(thread_id, resource_id)

    async def update_working_memory(
        self, thread_id: str, memory: Any, resource_id: str | None = None, read_only: bool | None = None
    ) -> WorkingMemoryOut:
        """Template mode replaces the Markdown; schema mode merges a partial object. Atomic."""
        resource_id, thread = await self._resolve(thread_id, resource_id, creates=True)
        memory = intake.scrubbed(self.config, memory)
        return await translated(
            self.working_memory.update(thread_id, resource_id, memory, exists=thread is not None, read_only=read_only)
        )

    async def merge_working_memory(self, thread_id: str, resource_id: str, partial: dict[str, Any]) -> WorkingMemoryOut:
        """Merge a partial object into resource-scoped schema working memory, atomically
        (one write-locked transaction, so concurrent merges of different fields all survive)."""
        resource_id, thread = await self._resolve(thread_id, resource_id, creates=True)
        partial = intake.scrubbed(self.config, partial)
        return await translated(self.working_memory.merge(thread_id, resource_id, partial, exists=thread is not None))

    @staticmethod
    def supports_atomic_working_memory_merge() -> bool:
        return True  # each merge is one write-locked transaction, across processes too

    async def resource_working_memory(self, resource_id: str) -> str | dict | None:
        """The stored resource-scoped working memory, or None."""
        return await self.working_memory.stored("resource", self.check_resource(resource_id))

    # -- threads and resources -------------------------------------------------------------------------

    async def update_thread(
        self, thread_id: str, title: str | None = None, metadata: dict[str, Any] | None = None
    ) -> ThreadOut:
        await self._existing(thread_id, None)
        if title is not None:
            if not isinstance(title, str) or not title.strip():
                raise InputError("title must be a non-empty string", field="title")
            title = intake.scrubbed(self.config, intake.check_title(title, "title"))
        metadata = intake.scrubbed(self.config, intake.check_metadata(metadata, "metadata")) or None
        thread = await translated(
            self.store.update_thread(
                thread_id, title=title, metadata=metadata, pin_title=True if title is not None else None
            )
        )
        if metadata and metadata.get("working_memory") is not None and self.config.working_memory.enabled:
            await self.update_working_memory(thread_id, metadata["working_memory"], thread.resource_id)
        return thread_out(thread)

    async def delete_thread(self, thread_id: str) -> DeleteOut:
        await self._existing(thread_id, None)
        self._seen.forget(thread_id)
        self._homes.pop(thread_id, None)
        count = await translated(self.store.delete_thread(thread_id))
        pending = await self.store.erase_pending() is not None
        return DeleteOut(thread_id=thread_id, deleted_messages=count, erase_pending=pending)

    async def forget_resource(self, resource_id: str) -> tuple[int, int]:
        """Delete a resource with all its threads and memory; returns (threads, messages)."""
        self.check_resource(resource_id)
        self._homes.clear()
        return await translated(self.store.delete_resource(resource_id))

    async def messages(self, thread_id: str, limit: int = 20) -> list[MessageOut]:
        """The thread's newest messages, oldest first."""
        await self._existing(thread_id, None)
        found = await self.store.message_page(thread_id, limit=limit, newest_first=True)
        return [message_out(m) for m in reversed(found)]

    async def threads(self, resource_id: str, limit: int = 50) -> list[ThreadOut]:
        found, _ = await self.store.list_threads(self.check_resource(resource_id), limit=limit)
        return [thread_out(t) for t in found]

    async def recount_tokens(self, after_seq: int = 0) -> int:
        """Recount messages counted by another tokenizer, in the background (the tokenizer
        loads in a thread first, so the event loop never waits for it); `after_seq` looks
        only at newer messages."""
        await self.counter.ready()
        return await intake.recount(self.store, self.counter, await self._tokenizer_id(), after_seq)

    async def _record(self, store: Transaction, batch: append.Batch) -> tuple[append.Recorded, int]:
        """`append.record`, with the first store of this process looking up its tokenizer's id in the
        same transaction (one trip to the database, not two; a retried transaction looks again)."""
        counted_by = self._counted_by
        if counted_by is None:
            counted_by = await store.tokenizer_id(self.counter.cache_key)
        return await append.record(store, dataclasses.replace(batch, counted_by=counted_by)), counted_by

    async def _tokenizer_id(self) -> int:
        """The store's id for this counter's tokenizer, which stored counts name (looked up once)."""
        if self._counted_by is None:
            self._counted_by = await self.store.tokenizer_id(self.counter.cache_key)
        return self._counted_by

    # -- moving a memory (engine/transfer.py; imported on use) -----------------------------------------

    def _whole(self, what: str) -> None:
        """What reads or writes every resource at once is the owner's alone."""
        if not self.access.every_resource:
            raise InputError(f"{what} is for the memory's owner (this access reaches {self.access.describe()})")

    async def export_to(self, out, resource_id: str | None = None, advance=None) -> dict[str, int]:
        from om_mcp.engine import transfer

        if resource_id is None:
            self._whole("exporting every resource")
        else:
            self.check_resource(resource_id)

        return await transfer.export_memory(self, out, resource_id, advance)

    async def import_from(self, source, advance=None):
        from om_mcp.engine import transfer

        self._whole("an import")

        return await transfer.import_memory(self, source, advance)

    async def import_conversations(self, threads, resource_id: str | None = None, advance=None):
        from om_mcp.engine import transfer

        self._whole("an import")

        return await transfer.import_conversations(self, threads, resource_id, advance)

    async def backup(self, target: str) -> int:
        """A consistent copy into a new SQLite file; its size in bytes."""
        from om_mcp.engine import transfer

        self._whole("a backup")

        return await transfer.backup(self, target)


def _instruction(config: Config, instruction: Any) -> str | None:
    """A one-off instruction for the Observer or Reflector, checked and scanned (it reaches a model)."""
    if instruction is None:
        return None
    if not isinstance(instruction, str):
        raise InputError("instruction must be text", field="instruction")
    intake.check_text(instruction, "instruction", nul=True)
    return intake.scrubbed(config, instruction)
