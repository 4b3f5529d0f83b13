"""The user's control over what is remembered: forget one thing, correct one line, undo a reflection.

    await memory.control.forget_message("t1", "m-42")
    await memory.control.forget_observation("3f9a0c1d2e4b5a6c.7e21ab", with_sources=True)
    preview = await memory.control.forget_match("my old address", apply=False)
    await memory.control.edit_observation("3f9a0c1d2e4b5a6c.7e21ab", "User lives in Lisbon")
    await memory.control.restore_generation("t1", 2)
    await memory.control.restore_line("3f9a0c1d2e4b5a6c.7e21ab")   # a line a reflection retired

Forgetting is for good: the store removes the text with everything derived from it
(search entries, vectors, buffered work) in one transaction, and on SQLite the bytes
leave the file. An observation goes from the group that holds it *and* from every
other generation of the log holding the same line, so neither a later reflection nor
a restore brings it back; a cycle that read the log before the change cannot commit
its result (`Record.edits`). Forgetting by phrase also scrubs what the models copied
it into: tasks, titles, extracted values, events, working memory.

Bad input changes nothing: an unknown thread, message, observation or generation is
`NotFound` naming it. Everything works within `access`, the caller's resources: a thread, message,
line or generation of another resource is unknown in the same words, and a phrase is looked for,
counted and forgotten only there. Every change is an event (`data-om-forget`, `-edit`, `-restore`)
that says what kind and how many, never the text.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field

from om_mcp.config import Config
from om_mcp.engine import forget_phrase, intake
from om_mcp.engine.errors import InputError, NotFound, translated
from om_mcp.engine.forget_phrase import snippet
from om_mcp.engine.observation import lines
from om_mcp.engine.observation.engine import ObservationEngine
from om_mcp.engine.observation.events import EventType, user_event
from om_mcp.engine.tokens import TokenCounter
from om_mcp.store import EVERY_RESOURCE, RETIRED, Access, Group, NewGroup, Record, Store
from om_mcp.store.rows import Rewrite, Rewritten

MATCH_MIN_CHARS = 3
MATCH_BATCH = 500  # messages forgotten per transaction
MAX_EDIT_CHARS = 2000
RETRIES = 5  # a plan made from a record that then moved on is made again
EDITED = "edited"  # why a corrected line left the log (the retired pile's reason)


class ForgetOut(BaseModel):
    """What a forget removed, or (`done` false) would remove."""

    done: bool = Field(description="false: a preview, nothing was changed")
    selector: Literal["message", "observation", "match"]
    messages: int = Field(0, description="raw messages")
    lines: int = Field(0, description="observation lines of active logs")
    earlier_lines: int = Field(0, description="copies in earlier generations and buffered observations")
    groups: int = Field(0, description="observation groups left empty and removed")
    derived: int = Field(
        0, description="tasks, titles, metadata, extracted values, events, working-memory lines, model-health excerpts"
    )
    items: list[dict[str, Any]] = Field(default_factory=list, description="what goes (previews)")
    more: bool = Field(False, description="more messages match than the preview lists")
    erase_pending: bool = Field(
        False,
        description="gone from the memory, but old pages of the database file still hold it while another"
        " connection reads an older snapshot: the erase finishes once it is done (`om-mcp forget --finish`)",
    )


class EditOut(BaseModel):
    id: str = Field(description="the corrected line's new id")
    text: str
    generation: int = Field(description="the log's new generation: the one before it still holds the old line")


class RestoreOut(BaseModel):
    done: bool = Field(True, description="false: a preview (--dry-run), nothing was changed")
    restored: int = Field(description="the generation made active again")
    generation: int = Field(description="the new generation that holds it")
    groups: int
    kept: list[str] = Field(
        default_factory=list, description="lines the user stated since (remembered, corrected), kept as they are now"
    )
    dropped: list[str] = Field(
        default_factory=list, description="lines of the active log the restored one does not hold (kept in history)"
    )
    back: int = Field(0, description="lines of the restored generation the active log no longer held")


class RestoreLineOut(BaseModel):
    id: str = Field(description="the line's id in the active log")
    text: str
    was: str = Field(
        description="where it came from: retired (dropped, merged, superseded, archived, edited) or generation N"
    )


class Control:
    def __init__(self, store: Store, config: Config, counter: TokenCounter, observation: ObservationEngine):
        self.store, self.config, self.counter, self.observation = store, config, counter, observation
        self.access: Access = EVERY_RESOURCE  # narrowed by `Memory.with_access`

    def with_access(self, access: Access) -> Control:
        view = copy.copy(self)
        view.access = access
        return view

    # -- messages -----------------------------------------------------------------------

    async def forget_message(self, thread_id: str, message_id: str, resource_id: str | None = None) -> ForgetOut:
        """Forget one message of a thread (and the pause marker written before it)."""
        resource_id, thread = await self._thread(thread_id, resource_id)
        intake.check_id(message_id, "message_id")
        found = await self.store.find_message(resource_id, message_id, thread_id)
        if found is None:
            raise NotFound(f"unknown message {message_id!r} in thread {thread_id!r}", field="message_id")
        seqs = [found.seq]
        marker = await self.store.find_message(resource_id, f"{message_id}~gap", thread_id)
        if marker is not None:
            seqs.append(marker.seq)
        event = user_event(EventType.FORGET, thread_id, resource_id, selector="message", messages=1)
        done = await self._apply(_fixed(Rewrite({}, messages={thread_id: seqs}, events=[event])))
        return ForgetOut(
            done=True, selector="message", messages=1 if done.messages else 0, erase_pending=not done.erased
        )

    # -- observations ---------------------------------------------------------------------

    async def forget_observation(
        self,
        observation_id: str,
        thread_id: str | None = None,
        resource_id: str | None = None,
        *,
        with_sources: bool = False,
        apply: bool = True,
    ) -> ForgetOut:
        """Forget one line (`<group id>.<hash>`) or one group: from its group and from every other
        generation holding the same lines; `with_sources` forgets the messages of the group's range too."""

        async def plan() -> tuple[Rewrite, ForgetOut]:
            record, target, generations, hashes, whole = await self._locate(observation_id, thread_id, resource_id)
            texts: dict[str, str] = {}
            counts = {"lines": 0, "earlier_lines": 0, "groups": 0}
            for generation, members in generations:
                for group in members:
                    if group.id == target.id and whole:
                        text, n = "", len(hashes)
                    elif group.id == target.id or generation != target.generation:
                        text, n = lines.remove_hashes(group.text, hashes)
                    else:
                        continue  # other groups of the chosen one's generation keep their own lines
                    if not n:
                        continue
                    texts[group.id] = text
                    chosen = group.id == target.id and generation == record.generation
                    counts["lines" if chosen else "earlier_lines"] += n
            # the retired lines it took the place of (merged into it, superseded by it), and theirs
            counts["earlier_lines"] += forget_phrase.without_sources(generations, record.generation, hashes, texts)
            groups: dict[str, tuple[str, int] | None] = {
                gid: ((text, self.counter.count_text(text)) if text.strip() else None) for gid, text in texts.items()
            }
            counts["groups"] = sum(1 for change in groups.values() if change is None)
            sources = await self._sources(record, target) if with_sources else {}
            counts["messages"] = sum(len(s) for s in sources.values())
            event = user_event(
                EventType.FORGET,
                thread_id if thread_id is not None else record.thread_id,
                record.resource_id,
                record_id=record.key,
                selector="observation",
                with_sources=with_sources,
                **counts,
            )
            shown = (
                target.text if whole else next(line.text for line in lines.lines(target.text) if line.hash in hashes)
            )
            preview = ForgetOut(
                done=False, selector="observation", items=[{"id": observation_id, "text": snippet(shown)}], **counts
            )
            return Rewrite({record.key: record.version}, messages=sources, groups=groups, events=[event]), preview

        preview = (await plan())[1]
        if not apply:
            return preview

        async def make() -> Rewrite:
            nonlocal preview
            rewrite, preview = await plan()
            return rewrite

        done = await self._apply(make)
        return preview.model_copy(
            update={"done": True, "messages": done.messages, "items": [], "erase_pending": not done.erased}
        )

    async def edit_observation(
        self, observation_id: str, text: Any, thread_id: str | None = None, resource_id: str | None = None
    ) -> EditOut:
        """Replace one line's text; the new line is marked as stated by the user."""
        if not isinstance(text, str) or not text.strip():
            raise InputError("text must be a non-empty string", field="text")
        if "\n" in text.strip() or "\r" in text:
            raise InputError("text must be one line (a line of the log is corrected at a time)", field="text")
        if len(text) > MAX_EDIT_CHARS:
            raise InputError(f"text is {len(text)} characters; the limit is {MAX_EDIT_CHARS}", field="text")
        intake.check_text(text, "text", nul=True)
        if isinstance(observation_id, str) and lines.GROUP_ID.match(observation_id.strip()):
            raise InputError(
                "give a line id (<group id>.<6 hex>), not a group id: a line is corrected at a time",
                field="observation_id",
            )
        said = intake.scrubbed(self.config, text)  # a correction keeps secrets out too (the gate's scan)
        for _ in range(RETRIES):
            record, named, _, hashes, _whole = await self._locate(observation_id, thread_id, resource_id)
            (line_hash,) = hashes
            active = await self.store.groups(record.key)
            # The line as the active log holds it: an id from before a reflection or a restore names
            # a group of an earlier generation, whose line (same hash) may sit in another group now.
            at = next((n for n, g in enumerate(active) if g.id == named.id), None)
            if at is None:
                at = next((n for n, g in enumerate(active) if line_hash in _hashes(g.text)), None)
            if at is None:
                raise InputError(
                    f"the line {observation_id} is not in the active log (a reflection retired it, or only an"
                    " earlier generation holds it): bring it back with restore --line first",
                    field="observation_id",
                )
            holder = active[at]
            old = next(line.text for line in lines.lines(holder.text) if line.hash == line_hash)
            new_line = lines.corrected(old, said)
            new_text, _ = lines.replace(holder.text, line_hash, new_line)
            # Dated like a generation: the corrected log is a new one, so the memory as of any time before
            # shows the line as it was, `show --diff` shows the change, and the old line waits on the
            # retired pile ("edited", replaced by the new one) as anything a reflection drops does.
            groups = [_copy(g) for g in active]
            groups[at].text, groups[at].tokens = new_text, self.counter.count_text(new_text)
            was = _with_date(holder.text, {line_hash})
            retired = _copy(holder)
            retired.text, retired.tokens = was, self.counter.count_text(was)
            retired.retired_reason, retired.replaced_by = EDITED, lines.line_hash(new_line)
            event = user_event(
                EventType.EDIT,
                thread_id if thread_id is not None else record.thread_id,
                record.resource_id,
                record_id=record.key,
                lines=1,
                generation_count=record.generation + 1,
            )
            if await self.store.commit_reflection(
                record.key,
                lease=None,
                generation=record.generation,
                covered=len(active),
                groups=groups,
                extracted=None,
                blocked_at=record.reflection_blocked_at,
                events=[event],
                edits=record.edits,
                retired=[retired],
            ):
                await self.observation.events.emit([event], persisted=True)
                now = await self.store.groups(record.key)
                gid = now[at].id if len(now) > at else holder.id
                return EditOut(
                    id=f"{gid}.{lines.line_hash(new_line)}", text=new_line.strip(), generation=record.generation + 1
                )
        raise InputError("the memory kept changing while editing; try again", field="observation_id")

    # -- by phrase -----------------------------------------------------------------------------

    async def forget_match(
        self, phrase: Any, resource_id: str | None = None, *, thread_id: str | None = None, apply: bool = True
    ) -> ForgetOut:
        """Forget every message and observation line holding `phrase` in any field it stores (ignoring
        case and Unicode normalisation), in one resource or every resource of the caller's access, and
        scrub it from what was derived (titles, metadata, working memory, tasks, events, model-health
        excerpts). `apply=False`: a preview. `thread_id` only names the thread the forget's event is
        listed under. What lies outside the access is neither counted nor changed, so the answer is
        the same whether another resource holds the phrase or nothing does."""
        if not isinstance(phrase, str) or len(phrase.strip()) < MATCH_MIN_CHARS:
            raise InputError(f"match must be at least {MATCH_MIN_CHARS} characters", field="match")
        phrase = phrase.strip()
        intake.check_text(phrase, "match", nul=True)
        within = self.access
        if resource_id is not None:
            intake.check_id(resource_id, "resource_id")
            within = Access.to([intake.check_access(self.access, resource_id)])
        if thread_id is not None:
            thread = await self.store.get_thread(intake.check_id(thread_id, "thread_id"))
            if thread is not None and not self.access.allows(thread.resource_id):
                raise intake.unknown_thread(thread_id)
        found = await self.store.find_text(phrase, within, limit=MATCH_BATCH)
        if not (found.messages or found.groups or found.chunks or found.derived):
            where = f" in resource {resource_id!r}" if resource_id else ""
            raise NotFound(f"nothing stored holds {phrase!r}{where}", field="match")
        if not apply:
            _, would = await forget_phrase.plan(
                self.store, self.counter.count_text, phrase, found, within=within, thread_id=None
            )
            return ForgetOut(
                done=False,
                selector="match",
                messages=would["messages"],
                lines=would["lines"],
                earlier_lines=would["earlier_lines"],
                groups=would["groups"],
                derived=found.derived,
                items=await forget_phrase.items(self.store, phrase, found),
                more=found.truncated,
            )
        total = ForgetOut(done=True, selector="match")
        counted: dict[str, int] = {}

        async def make() -> Rewrite:
            nonlocal counted
            fresh = await self.store.find_text(phrase, within, limit=MATCH_BATCH)
            plan, counted = await forget_phrase.plan(
                self.store, self.counter.count_text, phrase, fresh, within=within, thread_id=thread_id
            )
            return plan

        while True:  # a batch of messages per transaction
            done = await self._apply(make)
            total.messages += done.messages
            total.derived += done.derived
            total.groups += done.groups_removed
            total.lines += counted["lines"]
            total.earlier_lines += counted["earlier_lines"]
            total.erase_pending = not done.erased
            if not counted["more"]:
                return total

    # -- undo a reflection ---------------------------------------------------------------------

    async def restore_generation(
        self, thread_id: str, generation: Any, resource_id: str | None = None, *, apply: bool = True
    ) -> RestoreOut:
        """Make an earlier generation the active log again, as a new generation; nothing is deleted.
        What the user said since stays: a line remembered since is carried into the restored log,
        and a line corrected since (`edit`) stays corrected. `apply=False`: what it would do."""
        if isinstance(generation, bool) or not isinstance(generation, int) or generation < 0:
            raise InputError("generation must be a whole number, 0 or more", field="generation")
        resource_id, _ = await self._thread(thread_id, resource_id)
        key = self.observation.record_key(thread_id, resource_id)
        engine = self.observation
        for _ in range(RETRIES):
            record = await self.store.record(key)
            if record is None:
                raise NotFound(f"thread {thread_id!r} has no observations yet", field="thread_id")
            stored = dict(await self.store.generations(key))
            if generation not in stored:
                have = ", ".join(str(n) for n in sorted(stored)) or "none"
                raise NotFound(f"unknown generation {generation} of {key} (it has {have})", field="generation")
            if generation == record.generation:
                raise InputError(f"generation {generation} is already the active log", field="generation")
            pile = await self.store.retired_groups(key)
            plan = _restore_plan(stored[generation], stored.get(record.generation, []), pile, generation, self.counter)
            out = RestoreOut(
                done=False,
                restored=generation,
                generation=record.generation + 1,
                groups=len(plan.groups),
                kept=plan.kept,
                dropped=plan.dropped,
                back=plan.back,
            )
            if not apply:
                return out
            tokens = sum(g.tokens for g in plan.groups)
            # Lines the restored log holds again leave the retired pile (search would find them twice).
            back = {h for g in plan.groups for h in _hashes(g.text)}
            unretired = [g.id for g in pile if set(_hashes(g.text)) <= back]
            event = user_event(
                EventType.RESTORE,
                thread_id,
                resource_id,
                record_id=key,
                restored_generation=generation,
                generation_count=record.generation + 1,
                groups=len(plan.groups),
                kept=len(plan.kept),
                dropped=len(plan.dropped),
            )
            if await self.store.commit_reflection(
                key,
                lease=None,
                generation=record.generation,
                covered=len(stored.get(record.generation, [])),
                groups=plan.groups,
                extracted=None,
                # A restored log over the threshold is not condensed again until it grows.
                blocked_at=tokens if tokens >= engine.limits.observation_tokens else None,
                events=[event],
                edits=record.edits,
                unretired=unretired,
            ):
                await engine.events.emit([event], persisted=True)
                return out.model_copy(update={"done": True})
        raise InputError("the memory kept changing while restoring; try again", field="generation")

    async def restore_line(
        self, line_id: Any, thread_id: str | None = None, resource_id: str | None = None
    ) -> RestoreLineOut:
        """Bring one line back into the active log: a line a reflection retired (its id in recall's
        search or in `om-mcp show`), or a line of an earlier generation. It goes at the end of the
        log under its Date line, as a group of its own with its old range; a retired group given
        by its id (an archived day) comes back whole."""
        result: RestoreLineOut | None = None

        async def attempt() -> bool:
            nonlocal result
            record, target, _, wanted, whole = await self._locate(line_id, thread_id, resource_id)
            active = {h for g in await self.store.groups(record.key) for h in _hashes(g.text)}
            if wanted <= active:
                raise InputError(f"the line {line_id} is in the active log already", field="line_id")
            text = target.text if whole and target.retired else _with_date(target.text, wanted - active)
            pile = [g.id for g in await self.store.retired_groups(record.key) if set(_hashes(g.text)) <= wanted]
            shown = next(line for line in lines.lines(text) if line.hash is not None)
            was = f"retired ({target.retired_reason})" if target.retired else f"generation {target.generation}"
            event = user_event(
                EventType.RESTORE,
                thread_id if thread_id is not None else record.thread_id,
                record.resource_id,
                record_id=record.key,
                restored_lines=len(wanted - active),
            )
            group = NewGroup(
                text=text,
                tokens=self.counter.count_text(text),
                first_seq=target.first_seq,
                last_seq=target.last_seq,
                first_message_id=target.first_message_id,
                last_message_id=target.last_message_id,
                thread_id=target.thread_id,
                kind=target.kind,
                observed_at=target.observed_at,
            )
            if not await self.store.restore_lines(
                record.key, version=record.version, group=group, unretired=pile, events=[event]
            ):
                return False
            await self.observation.events.emit([event], persisted=True)
            gid = next(g.id for g in reversed(await self.store.groups(record.key)))
            result = RestoreLineOut(id=f"{gid}.{shown.hash}", text=shown.text.strip(), was=was)
            return True

        for _ in range(RETRIES):
            if await attempt():
                assert result is not None
                return result
        raise InputError("the memory kept changing while restoring; try again", field="line_id")

    # -- shared ------------------------------------------------------------------------------

    async def _thread(self, thread_id: str, resource_id: str | None) -> tuple[str, Any]:
        resource_id, thread = await intake.resolve(
            self.store, self.config.default_resource_id, thread_id, resource_id, self.access
        )
        if thread is None:
            raise intake.unknown_thread(thread_id)
        return resource_id, thread

    async def _locate(
        self, observation_id: Any, thread_id: str | None, resource_id: str | None
    ) -> tuple[Record, Group, list[tuple[int, list[Group]]], set[str], bool]:
        """The record, the group, every generation, the hashes of the lines to act on, and
        whether the id named the whole group."""
        if not isinstance(observation_id, str) or (parsed := lines.parse_id(observation_id)) is None:
            raise InputError(
                "observation_id: give a line id (<group id>.<6 hex>, or the 6 hex alone as `om-mcp show` prints"
                " it) or a group id (16 hex characters)",
                field="observation_id",
            )
        group_id, line_hash = parsed
        if not group_id:
            assert line_hash is not None
            group_id = await self._group_of_line(line_hash, observation_id, thread_id, resource_id)
        unknown = NotFound(f"unknown observation {observation_id!r}", field="observation_id")
        key = (await self.store.group_records([group_id])).get(group_id)
        if key is None:
            raise unknown
        if thread_id is not None:
            resource_id, _ = await self._thread(thread_id, resource_id)
            if key != self.observation.record_key(thread_id, resource_id):
                raise unknown  # another thread's memory is not this caller's to see
        record = await self.store.record(key)
        if record is not None and not self.access.allows(record.resource_id):
            raise unknown  # another resource's memory reads as none at all
        # The retired pile too: a line forgotten goes from there as well, and a retired one can be named.
        generations = [*await self.store.generations(key), (RETIRED, await self.store.retired_groups(key))]
        target = next((g for _, members in generations for g in members if g.id == group_id), None)
        if record is None or target is None:
            raise unknown
        hashes = {line.hash for line in lines.lines(target.text) if line.hash is not None}
        if line_hash is not None:
            if line_hash not in hashes:
                raise unknown
            hashes = {line_hash}
        return record, target, generations, hashes, line_hash is None

    async def _group_of_line(
        self, line_hash: str, observation_id: str, thread_id: str | None, resource_id: str | None
    ) -> str:
        """The group holding the line a short id names: in the thread's log when a thread is given, else
        in any; the active generation first. Refused, naming the full ids, when it names lines of
        several groups."""
        key = None
        if thread_id is not None:
            resource_id, _ = await self._thread(thread_id, resource_id)
            key = self.observation.record_key(thread_id, resource_id)
        holding = [
            (record_key, active, g)
            for record_key, active, g in await self.store.record_groups(self.access, key)
            if any(line.hash == line_hash for line in lines.lines(g.text))
        ]
        if not holding:
            where = f" in thread {thread_id!r}" if thread_id is not None else ""
            raise NotFound(
                f"unknown observation {observation_id!r}: no line has that id{where}", field="observation_id"
            )
        # One log holds a line in many places (every generation since it was written, the retired pile):
        # the active log's copy, else the pile's, else the newest generation's. Only lines of several
        # logs (or twice in one active log) need the full id.
        found = [h for h in holding if h[1]] or [h for h in holding if h[2].retired] or holding
        if len({k for k, _, _ in found}) == 1 and not (found[0][1] and len(found) > 1):
            found = found[:1]
        if len(found) > 1:
            names = ", ".join(f"{g.id}.{line_hash} ({record_key})" for record_key, _, g in found[:10])
            more = f" and {len(found) - 10} more" if len(found) > 10 else ""
            raise InputError(
                f"observation_id {observation_id!r} names lines in {len(found)} groups: {names}{more};"
                " give the full id (or the thread)",
                field="observation_id",
            )
        return found[0][2].id

    async def _sources(self, record: Record, group: Group) -> dict[str, list[int]]:
        """The messages of a group's range: its thread's, or (a shared group) the record's threads'."""
        owner = group.thread_id or record.thread_id
        thread_ids = [owner] if owner else sorted(record.cursors)
        out: dict[str, list[int]] = {}
        for tid in thread_ids:
            after = group.first_seq - 1
            while True:
                page = await self.store.message_page(tid, after_seq=after, before_seq=group.last_seq + 1, limit=500)
                if not page:
                    break
                out.setdefault(tid, []).extend(m.seq for m in page)
                after = page[-1].seq
        return {t: s for t, s in out.items() if s}

    async def _apply(self, make: Any) -> Rewritten:
        """Make the plan and apply it; a plan made from a record that moved on is made again."""
        engine = self.observation
        for _ in range(RETRIES):
            plan = await make()
            done = await translated(self.store.apply_rewrite(plan))
            if done is not None:
                if plan.scrub:
                    engine.health.forget_cached()  # its excerpt of an unusable answer may have been scrubbed
                await engine.events.emit(plan.events, persisted=True)
                return done
        raise InputError("the memory kept changing while forgetting; try again", field="observation_id")


