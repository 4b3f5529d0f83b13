"""The status page's JSON contract: what each endpoint returns, and the data source behind it.

Endpoints (all JSON; errors are {"error": "..."} with 400 or 404):

    GET    /api/info                                  ServerInfo
    GET    /api/resources                             list[ResourceSummary]
    GET    /api/resources/{resource_id}/threads       list[ThreadSummary]     (404: unknown resource)
    GET    /api/threads/{thread_id}                   ThreadDetail            (404: unknown thread)
    GET    /api/threads/{thread_id}/events?after=&limit=   EventPage          (after: last id seen; limit <= 500)
    GET    /api/threads/{thread_id}/series            ThreadSeries
    GET    /api/threads/{thread_id}/messages?before=&limit=     MessagePage  (newest first; before: an id)
    GET    /api/threads/{thread_id}/messages?q=&offset=&limit=  MessagePage  (best match first)
    GET    /api/threads/{thread_id}/messages?id=              MessagePage     (that one message, whole)
    PUT    /api/threads/{thread_id}/title             ThreadSummary          body {"title": "..."}
    DELETE /api/threads/{thread_id}                   Forgotten               (the page asks first)
    DELETE /api/threads/{thread_id}/observations/{id}  ForgetDone             (a line or group; asks first)
    PUT    /api/threads/{thread_id}/observations/{id}  Corrected              body {"text": "..."}
    POST   /api/threads/{thread_id}/restore            Restored               body {"generation": N}
    GET    /api/grants                                list[GrantView]         (an admin's: 403 for a tenant)
    DELETE /api/grants/{grant_id}                     GrantView               (revoke a remote client's grant)

The page changes nothing but through those six: forget a thread, forget or correct
one line, restore an earlier generation, name a thread, revoke an OAuth grant. PUT and POST
take JSON only (a form posted from another site cannot reach them). Times are ISO-8601 strings with a time zone;
token counts are the engine's stored counts.

What the plots are drawn from (see `series.build_series`): every cycle-ending
event (observation-end, buffering-end, activation, observation-failed,
buffering-failed, and their reflection forms) carries, besides `duration_ms`,
`model`, `usage.cost` and its token fields, a `windows` object that the store
fills in inside the cycle's own commit: `unobserved_tokens`,
`observation_tokens` (the record's two windows right after it),
`message_threshold`, `observation_threshold` (and `shared_budget` when the
budget is shared), and `seq`, the newest message those numbers include. No
event is written per append: between cycles the unobserved line rises with the
stored messages themselves (their dates and token counts), placed by seq.

The rows the tools show too (a window, the hints, a thread, the log's groups and lines) are the
engine's result models (`engine/results.py`), reused as they are or extended here with the page's
own fields, so both views of a row say the same thing.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from om_mcp.engine import Hints, ObservationGroup, ThreadRow, Window


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ServerInfo(_Out):
    """The page header: what is running and its two thresholds."""

    name: str = "om-mcp"
    version: str
    database: str | None = Field(None, description="where the memory lives, as the user would recognise it")
    scope: Literal["thread", "resource"]
    message_threshold: int = Field(description="observation.message_tokens")
    observation_threshold: int = Field(description="reflection.observation_tokens")
    observer_model: str | None = None
    reflector_model: str | None = None
    model_ready: bool = Field(True, description="can observation call its model now (no network asked)")
    model_reason: str | None = Field(None, description="why not, and how to fix it, when it cannot")
    readiness: str = Field("", description="one calm line: what happens now (the header shows it)")
    readiness_fix: str | None = Field(None, description="what to do for observation to run, when it cannot")


class ResourceSummary(_Out):
    id: str
    threads: int
    messages: int
    updated_at: str | None = None
    working_memory: str | None = Field(None, description="the resource-scoped working memory, if any")


class ThreadSummary(ThreadRow, _Out):
    title: str | None = None
    title_from: Literal["set", "observer", "first-prompt"] | None = Field(
        None, description="set by a person or a client (the Observer keeps it), the Observer's, or the first prompt"
    )
    messages: int
    unobserved_tokens: int = Field(description="tokens of this thread's messages after the cursor")
    observation_tokens: int = Field(description="tokens of the active observation log of its record")
    generation: int
    last_observed_at: str | None = None


class Generation(_Out):
    """The log as it stood in one generation: observations appended, until a reflection starts the next."""

    generation: int
    current: bool
    created_at: str | None = Field(None, description="when it started (the reflection that made it)")
    tokens: int
    groups: list[ObservationGroup]


class Buffered(_Out):
    """Work done ahead and not yet active."""

    chunks: int = 0
    message_tokens: int = 0
    observation_tokens: int = 0
    reflection_ready: bool = False


class ThreadDetail(_Out):
    thread: ThreadSummary
    record_key: str = Field(description="thread:<id> or resource:<id>")
    scope: Literal["thread", "resource"]
    working_memory: str | None = None
    working_memory_scope: Literal["thread", "resource"] | None = None
    hints: Hints = Hints()
    extracted: dict[str, Any] = Field(default_factory=dict)
    messages_window: Window = Field(description="unobserved message tokens against observation.message_tokens")
    observations_window: Window = Field(description="observation log tokens against reflection.observation_tokens")
    buffered: Buffered = Buffered()
    generations: list[Generation] = Field(description="oldest first; the last one is current")
    spend: dict[str, Any] | None = Field(None, description="model spend today and this month, the caps, why paused")
    redactions: dict[str, int] = Field(default_factory=dict, description="secrets kept out, per privacy rule")


class Event(_Out):
    id: int = Field(description="increasing; pass the last one seen as ?after= to poll")
    type: str = Field(description="e.g. data-om-observation-end")
    at: str
    cycle_id: str | None = None
    payload: dict[str, Any] = Field(default_factory=dict)


class EventPage(_Out):
    events: list[Event] = Field(description="oldest first, ids > after")
    next_after: int | None = Field(description="the last id returned (or `after` when none): the next ?after=")


class SeriesPoint(_Out):
    """The two windows that drive everything, at one instant."""

    at: str
    unobserved_tokens: int
    observation_tokens: int
    message_threshold: int
    observation_threshold: int


class Cycle(_Out):
    """One Observer / Reflector run (or an activation, which calls no model)."""

    at: str
    kind: Literal["observation", "buffering", "activation", "reflection"]
    ok: bool = True
    trigger: str | None = None
    duration_ms: int | None = None
    cost: float | None = Field(None, description="USD, when the provider reported it")
    model: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None


class ThreadSeries(_Out):
    points: list[SeriesPoint] = Field(description="in time order")
    cycles: list[Cycle] = Field(description="in time order")


class MessagePart(_Out):
    type: str = Field(description="text, reasoning, tool-call, tool-result, image or file")
    text: str = Field(description="the text; a tool call's arguments or a tool result's output; cut in a page")
    chars: int = Field(description="the whole text's length: more than len(text) when cut")
    tool_name: str | None = None
    is_error: bool = False


class MessageView(_Out):
    id: str
    role: str
    created_at: str
    tokens: int
    parts: list[MessagePart]
    score: float | None = Field(None, description="the search's score, when found by one")


class MessagePage(_Out):
    messages: list[MessageView] = Field(description="newest first; a search's best match first")
    total: int = Field(description="the thread's messages")
    more: bool = Field(description="more follow this page")
    next_before: str | None = Field(None, description="browsing: pass as ?before= for the next page")
    next_offset: int | None = Field(None, description="searching: pass as ?offset= for the next page")
    query: str | None = None
    words: list[str] = Field(default_factory=list, description="the search's words, for marking them")


class GrantView(_Out):
    """A remote client's OAuth grant (`om-mcp token list` shows the same)."""

    id: str
    client: str = Field(description="the name the client registered with, else its id")
    redirect_uris: list[str]
    resources: list[str] = Field(description="what the owner granted on the consent page: its tenant scope")
    state: Literal["active", "idle", "revoked"] = Field(description="idle: its tokens expired unused")
    created_at: str
    last_used_at: str | None = None


