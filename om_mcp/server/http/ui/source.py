"""The status page's data, read from the live engine (`contract.UiDataSource` over `Memory`).

`MemorySource(get_memory)` asks for the memory on each request (the server opens
it in its lifespan), narrowed to the caller's access (`App.memory`): a resource or
thread the token does not grant is answered as unknown (404) by the engine's reads,
so the page cannot even learn that it exists.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from om_mcp import __version__
from om_mcp.engine import Hints, InputError, NotFound, Window, message_threshold, observation_group, tenant_spend
from om_mcp.server.http.ui.contract import (
    Buffered,
    Corrected,
    Event,
    EventPage,
    ForgetDone,
    Forgotten,
    Generation,
    GrantView,
    MessagePage,
    MessagePart,
    MessageView,
    Refused,
    ResourceSummary,
    Restored,
    ServerInfo,
    ThreadDetail,
    ThreadSeries,
    ThreadSummary,
    Unknown,
)
from om_mcp.server.http.ui.series import build_series

if TYPE_CHECKING:
    from om_mcp.engine import Grants, Memory, MessageRead, ThreadState


class MemorySource:
    def __init__(self, get_memory: Callable[[], Memory]) -> None:
        self._memory = get_memory

    @property
    def memory(self) -> Memory:
        return self._memory()

    async def info(self) -> ServerInfo:
        memory = self.memory
        om, limits = memory.config.observational_memory, memory.limits
        ready, why = memory.model_state()
        readiness = await memory.overview.readiness()
        return ServerInfo(
            model_ready=ready,
            model_reason=why,
            readiness=readiness.line,
            readiness_fix=readiness.fix,
            version=__version__,
            # Where the file lives is the operator's business: only a caller unbounded by its
            # token (a token for "*", or no authentication) is told.
            database=memory.overview.location if memory.access.every_resource else None,
            scope=om.scope,
            message_threshold=limits.message_tokens,
            observation_threshold=limits.observation_tokens,
            observer_model=memory.models()[0],
            reflector_model=memory.models()[1],
        )

    async def resources(self) -> list[ResourceSummary]:
        overview = self.memory.overview
        return [
            ResourceSummary(
                id=r.id,
                threads=r.threads,
                messages=r.messages,
                updated_at=r.updated_at,
                working_memory=await overview.working_memory("resource", r.id),
            )
            for r in await overview.resources()
        ]

    async def threads(self, resource_id: str) -> list[ThreadSummary] | None:
        overview = self.memory.overview
        if not any(r.id == resource_id for r in await overview.resources()):
            return None
        states = await overview.thread_states(resource_id=resource_id)
        return [self._summary(s) for s in states]

    async def _state(self, thread_id: str) -> ThreadState | None:
        found = await self.memory.overview.thread_states(thread_id=thread_id, limit=1)
        return found[0] if found else None

    async def thread(self, thread_id: str) -> ThreadDetail | None:
        state = await self._state(thread_id)
        if state is None:
            return None
        memory = self.memory
        overview, om, limits = memory.overview, memory.config.observational_memory, memory.limits
        snap = await overview.snapshot(state.record_key, thread_id)
        generations = await overview.generations(state.record_key) if snap else []
        current = snap.record.generation if snap else 0
        wm = memory.config.working_memory
        wm_scope = wm.scope if wm.enabled else None
        stored = (
            await overview.working_memory(wm_scope, thread_id if wm_scope == "thread" else state.thread.resource_id)
            if wm_scope
            else None
        )
        chunks = snap.chunks if snap else []
        return ThreadDetail(
            thread=self._summary(state),
            record_key=state.record_key,
            scope=om.scope,
            working_memory=stored,
            working_memory_scope=wm_scope,
            hints=Hints(current_task=snap.hints.current_task, suggested_response=snap.hints.suggested_response)
            if snap
            else Hints(),
            extracted=snap.record.extracted if snap else {},
            messages_window=Window(
                tokens=snap.state.pending_tokens if snap else 0,
                threshold=message_threshold(limits, state.observation_tokens, om.share_token_budget),
            ),
            observations_window=Window(tokens=state.observation_tokens, threshold=limits.observation_tokens),
            buffered=Buffered(
                chunks=len(chunks),
                message_tokens=sum(c.message_tokens for c in chunks),
                observation_tokens=sum(c.tokens for c in chunks),
                reflection_ready=bool(snap and snap.buffered_reflection),
            ),
            generations=[
                Generation(
                    generation=n,
                    current=n == current,
                    created_at=groups[0].created_at if groups else None,
                    tokens=sum(g.tokens for g in groups),
                    groups=[observation_group(g) for g in groups],
                )
                for n, groups in reversed(generations)
            ],
            spend=_spend_for_caller(memory, (await overview.spend()).as_dict()),
            redactions=await overview.redactions(state.thread.resource_id),
        )

    async def events(self, thread_id: str, after: int | None, limit: int) -> EventPage | None:
        if await self._state(thread_id) is None:
            return None
        found = await self.memory.overview.events(thread_id, after or 0, limit)
        page = [
            Event(
                id=e.id,
                type=e.type,
                at=e.created_at,
                cycle_id=e.cycle_id,
                payload={k: v for k, v in e.payload.items() if k not in ("type", "cycle_id")},
            )
            for e in found
        ]
        return EventPage(events=page, next_after=page[-1].id if page else after)

    async def series(self, thread_id: str) -> ThreadSeries | None:
        state = await self._state(thread_id)
        if state is None:
            return None
        memory = self.memory
        inputs = await memory.overview.series_inputs(state.record_key)
        limits = memory.limits
        events = [{**e.payload, "id": e.id, "created_at": e.created_at} for e in inputs.events]
        return build_series(
            events,
            message_threshold=limits.message_tokens,
            observation_threshold=limits.observation_tokens,
            messages=inputs.messages,
        )

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
        state = await self._state(thread_id)
        if state is None:
            return None
        overview, resource_id = self.memory.overview, state.thread.resource_id
        total = state.thread.message_count
        if message_id is not None:
            found = await overview.message(thread_id, resource_id, message_id)
            if found is None:
                raise Unknown(f"no message {message_id!r} in thread {thread_id!r}")
            return MessagePage(messages=[_message(found)], total=total, more=False)
        try:
            if query is not None:
                page = await overview.search_messages(thread_id, resource_id, query, offset=offset, limit=limit)
            else:
                page = await overview.messages(thread_id, resource_id, before=before, limit=limit)
        except NotFound as error:
            raise Unknown(str(error)) from None
        except InputError as error:
            raise Refused(str(error)) from None
        shown = [_message(m) for m in page.messages]
        return MessagePage(
            messages=shown,
            total=total,
            more=page.more,
            next_before=shown[-1].id if page.more and query is None else None,
            next_offset=offset + len(shown) if page.more and query is not None else None,
            query=query,
            words=page.words,
        )

    async def retitle(self, thread_id: str, title: str) -> ThreadSummary | None:
        if await self._state(thread_id) is None:
            return None
        try:
            await self.memory.update_thread(thread_id, title=title.strip())
        except NotFound:
            return None
        except InputError as error:
            raise Refused(str(error)) from None
        state = await self._state(thread_id)
        return self._summary(state) if state else None

    def _summary(self, state: ThreadState) -> ThreadSummary:
        t = state.thread
        title, title_from = self.memory.overview.title(state)
        return ThreadSummary(
            id=t.id,
            resource_id=t.resource_id,
            title=title,
            title_from=title_from,
            messages=t.message_count,
            unobserved_tokens=state.unobserved_tokens,
            observation_tokens=state.observation_tokens,
            generation=state.generation,
            created_at=t.created_at,
            updated_at=t.updated_at,
            last_observed_at=state.last_observed_at,
        )

    async def forget_thread(self, thread_id: str) -> Forgotten | None:
        if await self._state(thread_id) is None:
            return None
        done = await self.memory.delete_thread(thread_id)
        return Forgotten(thread_id=thread_id, messages=done.deleted_messages)

    async def grants(self) -> list[GrantView]:
        return [_grant(g) for g in await self._grants().list()]

    async def revoke_grant(self, grant_id: str) -> GrantView | None:
        grants = self._grants()
        await grants.revoke(grant_id)
        found = [g for g in await grants.list() if g.id == grant_id]
        return _grant(found[0]) if found else None

    def _grants(self) -> Grants:
        """The server's OAuth grants: what every tenant was given, so an admin's alone."""
        memory = self.memory
        if not memory.access.every_resource:
            raise Refused(ADMIN_ONLY)
        return memory.grants

    async def forget_observation(self, thread_id: str, observation_id: str) -> ForgetDone | None:
        state = await self._state(thread_id)
        if state is None:
            return None
        try:
            done = await self.memory.control.forget_observation(observation_id, thread_id, state.thread.resource_id)
        except NotFound:
            return None
        except InputError as error:
            raise Refused(str(error)) from None
        return ForgetDone(
            messages=done.messages, lines=done.lines, earlier_lines=done.earlier_lines, groups=done.groups
        )

    async def correct_observation(self, thread_id: str, observation_id: str, text: str) -> Corrected | None:
        state = await self._state(thread_id)
        if state is None:
            return None
        try:
            done = await self.memory.control.edit_observation(observation_id, text, thread_id, state.thread.resource_id)
        except NotFound:
            return None
        except InputError as error:
            raise Refused(str(error)) from None
        return Corrected(id=done.id, text=done.text)

    async def restore_generation(self, thread_id: str, generation: int) -> Restored | None:
        state = await self._state(thread_id)
        if state is None:
            return None
        try:
            done = await self.memory.control.restore_generation(thread_id, generation, state.thread.resource_id)
        except NotFound:
            return None
        except InputError as error:
            raise Refused(str(error)) from None
        return Restored(restored=done.restored, generation=done.generation, groups=done.groups)


ADMIN_ONLY = "OAuth grants are the owner's: open the page with an admin token (one for '*')"


def _iso(seconds: float | None) -> str | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds")


def _grant(grant: Any) -> GrantView:
    state = "revoked" if grant.revoked else "active" if grant.live_tokens else "idle"
    return GrantView(
        id=grant.id,
        client=grant.client_name or grant.client_id,
        redirect_uris=grant.redirect_uris,
        resources=grant.resources,
        state=state,
        created_at=_iso(grant.created_at) or "",
        last_used_at=_iso(grant.used_at),
    )


def _spend_for_caller(memory: Memory, spend: dict[str, Any]) -> dict[str, Any]:
    """The server's spend is everyone's: a token bound to some resources sees the caps only."""
    return spend if memory.access.every_resource else tenant_spend(spend)


def _message(message: MessageRead) -> MessageView:
    return MessageView(
        id=message.id,
        role=message.role,
        created_at=message.created_at,
        tokens=message.tokens,
        parts=[
            MessagePart(type=p.type, text=p.text, chars=p.chars, tool_name=p.tool_name, is_error=p.is_error)
            for p in message.parts
        ],
        score=message.score,
    )
