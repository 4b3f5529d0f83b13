"""`MemoryOverview`: the reads for looking at a memory (the status page), through the engine.

The status page shows what the store holds more or less as it is stored, so most
of these read one store operation; they live here so that the server reaches a
memory through the engine only, and the scope and working-memory settings are
applied in one place. Each read is within `access`, the caller's resources
(`Memory.with_access`): another resource's thread, record or working memory reads as none.
What a page needs besides: a thread's messages newest first (the store's `message_page`,
which recall pages with) or as the one search ranks them (`Retrieval.matching_messages`), a
title for a thread nobody named, and whether observation can run, said as one line with its fix.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from om_mcp.config import Config
from om_mcp.engine.budget import Budget, BudgetState
from om_mcp.engine.errors import InputError, NotFound
from om_mcp.engine.recall.render import part_body
from om_mcp.engine.search import Retrieval, parse_query
from om_mcp.models.auto import NO_MODEL_REASON
from om_mcp.models.claude_login import NOT_LOGGED_IN
from om_mcp.store import EVERY_RESOURCE, Access, Event, Group, Message, ResourceSummary, Snapshot, Store, parse_key
from om_mcp.store.rows import Scope
from om_mcp.store.summaries import SeriesInputs, ThreadState

if TYPE_CHECKING:
    from om_mcp.engine.observation.engine import ObservationEngine

TITLE_CHARS = 80  # a first prompt as a title: about two lines of the page's thread list
PART_CHARS = 4000  # of one part in a page of messages; the whole message is one more request
SEARCH_DEPTH = 200  # how far down the ranking a search may be paged
TitleFrom = Literal["set", "observer", "first-prompt"]


@dataclass(frozen=True, slots=True)
class Part:
    """One part of a message as a person reads it: its text (recall's full reading), a tool call's
    arguments one to a line, a tool result's output (the tool's name beside it, not in it)."""

    type: str
    text: str  # cut to `PART_CHARS` in a page, whole when one message is read
    chars: int  # the whole text's length
    tool_name: str | None = None
    is_error: bool = False


@dataclass(frozen=True, slots=True)
class MessageRead:
    """A stored message as a person reads it."""

    id: str
    role: str
    created_at: str
    tokens: int
    parts: list[Part]
    score: float | None = None  # the search's, when found by one


@dataclass(frozen=True, slots=True)
class MessagePage:
    """Messages newest first (or best match first, for a search), and whether more follow."""

    messages: list[MessageRead]
    more: bool
    words: list[str]  # the search's words, for marking them; empty when browsing


@dataclass(frozen=True, slots=True)
class ReadinessLine:
    """Can a model observe now: one calm line saying what happens meanwhile, and the fix."""

    ready: bool
    line: str
    fix: str | None = None


class MemoryOverview:
    def __init__(
        self, store: Store, config: Config, budget: Budget, retrieval: Retrieval, observation: ObservationEngine
    ):
        self._store, self._config, self._budget = store, config, budget
        self._retrieval, self._observation = retrieval, observation
        self.access: Access = EVERY_RESOURCE  # narrowed by `Memory.with_access`

    def with_access(self, access: Access) -> MemoryOverview:
        view = copy.copy(self)
        view.access = access
        return view

    async def _thread_within(self, thread_id: str, resource_id: str | None = None) -> bool:
        """Is the thread stored under a resource of the access (and `resource_id`, when given)?"""
        if self.access.every_resource and resource_id is None:
            return True
        found = await self._store.get_thread(thread_id)
        return found is not None and self.access.allows(found.resource_id) and resource_id in (None, found.resource_id)

    async def _within(self, scope: Scope, ident: str) -> bool:
        """Is a record key's (or a working memory's) owner, a thread or a resource, within the access?"""
        if self.access.every_resource:
            return True
        return self.access.allows(ident) if scope == "resource" else await self._thread_within(ident)

    @property
    def location(self) -> str:
        return self._store.location

    async def resources(self) -> list[ResourceSummary]:
        return [r for r in await self._store.list_resources() if self.access.allows(r.id)]

    async def thread_states(
        self, *, resource_id: str | None = None, thread_id: str | None = None, limit: int = 200
    ) -> list[ThreadState]:
        scope = self._config.observational_memory.scope
        return await self._store.thread_states(
            scope, access=self.access, resource_id=resource_id, thread_id=thread_id, limit=limit
        )

    async def snapshot(self, record_key: str, thread_id: str) -> Snapshot | None:
        if not (await self._within(*parse_key(record_key)) and await self._thread_within(thread_id)):
            return None
        return await self._store.snapshot(record_key, thread_id)

    async def generations(self, record_key: str) -> list[tuple[int, list[Group]]]:
        return await self._store.generations(record_key) if await self._within(*parse_key(record_key)) else []

    async def working_memory(self, scope: Scope, key: str) -> str | None:
        return await self._store.get_working_memory(scope, key) if await self._within(scope, key) else None

    async def spend(self) -> BudgetState:
        return await self._budget.state()

    async def redactions(self, resource_id: str) -> dict[str, int]:
        return await self._store.redaction_counts(Access.to([resource_id])) if self.access.allows(resource_id) else {}

    async def events(self, thread_id: str, after_id: int, limit: int) -> list[Event]:
        if not await self._thread_within(thread_id):
            return []
        return await self._store.events(thread_id=thread_id, after_id=after_id, limit=limit)

    async def series_inputs(self, record_key: str) -> SeriesInputs:
        if not await self._within(*parse_key(record_key)):
            return SeriesInputs([], [])
        return await self._store.series_inputs(record_key)

    # -- a thread's messages ---------------------------------------------------------------------

    async def messages(self, thread_id: str, resource_id: str, *, before: str | None, limit: int) -> MessagePage:
        """A page of the thread's messages, newest first, older than the message `before` (an id)."""
        if not await self._thread_within(thread_id, resource_id):
            raise NotFound(f"unknown thread {thread_id!r}", field="thread_id")
        before_seq = None
        if before is not None:
            anchor = await self._store.find_message(resource_id, before, thread_id)
            if anchor is None:
                raise NotFound(f"no message {before!r} in thread {thread_id!r}", field="before")
            before_seq = anchor.seq
        rows = await self._store.message_page(thread_id, before_seq=before_seq, limit=limit + 1, newest_first=True)
        return MessagePage([_read(m) for m in rows[:limit]], len(rows) > limit, [])

    async def search_messages(
        self, thread_id: str, resource_id: str, text: str, *, offset: int, limit: int
    ) -> MessagePage:
        """The thread's messages that the search (recall's, by words and by meaning when vectors are
        on) ranks best, best first, from `offset` on."""
        if not await self._thread_within(thread_id, resource_id):
            raise NotFound(f"unknown thread {thread_id!r}", field="thread_id")
        words = parse_query(text).words
        if not words:
            raise InputError("q has no searchable words: use a few distinctive words", field="q")
        if offset + limit > SEARCH_DEPTH:
            raise InputError(f"offset: a search is paged to its {SEARCH_DEPTH} best matches", field="offset")
        found = await self._retrieval.matching_messages(
            resource_id, text, thread_id=thread_id, limit=offset + limit + 1
        )
        page = found[offset : offset + limit]
        return MessagePage([_read(m, score) for m, score in page], len(found) > offset + limit, words)

    async def message(self, thread_id: str, resource_id: str, message_id: str) -> MessageRead | None:
        """One message of the thread, whole."""
        if not await self._thread_within(thread_id, resource_id):
            return None
        found = await self._store.find_message(resource_id, message_id, thread_id)
        return _read(found, chars=None) if found else None

    # -- how a thread and the server are named -------------------------------------------------------

    @staticmethod
    def title(state: ThreadState) -> tuple[str | None, TitleFrom | None]:
        """The thread's title and where it came from: set by a person or a client (pinned), proposed
        by the Observer, else the start of its first prompt (a hook session has no other name)."""
        thread = state.thread
        if thread.title:
            return thread.title, "set" if thread.title_pinned else "observer"
        if state.first_prompt:
            return _clip_words(state.first_prompt, TITLE_CHARS), "first-prompt"
        return None, None

    async def readiness(self) -> ReadinessLine:
        """Whether observation can call its model now (no network asked), as the page says it: a spend
        cap reached pauses it (which cap, until when) however ready the model is."""
        if not self._config.observational_memory.enabled:
            return ReadinessLine(
                False,
                "Observation is off: messages are kept and searchable.",
                "Set observational_memory.enabled = true and restart om-mcp to observe them.",
            )
        budget = await self._budget.state() if self._config.observational_memory.budget.any else None
        state = self._observation.observation_state(None, budget)
        if state.budget_paused and budget is not None:
            return ReadinessLine(
                False,
                "Observation is paused by a spend cap: messages are kept and searchable.",
                f"{state.reason} (observational_memory.budget.{budget.reached}).",
            )
        if state.model_ready:
            return ReadinessLine(True, f"Observing with {self._observation.observer.router.describe()}.")
        reason = state.reason or ""
        recording = "Recording only: messages are kept and searchable."
        if NOT_LOGGED_IN in reason:
            return ReadinessLine(
                False,
                recording,
                "To observe them, run `claude auth login` (Claude Code is not logged in), then restart om-mcp.",
            )
        if reason.endswith(NO_MODEL_REASON):
            return ReadinessLine(
                False,
                recording,
                "To observe them, set a provider key such as GEMINI_API_KEY, or install Claude Code and run"
                " `claude auth login`; then restart om-mcp.",
            )
        return ReadinessLine(False, "Observation is paused: messages are kept and searchable.", _sentence(reason))


