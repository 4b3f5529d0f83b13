"""The bookkeeping invariant of observational memory, under long random runs.

A tracing Observer writes one line per message id it saw ("saw m17"), and a
Reflector keeps every id it is given ("reflected m1 m2 ..."). So the active
log says exactly which messages it covers. After random appends, context
reads, manual cycles and model failures, in both modes (buffering off; and
buffering on with the background worker running):

- every message is either unobserved (raw) or covered by exactly one line of
  the active log, never both, never neither;
- the committed cycles (observation-end and activation events) cover disjoint
  sets of messages whose union is exactly the observed set;
- the per-thread cursor never moves backward;
- buffered chunks are ordered, contiguous right after the cursor and
  non-overlapping, and cover only unobserved messages; the active groups'
  message ranges are ordered and non-overlapping and end at the cursor.
"""

from __future__ import annotations

import random
import re
from collections import Counter

import anyio
import pytest

from om_engine_helpers import (
    DEGENERATE_REPLY, Script, config, keep_ids_reflector, msg, tracing_observer,
)
from om_mcp.engine.memory import Memory
from om_mcp.models import ModelError, TransientModelError

pytestmark = pytest.mark.anyio

ID = re.compile(r"\bm\d+\b")
THREAD = "t"
KEY = f"thread:{THREAD}"
STEPS = 75  # appends of 1-6 messages each: about 260 messages per run
OPS = ("buffer", "observe", "reflect", "reflect-buffer")


def flaky(handler, rng: random.Random, rate: float):
    def reply(messages):
        roll = rng.random()
        if roll < rate / 3:
            raise ModelError("scripted outage")
        if roll < 2 * rate / 3:
            raise TransientModelError("scripted 503")
        if roll < rate:
            return DEGENERATE_REPLY
        return handler(messages)

    return reply


async def cursor(mem: Memory) -> int:
    record = await mem.store.om.record(KEY)
    return record.cursors.get(THREAD, 0) if record else 0


async def settle(mem: Memory) -> None:
    for _ in range(2000):
        if not any(mem.worker.busy(KEY, op) for op in OPS):
            return
        await anyio.sleep(0.005)
    raise AssertionError("the background worker did not settle")


async def check_invariants(mem: Memory, appended: list[str]) -> None:
    unobserved = [m.id for m in await mem.om.unobserved(THREAD, "default")]
    assert len(unobserved) == len(set(unobserved))
    groups = await mem.store.om.groups(KEY)
    counts = Counter(i for g in groups for i in ID.findall(g.text))

    duplicated = sorted((i for i, n in counts.items() if n > 1), key=lambda s: int(s[1:]))
    assert not duplicated, f"covered more than once: {duplicated}"
    both = sorted(set(unobserved) & set(counts), key=lambda s: int(s[1:]))
    assert not both, f"raw in context and observed: {both}"
    lost = [i for i in appended if i not in counts and i not in unobserved]
    assert not lost, f"neither raw nor observed: {lost}"
    assert set(counts) | set(unobserved) == set(appended), "the log names messages that were never appended"

    # The committed cycles, from their persisted events, tell the same story.
    covered: list[str] = []
    for event in await mem.store.om.events(thread_id=THREAD, limit=100_000):
        if event.type == "data-om-observation-end" and event.payload["operation_type"] == "observation":
            covered += event.payload["message_ids"]
        elif event.type == "data-om-activation" and event.payload["operation_type"] == "observation":
            covered += event.payload["message_ids"]
    assert len(covered) == len(set(covered)), "a message was committed by two cycles"
    assert set(covered) == set(counts)

    # Ranges: groups ordered and disjoint up to the cursor; chunks contiguous after it.
    position = await cursor(mem)
    last = 0
    for group in groups:
        assert group.first_seq <= group.last_seq
        assert group.first_seq > last, "active groups overlap or are out of order"
        last = group.last_seq
    assert last <= position
    chunks = await mem.store.om.chunks(KEY)
    chunk_ids = [i for c in chunks for i in c.message_ids]
    assert chunk_ids == unobserved[: len(chunk_ids)], "chunks are not a contiguous prefix after the cursor"
    previous_end = position
    for chunk in chunks:
        assert chunk.first_seq > previous_end, "chunks overlap, or a chunk starts at or before the cursor"
        assert chunk.first_seq <= chunk.last_seq
        previous_end = chunk.last_seq


async def check_tool_pairs_and_system_messages(
    mem: Memory, pairs: dict[str, list[str]], system_ids: list[str]
) -> None:
    """System messages are never observed; only a manual run may split a tool
    call from its result (the turn and background paths wait for the result)."""
    log = " ".join(g.text for g in await mem.store.om.groups(KEY))
    raw = {m.id for m in await mem.om.unobserved(THREAD, "default")}
    for mid in system_ids:
        assert not re.search(rf"\b{mid}\b", log) and mid not in raw, f"system message {mid} was observed"
    cycles = []
    for event in await mem.store.om.events(thread_id=THREAD, limit=100_000):
        payload = event.payload
        if payload.get("operation_type") != "observation":
            continue
        if event.type == "data-om-observation-end":
            cycles.append((payload["trigger"], set(payload["message_ids"])))
        elif event.type == "data-om-buffering-end":
            cycles.append(("async-buffer", set(payload["message_ids"])))
    for call_id, (call, *result) in pairs.items():
        for trigger, ids in cycles:
            if call in ids and (not result or result[0] not in ids):
                assert trigger == "manual", f"a {trigger} cycle split {call} from its tool result {result}"


