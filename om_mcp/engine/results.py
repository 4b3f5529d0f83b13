"""The shapes the engine returns. The MCP tools return them as structured output,
so field descriptions here are what a client sees in the output schema.

One family for every view: the status page's contract (`server/http/ui/contract.py`) reuses these
shapes and adds its own fields by subclassing, so a field added here reaches the tools and the page
alike (`tests/test_result_models.py` holds it: no twin of a shape here in the contract).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from om_mcp.engine.observation.lines import is_user_stated, line_parts, observation_lines
from om_mcp.store import Group, Message, Thread


class Window(BaseModel):
    tokens: int
    threshold: int


class Hints(BaseModel):
    """What the Observer last said the thread is doing, and what the agent might answer next."""

    current_task: str | None = None
    suggested_response: str | None = None


class ActiveWindows(BaseModel):
    messages: Window = Field(description="unobserved message tokens vs observation.message_tokens")
    observations: Window = Field(description="active observation tokens vs reflection.observation_tokens")


class BufferedObservationWindow(BaseModel):
    chunks: int = 0
    message_tokens: int = 0
    projected_message_removal: int = Field(0, description="message tokens an activation would remove now")
    observation_tokens: int = 0
    status: Literal["idle", "running", "complete"] = "idle"


class BufferedReflectionWindow(BaseModel):
    input_observation_tokens: int = 0
    observation_tokens: int = 0
    status: Literal["idle", "running", "complete"] = "idle"


class BufferedWindows(BaseModel):
    observations: BufferedObservationWindow = Field(default_factory=BufferedObservationWindow)
    reflection: BufferedReflectionWindow = Field(default_factory=BufferedReflectionWindow)


class Windows(BaseModel):
    active: ActiveWindows
    buffered: BufferedWindows = Field(default_factory=BufferedWindows)


def tenant_spend(spend: dict[str, Any]) -> dict[str, Any]:
    """Of the server's spend (`BudgetState.as_dict()`), what a tenant may see: the caps and whether
    one is reached, not how much everyone spent."""
    return {k: v for k, v in spend.items() if k in ("caps", "reached", "reason", "resumes_at")}


class Status(BaseModel):
    """Where a thread's memory stands, shaped like the reference's data-om-status."""

    record_id: str
    thread_id: str
    resource_id: str
    scope: Literal["thread", "resource"]
    message_count: int = Field(description="messages stored in this thread")
    unobserved_messages: int = Field(description="messages not yet turned into observations")
    windows: Windows
    generation_count: int = Field(0, description="reflections so far")
    last_observed_at: str | None = None
    observation: ObservationState
    discarded_cycles: dict[str, int] = Field(
        default_factory=dict,
        description="cycles whose model call was thrown away since this process started, by reason",
    )
    spend: dict[str, Any] | None = Field(
        None, description="model spend today and this month (UTC), the caps set, and the cap reached if any"
    )
    redactions: dict[str, int] = Field(
        default_factory=dict, description="matches kept out of this resource's stored messages, per privacy rule"
    )
    forgotten: dict[str, Any] = Field(
        default_factory=dict,
        description="what forgetting left behind: `refused`, messages of this resource the tombstones kept out"
        " (they had been forgotten); `erase_pending_since`, when deleted text still sits in old pages of the"
        " database file because another connection reads an older snapshot",
    )
    # The same observation state without the breaker's failure text (`for_tenant`); never shown itself.
    tenant_observation: ObservationState | None = Field(None, exclude=True)

    def for_tenant(self) -> Status:
        """What a caller bound to some resources may see. The model's breaker is one for the whole
        server and its failure text quotes whichever tenant's messages the model was shown, so the
        state is said in our words; the spend is the whole server's, so only the caps and whether
        one is reached are kept."""
        spend = None if self.spend is None else tenant_spend(self.spend)
        observation = self.tenant_observation or self.observation.model_copy(
            update={"reason": None, "last_failure": None}
        )
        return self.model_copy(update={"observation": observation, "spend": spend})


class ObservationState(BaseModel):
    """Whether observation can run, and if not, why and until when."""

    enabled: bool = True
    model_ready: bool = True
    model: str | None = Field(None, description="the model that observes")
    reason: str | None = Field(None, description="one line: why observation is paused and how to fix it")
    warming_up: bool = Field(False, description="the model client is loading (seconds after start)")
    last_failure: str | None = None
    next_attempt_at: str | None = Field(None, description="when a failing model is tried again (ISO-8601)")
    budget_paused: bool = Field(False, description="a spend cap is reached; observation resumes at next_attempt_at")


class MessageOut(BaseModel):
    id: str
    thread_id: str
    role: str
    created_at: str
    parts: list[dict[str, Any]]
    # The stored count (role, parts, overhead): what fits a budget, without counting again.
    tokens: int = Field(0, exclude=True)


class AppendOutcome(BaseModel):
    appended: int
    skipped_duplicates: int
    forgotten: int = Field(0, description="messages refused because they were forgotten (tombstones)")
    thread_id: str
    resource_id: str
    thread_created: bool = False
    remembered: int = Field(0, description="<remember> spans now in the log as user-stated lines")
    status: Status | None = None
    events: list[dict[str, Any]] = Field(default_factory=list)


class _AsShown:
    """A context's messages: the store's rows as they are (the engine made them: nothing to validate, no
    copy per call), dumped as a client is shown them (no seq, which a moved memory renumbers, no count)."""

    @staticmethod
    def __get_pydantic_core_schema__(source: Any, handler: Any) -> Any:
        schema = handler(list[Any])
        schema["serialization"] = {"type": "function-plain", "function": _shown}  # pydantic-core's plain serializer
        return schema


def _shown(rows: list[Message]) -> list[dict[str, Any]]:
    return [message_out(m).model_dump() for m in rows]


class ContextOut(BaseModel):
    thread_id: str
    resource_id: str
    system_text: str = Field(description="ready to inject as system context: memory, task hints, working memory")
    observations: str | None = Field(None, description="the observation log prepared for the agent")
    current_task: str | None = None
    suggested_response: str | None = None
    working_memory: str | dict | None = None
    # The store's rows as read (not copied into a model each call: a long window is shown every turn).
    messages: Annotated[list[Message], _AsShown()] = Field(description="the unobserved messages that fit, oldest first")
    omitted_messages: int = Field(0, description="older unobserved messages left out to fit max_tokens")
    truncated: bool = False
    status: Status | None = None
    events: list[dict[str, Any]] = Field(default_factory=list)
    as_of: str | None = Field(None, description="the memory as it was at this time (UTC), not now")


class WorkingMemoryOut(BaseModel):
    scope: Literal["resource", "thread"]
    mode: Literal["template", "schema"]
    thread_id: str
    resource_id: str
    memory: str | dict | None
    read_only: bool = False
    updated: bool | None = None
    notice: str | None = None


class RememberOut(BaseModel):
    id: str = Field(description="the remembered line's id")
    text: str = Field(description="the line as the log holds it")
    record_key: str = Field(
        description="whose memory: thread:<id>, resource:<id>, or resource:~user (the person layer)"
    )


class ThreadRow(BaseModel):
    """A thread as every view names it: what the tools' `ThreadOut` and the page's summary share."""

    id: str
    resource_id: str
    title: str | None
    created_at: str
    updated_at: str


class ThreadOut(ThreadRow):
    message_count: int
    metadata: dict[str, Any] = Field(default_factory=dict)
    current: bool = False


class ObservationLine(BaseModel):
    """One line of a group; `id` (`<group id>.<6 hex>`) when it can be forgotten or corrected.
    `text` is the line as stored; a view shows `priority` as a word and `body` after it."""

    id: str | None = None
    text: str
    user_stated: bool = False  # remembered or corrected by the user: every reflection keeps it word for word
    indent: int = 0
    priority: Literal["high", "medium", "low", "done"] | None = None
    time: str | None = Field(None, description="HH:MM, when the line has one")
    body: str = Field("", description="the words after the marker and time: what a correction replaces")


class ObservationGroup(BaseModel):
    """One block of the observation log."""

    id: str
    position: int
    kind: Literal["observation", "reflection"]
    text: str
    tokens: int
    thread_id: str | None = None
    first_message_id: str | None = None
    last_message_id: str | None = None
    observed_at: str | None = None
    created_at: str | None = None
    lines: list[ObservationLine] = Field(default_factory=list)


class DeleteOut(BaseModel):
    thread_id: str
    deleted_messages: int
    erase_pending: bool = Field(
        False, description="gone from the memory, but old pages of the database file still hold it (a reader)"
    )


class SearchResult(BaseModel):
    message_id: str
    thread_id: str
    role: str
    created_at: str
    score: float
    snippet: str
    source: Literal["message", "observation"] = "message"
    range: str | None = Field(None, description="for an observation: the message range it was made from")
    id: str | None = Field(None, description="for an observation: its group id (om-mcp restore --line takes it)")
    retired: str | None = Field(
        None,
        description="for a retired observation: why it left the log (dropped, merged, superseded, archived, edited)",
    )
    retired_by: int | None = Field(None, description="the generation that retired it")


class RecallOut(BaseModel):
    mode: Literal["messages", "threads", "search"]
    text: str = Field(description="the result formatted for reading")
    messages: list[dict[str, Any]] = Field(default_factory=list)
    threads: list[ThreadOut] = Field(default_factory=list)
    results: list[SearchResult] = Field(default_factory=list)
    count: int = 0
    cursor: str | None = None
    page: int = 1
    limit: int = 20
    detail: Literal["low", "high"] = "low"
    has_next_page: bool = False
    has_prev_page: bool = False
    truncated: bool = False
    token_offset: int | None = Field(None, description="approximate tokens cut by the output budget")
    part_index: int | None = None
    next_char_offset: int | None = None
    hint: str | None = None


class CycleOut(BaseModel):
    operation: str
    ran: bool = Field(description="false when there was nothing to do, or the run failed (see error)")
    cycle_id: str | None = None
    reason: str | None = None
    error: str | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    status: Status | None = None
    events: list[dict[str, Any]] = Field(default_factory=list)


Status.model_rebuild()


def message_out(message: Message) -> MessageOut:
    return MessageOut(
        id=message.id,
        thread_id=message.thread_id,
        role=message.role,
        created_at=message.created_at,
        parts=message.parts,
        tokens=message.tokens,
    )


def thread_out(thread: Thread) -> ThreadOut:
    return ThreadOut(
        id=thread.id,
        resource_id=thread.resource_id,
        title=thread.title,
        created_at=thread.created_at,
        updated_at=thread.updated_at,
        message_count=thread.message_count,
        metadata=thread.metadata,
    )


def observation_group(group: Group) -> ObservationGroup:
    """A stored group with its lines taken apart (marker, time, words) for a view."""
    return ObservationGroup(
        id=group.id,
        position=group.position,
        kind=group.kind,
        text=group.text,
        tokens=group.tokens,
        thread_id=group.thread_id,
        first_message_id=group.first_message_id,
        last_message_id=group.last_message_id,
        observed_at=group.observed_at,
        created_at=group.created_at or None,
        lines=[_line(line_id, text) for line_id, text in observation_lines(group.id, group.text)],
    )


def _line(line_id: str | None, text: str) -> ObservationLine:
    parts = line_parts(text)
    return ObservationLine(
        id=line_id,
        text=text,
        user_stated=line_id is not None and is_user_stated(text),
        indent=parts.indent,
        priority=parts.priority,
        time=parts.time,
        body=parts.body,
    )