class Forgotten(_Out):
    thread_id: str
    messages: int = Field(description="how many messages were deleted")


class ForgetDone(_Out):
    messages: int = 0
    lines: int = Field(0, description="lines of the active log")
    earlier_lines: int = Field(0, description="copies in earlier generations")
    groups: int = Field(0, description="groups left empty and removed")


class Corrected(_Out):
    id: str = Field(description="the line's new id")
    text: str


class Restored(_Out):
    restored: int
    generation: int
    groups: int


class Refused(Exception):
    """Bad input (400) with its one-line reason; nothing was changed."""


class Unknown(Exception):
    """What the request names is not there (404), with its one-line reason."""


class UiDataSource(Protocol):
    """What the page needs from the engine; the HTTP layer only serialises it.

    A method returns None when the id names nothing (the route answers 404).
    """

    async def info(self) -> ServerInfo: ...

    async def resources(self) -> list[ResourceSummary]: ...

    async def threads(self, resource_id: str) -> list[ThreadSummary] | None: ...

    async def thread(self, thread_id: str) -> ThreadDetail | None: ...

    async def events(self, thread_id: str, after: int | None, limit: int) -> EventPage | None: ...

    async def series(self, thread_id: str) -> ThreadSeries | None: ...

    async def messages(
        self,
        thread_id: str,
        *,
        limit: int,
        before: str | None = None,
        query: str | None = None,
        offset: int = 0,
        message_id: str | None = None,
    ) -> MessagePage | None:
        """Newest first (older than `before`), or the search's best matches for `query` from
        `offset`, or the one message `message_id` whole; raises Unknown for a message id not in
        the thread, Refused for a query with no words."""
        ...

    async def retitle(self, thread_id: str, title: str) -> ThreadSummary | None:
        """Name the thread; the Observer no longer renames it. Raises Refused for a bad title."""
        ...

    async def forget_thread(self, thread_id: str) -> Forgotten | None:
        """Delete the thread, its messages, its record (thread scope) and its events."""
        ...

    async def grants(self) -> list[GrantView]:
        """Every OAuth grant, newest first. Raises Refused unless the caller is an admin."""
        ...

    async def revoke_grant(self, grant_id: str) -> GrantView | None:
        """End a grant and every token it issued. Raises Refused unless the caller is an admin."""
        ...

    async def forget_observation(self, thread_id: str, observation_id: str) -> ForgetDone | None:
        """Forget a line or group of the thread's log (and its copies in earlier generations)."""
        ...

    async def correct_observation(self, thread_id: str, observation_id: str, text: str) -> Corrected | None:
        """Replace a line's text; raises Refused for bad text."""
        ...

    async def restore_generation(self, thread_id: str, generation: int) -> Restored | None:
        """Make an earlier generation active again; raises Refused for the current one."""
        ...