async def run(seed: int, buffering: bool) -> dict[str, int]:
    rng = random.Random(seed)
    model_rng = random.Random(seed * 7919 + 1)
    script = Script(
        observer=flaky(tracing_observer, model_rng, 0.12),
        reflector=flaky(keep_ids_reflector, model_rng, 0.12),
        delay=0.003 if buffering else 0.0,  # model calls overlap appends and other cycles
    )
    options = dict(
        observation__message_tokens=300,
        reflection__observation_tokens=400,
        call_policy__timeout_seconds=5,
    )
    cfg = config(buffering=buffering, **options)
    mem = await Memory.open(cfg, db_path=":memory:", client=script.model)
    appended: list[str] = []  # every message that may be observed
    system_ids: list[str] = []  # never observed
    pairs: dict[str, list[str]] = {}  # tool_call_id -> [call message id, result message id]
    pending: str | None = None
    cursors: list[int] = [0]
    n = 0

    def next_message() -> dict:
        nonlocal n, pending
        mid = f"m{n}"
        n += 1
        roll = rng.random()
        if pending is not None:  # a result follows its call, possibly in a later append
            pairs[pending].append(mid)
            result = {"type": "tool-result", "tool_name": "search", "result": f"{mid} found", "tool_call_id": pending}
            pending = None
            appended.append(mid)
            return {"id": mid, "role": "tool", "content": [result]}
        if pending is None and roll < 0.1:
            pending = f"call-{mid}"
            pairs[pending] = [mid]
            appended.append(mid)
            return {"id": mid, "role": "assistant", "content": [
                {"type": "text", "text": f"{mid} let me look that up"},
                {"type": "tool-call", "tool_name": "search", "args": {"q": "flights"}, "tool_call_id": pending},
            ]}
        if roll > 0.97:
            system_ids.append(mid)
            return {"id": mid, "role": "system", "content": f"{mid} system note"}
        appended.append(mid)
        role = rng.choice(("user", "assistant")) if rng.random() < 0.3 else ("user" if n % 2 else "assistant")
        return msg(n - 1, role, words=rng.randint(1, 70))

    async def steps() -> None:
        for _ in range(STEPS):
            await mem.append_messages(THREAD, [next_message() for _ in range(rng.randint(1, 6))])
            roll = rng.random()
            if roll < 0.3:
                ctx = await mem.get_context(THREAD)
                raw = [m.id for m in await mem.om.unobserved(THREAD, "default")]
                shown = [m.id for m in ctx.messages]
                assert shown == raw[len(raw) - len(shown):], "context shows other than the newest raw messages"
            elif roll < 0.36:
                await mem.observe(THREAD)
            elif roll < 0.39:
                await mem.reflect(THREAD)
            elif buffering and roll < 0.6:
                await anyio.sleep(0.002)  # let background cycles interleave
            now = await cursor(mem)
            assert now >= cursors[-1], f"cursor moved backward: {cursors[-1]} -> {now}"
            cursors.append(now)

    if buffering:
        async with mem.running():
            await steps()
            await settle(mem)
    else:
        await steps()
    assert await cursor(mem) >= cursors[-1]
    await check_invariants(mem, appended)
    await check_tool_pairs_and_system_messages(mem, pairs, system_ids)

    # Drain: with a working model, everything can still be observed; nothing was lost.
    script.handlers["observer"] = tracing_observer
    script.handlers["reflector"] = keep_ids_reflector
    outcome = await mem.observe(THREAD)
    assert outcome.ran or outcome.reason
    await check_invariants(mem, appended)
    assert [m.id for m in await mem.om.unobserved(THREAD, "default")] == []

    types = Counter(e.type for e in await mem.store.om.events(thread_id=THREAD, limit=100_000))
    status = await mem.status(THREAD)
    await mem.close()
    return {"generations": status.generation_count, "cursor_moves": len(set(cursors)), **types}


@pytest.mark.parametrize("seed", [1, 2])
async def test_sync_mode_never_loses_or_duplicates(seed):
    stats = await run(seed, buffering=False)
    # The run must actually exercise the cycles it claims to test.
    assert stats["data-om-observation-end"] >= 10
    assert stats["data-om-observation-failed"] >= 1
    assert stats["generations"] >= 1
    assert stats["cursor_moves"] >= 10


@pytest.mark.parametrize("seed", [1, 2])
async def test_buffered_mode_never_loses_or_duplicates(seed):
    stats = await run(seed, buffering=True)
    assert stats["data-om-buffering-end"] >= 5
    assert stats["data-om-activation"] >= 3
    assert stats["data-om-buffering-failed"] + stats["data-om-observation-failed"] >= 1
    assert stats["generations"] >= 1
    assert stats["cursor_moves"] >= 5