def _read(message: Message, score: float | None = None, chars: int | None = PART_CHARS) -> MessageRead:
    """The message with each part as text, cut to `chars` (None: whole)."""
    return MessageRead(message.id, message.role, message.created_at, message.tokens, _parts(message, chars), score)


def _parts(message: Message, chars: int | None) -> list[Part]:
    out = []
    for part in message.parts:
        text = _text(part)
        out.append(
            Part(
                type=str(part.get("type", "")),
                text=text if chars is None else text[:chars],
                chars=len(text),
                tool_name=part.get("tool_name"),
                is_error=bool(part.get("is_error")),
            )
        )
    return out


def _text(part: dict[str, Any]) -> str:
    """What a part says; a tool's name is shown beside it, not repeated in it."""
    kind = part.get("type")
    if kind == "tool-call":  # one argument a line: a command or a path reads as itself
        args = part.get("args")
        if isinstance(args, dict):
            return "\n".join(
                f"{name}: {value if isinstance(value, str) else _json(value)}" for name, value in args.items()
            )
        return _json(args)
    if kind == "tool-result":
        return _json(part.get("result"))
    return part_body(part)


def _json(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _clip_words(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[:limit]
    space = cut.rfind(" ")
    if space > limit // 2:  # end on a whole word when one ends in the second half
        cut = cut[:space]
    return cut.rstrip(" ,;:.-") + "…"


def _sentence(text: str) -> str:
    """The engine's reason as the end of the line (it may start with a model's name: kept as written)."""
    text = text.strip()
    return text if text.endswith((".", ")")) else text + "."
