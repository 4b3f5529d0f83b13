"""When to buffer, activate, observe and reflect: the pure rules over the resolved limits,
and the idle / model-change triggers of activation."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from om_mcp.engine.observation import thresholds as t
from om_mcp.engine.observation.activation import DEFAULT_CACHE_TTL_MS, cache_ttl_ms, idle_ms, trigger_for
from om_mcp.limits import Limits
from om_mcp.store.rows import Chunk, RecordState, Thread


def limits(**changes) -> Limits:
    """The defaults: 30k message tokens, 40k observation tokens, buffering at 0.2 with block_after 1.2."""
    values = dict(
        message_tokens=30_000,
        observation_tokens=40_000,
        buffer_tokens=6_000,
        buffer_activation=0.8,
        block_after=36_000,
        reflection_buffer_at=20_000,
        reflection_block_after=48_000,
    )
    values.update(changes)
    return Limits(**values)


def chunks(*sizes: int) -> list[Chunk]:
    return [
        Chunk(
            id=f"c{i}",
            cycle_id=f"cy{i}",
            thread_id="t",
            first_seq=i,
            last_seq=i,
            first_message_id=f"m{i}",
            last_message_id=f"m{i}",
            message_count=1,
            message_tokens=size,
            text=f"* chunk {i}",
            tokens=10,
            hints={},
            last_message_at=None,
            created_at="2026-05-20T10:00:00+00:00",
        )
        for i, size in enumerate(sizes)
    ]


# --------------------------------------------------------------------------------------
# Observation
# --------------------------------------------------------------------------------------


def test_message_threshold_alone_and_with_a_shared_budget():
    assert t.message_threshold(limits(), 35_000, share_token_budget=False) == 30_000
    # Shared: messages may use the room the observations leave, never less than their own share.
    assert t.message_threshold(limits(), 10_000, share_token_budget=True) == 60_000
    assert t.message_threshold(limits(), 0, share_token_budget=True) == 70_000
    assert t.message_threshold(limits(), 40_000, share_token_budget=True) == 30_000
    assert t.message_threshold(limits(), 55_000, share_token_budget=True) == 30_000


def test_max_input_tokens_is_two_thresholds():
    assert t.max_input_tokens(limits()) == 60_000
    assert t.max_input_tokens(limits(message_tokens=500)) == 1_000


def test_should_buffer_at_each_new_interval():
    lim = limits()
    assert not t.should_buffer(lim, 5_999, 0, 30_000)
    assert t.should_buffer(lim, 6_000, 0, 30_000)
    assert not t.should_buffer(lim, 11_999, 6_000, 30_000)  # same interval as the last run
    assert t.should_buffer(lim, 12_000, 6_000, 30_000)
    assert t.should_buffer(lim, 13_000, 0, 30_000)  # a missed interval still counts


def test_should_buffer_halves_the_interval_near_the_threshold():
    lim = limits()
    # 30000 - 1.1 * 6000 = 23400: from there on, every 3000 tokens.
    assert not t.should_buffer(lim, 23_000, 20_500, 30_000)  # below: 6000-steps, same step
    assert t.should_buffer(lim, 27_000, 24_500, 30_000)  # above: 3000-steps, a new one
    assert not t.should_buffer(lim, 26_500, 24_500, 30_000)


def test_should_buffer_never_without_buffering_or_pending_tokens():
    assert not t.should_buffer(limits(buffer_tokens=None), 50_000, 0, 30_000)
    assert not t.should_buffer(limits(), 0, 0, 30_000)


def test_enough_to_buffer():
    lim = limits()
    assert not t.enough_to_buffer(lim, 2_999, on_idle=False)
    assert t.enough_to_buffer(lim, 3_000, on_idle=False)
    assert t.enough_to_buffer(lim, 1, on_idle=True)


def test_past_block_after():
    # Without buffering the turn observes at the threshold itself.
    unbuffered = limits(buffer_tokens=None, block_after=None)
    assert not t.past_block_after(unbuffered, 29_999, 30_000)
    assert t.past_block_after(unbuffered, 30_000, 30_000)
    # With buffering only past block_after.
    assert not t.past_block_after(limits(), 35_999, 30_000)
    assert t.past_block_after(limits(), 36_000, 30_000)
    assert not t.past_block_after(limits(block_after=None), 10**9, 30_000)


# --------------------------------------------------------------------------------------
# Activation of buffered chunks
# --------------------------------------------------------------------------------------


def test_activation_prefix_empty():
    assert t.activation_prefix(limits(), [], 30_000, 30_000) == []


def test_activation_takes_the_prefix_that_lands_on_the_floor():
    # ratio 0.8 of 30000: keep 6000 raw, so 24000 must go; 12000 + 12000 lands exactly.
    got = t.activation_prefix(limits(), chunks(12_000, 12_000, 6_000), 30_000, 30_000)
    assert [c.id for c in got] == ["c0", "c1"]


def test_activation_prefers_undershooting_to_a_large_overshoot():
    # 10000 + 10000 = 20000 is under 24000; a third chunk would leave nothing raw.
    got = t.activation_prefix(limits(), chunks(10_000, 10_000, 10_000), 30_000, 30_000)
    assert [c.id for c in got] == ["c0", "c1"]


def test_activation_takes_everything_when_even_all_chunks_stay_under_the_target():
    # 40000 pending, 34000 must go: all three chunks (30000) still leave 10000 raw.
    got = t.activation_prefix(limits(), chunks(10_000, 10_000, 10_000), 40_000, 30_000)
    assert [c.id for c in got] == ["c0", "c1", "c2"]


def test_activation_force_takes_an_overshooting_prefix_when_enough_stays_raw():
    # Keep 30000 raw (absolute): 10000 of 40000 must go. The second chunk overshoots by
    # 28800 (more than 0.95 of what is kept), yet leaves 1200 raw.
    lim = limits(buffer_activation=30_000)
    pieces = chunks(5_000, 33_800)
    assert [c.id for c in t.activation_prefix(lim, pieces, 40_000, 30_000)] == ["c0"]
    assert [c.id for c in t.activation_prefix(lim, pieces, 40_000, 30_000, force=True)] == ["c0", "c1"]
    # Forced or not, an overshoot that would leave under 1000 raw is not taken while a smaller prefix exists.
    tight = chunks(5_000, 34_500)
    assert [c.id for c in t.activation_prefix(lim, tight, 40_000, 30_000, force=True)] == ["c0"]


def test_activation_takes_at_least_one_chunk():
    assert [c.id for c in t.activation_prefix(limits(), chunks(30_000), 30_000, 30_000)] == ["c0"]
    assert [c.id for c in t.activation_prefix(limits(), chunks(1_000), 30_000, 30_000)] == ["c0"]


def test_activation_with_an_absolute_number_of_tokens_to_keep():
    lim = limits(buffer_activation=2_000)  # keep 2000 raw whatever the threshold
    got = t.activation_prefix(lim, chunks(14_000, 14_000, 1_000), 30_000, 30_000)
    assert [c.id for c in got] == ["c0", "c1"]  # 28000 gone, 2000 left


# --------------------------------------------------------------------------------------
# Reflection
# --------------------------------------------------------------------------------------


def test_reflection_due_at_the_threshold_unless_it_already_failed_at_this_size():
    lim = limits()
    assert not t.reflection_due(lim, 39_999, None)
    assert t.reflection_due(lim, 40_000, None)
    assert not t.reflection_due(lim, 41_000, 41_000)  # the last sync attempt could not get below it
    assert t.reflection_due(lim, 42_000, 41_000)  # the log grew since


def test_reflection_buffering():
    assert not t.reflection_buffer_due(limits(), 19_999)
    assert t.reflection_buffer_due(limits(), 20_000)
    assert not t.reflection_buffer_due(limits(reflection_buffer_at=None), 10**9)


def test_reflection_must_block():
    assert t.reflection_must_block(limits(reflection_buffer_at=None, reflection_block_after=None), 0)
    assert not t.reflection_must_block(limits(), 47_999)
    assert t.reflection_must_block(limits(), 48_000)
    assert not t.reflection_must_block(limits(reflection_block_after=None), 10**9)


def test_reflection_target():
    assert t.reflection_target(limits(), 30_000, buffered=False) == 40_000
    assert t.reflection_target(limits(), 30_000, buffered=True) == 22_500
    assert t.reflection_target(limits(), 3, buffered=True) == 2


def test_start_level():
    assert t.start_level(True, "gemini/gemini-2.5-flash") == 0
    assert t.start_level(False, "gemini/gemini-2.5-flash") == 2
    assert t.start_level(False, "openai/a -> gemini/gemini-2.5-flash") == 2
    assert t.start_level(False, "anthropic/claude-haiku-4-5") == 1


# --------------------------------------------------------------------------------------
# Idle and model-change triggers
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "model, ttl",
    [
        (None, DEFAULT_CACHE_TTL_MS),
        ("", DEFAULT_CACHE_TTL_MS),
        ("anthropic/claude-sonnet-4-5", 5 * 60_000),
        ("claude-sonnet-4-5", 5 * 60_000),
        ("openai/gpt-5", 60 * 60_000),
        ("openai/gpt-4o", 5 * 60_000),
        ("gpt-4.1-mini", 5 * 60_000),
        ("o3-mini", 60 * 60_000),
        ("gemini/gemini-2.5-flash", 24 * 3_600_000),
        ("vertex_ai/gemini-2.5-pro", 24 * 3_600_000),
        ("groq/llama-3.1-8b-instant", 2 * 3_600_000),
        ("deepseek/deepseek-chat", 60 * 60_000),
        ("mystery/model", DEFAULT_CACHE_TTL_MS),
        ("OpenAI/GPT-5", 60 * 60_000),
    ],
)
def test_cache_ttl_by_provider(model, ttl):
    assert cache_ttl_ms(model) == ttl


def test_idle_ms():
    assert idle_ms(None, "openai/gpt-5") is None
    assert idle_ms(False, "openai/gpt-5") is None
    assert idle_ms("5m", None) == 300_000
    assert idle_ms(1500, None) == 1500
    assert idle_ms("auto", "anthropic/claude-haiku-4-5") == 300_000
    assert idle_ms("auto", "gemini/gemini-2.5-flash") == 24 * 3_600_000
    with pytest.raises(ValueError):
        idle_ms("soonish", None)


def thread(
    assistant_ago: timedelta | None = None, last_model: str | None = None, previous_model: str | None = None
) -> Thread:
    at = (datetime.now(UTC) - assistant_ago).isoformat() if assistant_ago is not None else None
    return Thread(
        id="t",
        resource_id="r",
        title=None,
        title_pinned=False,
        metadata={},
        created_at="2026-05-20T10:00:00+00:00",
        updated_at="2026-05-20T10:00:00+00:00",
        last_assistant_at=at,
        last_model=last_model,
        previous_model=previous_model,
    )


def test_trigger_after_idle():
    assert trigger_for(thread(timedelta(minutes=10)), "5m", False, None) == "ttl"
    assert trigger_for(thread(timedelta(minutes=1)), "5m", False, None) is None
    assert trigger_for(thread(None), "5m", False, None) is None  # no assistant message yet
    assert trigger_for(None, "5m", True, "openai/gpt-5") is None
    assert trigger_for(thread(timedelta(days=1)), None, False, None) is None  # off


def test_trigger_after_idle_auto_follows_the_actor_model():
    idle = thread(timedelta(minutes=10), last_model="anthropic/claude-sonnet-4-5")
    assert trigger_for(idle, "auto", False, None) == "ttl"  # Anthropic caches for 5 minutes
    assert trigger_for(idle, "auto", False, "openai/gpt-5") is None  # the given model caches for an hour


def test_trigger_on_a_model_change():
    changed = thread(last_model="openai/gpt-5", previous_model="anthropic/claude-sonnet-4-5")
    assert trigger_for(changed, None, True, None) == "provider_change"
    assert trigger_for(changed, None, False, None) is None
    # A model given to the call is compared with the thread's last one.
    same = thread(last_model="openai/gpt-5", previous_model="anthropic/claude-sonnet-4-5")
    assert trigger_for(same, None, True, "openai/gpt-5") is None
    assert trigger_for(same, None, True, "gemini/gemini-2.5-pro") == "provider_change"
    assert trigger_for(thread(last_model="openai/gpt-5"), None, True, None) is None  # nothing to compare with


def record(**changes) -> RecordState:
    values = dict(
        key="thread:t",
        generation=0,
        observation_tokens=0,
        pending_tokens=0,
        pending_messages=0,
        thread_pending_tokens=0,
        thread_pending_messages=0,
        last_buffered_at_tokens=0,
        chunk_count=0,
        chunk_message_tokens=0,
        buffered_reflection_generation=None,
        reflection_blocked_at=None,
    )
    values.update(changes)
    return RecordState(**values)


def test_background_work_is_due_by_the_numbers_the_poll_asks_for():
    """The one rule the server's poll (`due_floor`) and the hooks (`background_work_due`) share."""
    buffered, unbuffered = limits(), limits(buffer_tokens=None, reflection_buffer_at=None)
    assert t.due_floor(buffered) == (6_000, 20_000) and t.due_floor(unbuffered) == (30_000, 40_000)
    assert not t.background_work_due(buffered, record(pending_tokens=5_999))
    assert t.background_work_due(buffered, record(pending_tokens=6_000))  # an interval's worth
    assert not t.background_work_due(buffered, record(pending_tokens=9_000, last_buffered_at_tokens=6_000))
    assert not t.background_work_due(unbuffered, record(pending_tokens=29_999))
    assert t.background_work_due(unbuffered, record(pending_tokens=30_000))  # the threshold, unbuffered
    # Buffered observations to activate once the window reaches the threshold.
    at_threshold = record(pending_tokens=30_000, last_buffered_at_tokens=30_000, chunk_count=2)
    assert t.background_work_due(buffered, at_threshold)
    assert not t.background_work_due(buffered, replace(at_threshold, chunk_count=0))
    # A log to reflect, unless a buffered reflection of this generation waits for it.
    assert t.background_work_due(buffered, record(observation_tokens=20_000))
    assert not t.background_work_due(buffered, record(observation_tokens=20_000, buffered_reflection_generation=0))
    assert t.background_work_due(
        buffered, record(observation_tokens=20_000, generation=1, buffered_reflection_generation=0)
    )