@dataclass
class _Restore:
    groups: list[NewGroup]
    kept: list[str]
    dropped: list[str]
    back: int


def _restore_plan(
    source: list[Group], active: list[Group], pile: list[Group], generation: int, counter: TokenCounter
) -> _Restore:
    """Generation `generation`'s groups, with what the user said since kept: each line corrected since
    (the pile's "edited" lines retired after it, followed to the newest correction) replaced in place
    by its correction as the active log holds it, and each other user-stated line of the active log
    that the generation lacks (remembered since) carried to the end under its Date line."""
    edited = {
        old: g.replaced_by
        for g in pile
        if g.retired_reason == EDITED and g.replaced_by and (g.retired_by or 0) > generation
        for old in _hashes(g.text)
    }
    said_now = {
        line.hash: line.text
        for g in active
        for line in lines.lines(g.text)
        if line.hash is not None and lines.is_user_stated(line.text)
    }
    kept: list[str] = []
    covered: set[str] = set()
    groups = []
    for g in source:
        text = g.text
        for h in _hashes(g.text):
            newest, seen = h, {h}
            while newest in edited and edited[newest] not in seen:
                newest = edited[newest]
                seen.add(newest)
            if newest != h and newest in said_now:
                text, _ = lines.replace(text, h, said_now[newest])
                kept.append(said_now[newest].strip())
            covered.add(newest)
        copy = _copy(g)
        copy.text, copy.tokens = text, counter.count_text(text) if text != g.text else g.tokens
        groups.append(copy)
    for g in active:
        carried = {h for h in _hashes(g.text) if h in said_now and h not in covered}
        if carried:
            text = _with_date(g.text, carried)
            copy = _copy(g)
            copy.text, copy.tokens = text, counter.count_text(text)
            groups.append(copy)
            kept.extend(said_now[h].strip() for h in _hashes(text) if h in carried)
            covered |= carried
    restored = {h for g in groups for h in _hashes(g.text)}
    now = {line.hash: line.text.strip() for g in active for line in lines.lines(g.text) if line.hash is not None}
    dropped = [text for h, text in now.items() if h not in restored]
    back = len(restored - set(now))
    return _Restore(groups, kept, dropped, back)


def _fixed(plan: Rewrite) -> Any:
    async def make() -> Rewrite:
        return plan

    return make


def _hashes(text: str) -> list[str]:
    return [line.hash for line in lines.lines(text) if line.hash is not None]


def _with_date(text: str, hashes: set[str]) -> str:
    """The lines of `hashes` (with their sub-bullets) under the Date line above the first of them."""
    found = lines.lines(text)
    date, under = None, None
    kept: list[str] = []
    for line in found:
        if line.hash is None:
            if lines.is_header(line.text) and not kept:
                date = line.text.strip()
            continue
        depth = len(line.text) - len(line.text.lstrip())
        if line.hash in hashes:
            kept.append(line.text)
            under = depth
        elif under is not None and depth > under:
            kept.append(line.text)
        else:
            under = None
    return "\n".join(([date] if date else []) + kept)


def _copy(group: Group) -> NewGroup:
    return NewGroup(
        text=group.text,
        tokens=group.tokens,
        first_seq=group.first_seq,
        last_seq=group.last_seq,
        first_message_id=group.first_message_id,
        last_message_id=group.last_message_id,
        thread_id=group.thread_id,
        kind=group.kind,
        observed_at=group.observed_at,
    )
