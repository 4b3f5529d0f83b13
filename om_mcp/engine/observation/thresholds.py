"""When to buffer, activate, observe and reflect: pure functions of the numbers.

Nothing here reads the store or calls a model; each rule takes the resolved
limits (`om_mcp.limits.Limits`) and the current windows, and answers. Nothing here needs
pydantic or an event loop: the hook applies the same rules.
"""

from __future__ import annotations

from collections.abc import Sequence

from om_mcp.limits import Limits
from om_mcp.store.rows import Chunk, RecordState

MIN_REMAINING_TOKENS = 1000
# An Observer call sees at most this many message thresholds' worth of messages;
# a larger backlog is observed in several cycles.
MAX_INPUT_THRESHOLDS = 2


def message_threshold(limits: Limits, observation_tokens: int, share_token_budget: bool) -> int:
    """Unobserved tokens that trigger observation; with a shared budget, messages may
    use the room the observations do not (share_token_budget)."""
    if not share_token_budget:
        return limits.message_tokens
    total = limits.message_tokens + limits.observation_tokens
    return max(total - observation_tokens, limits.message_tokens)


def max_input_tokens(limits: Limits) -> int:
    return limits.message_tokens * MAX_INPUT_THRESHOLDS


def should_buffer(limits: Limits, pending: int, last_buffered_at: int, threshold: int) -> bool:
    """A buffering run is due when pending tokens cross a new multiple of the interval;
    the interval halves near the threshold so the last stretch is covered too."""
    interval = limits.buffer_tokens
    if not interval or pending <= 0:
        return False
    step = interval / 2 if pending >= threshold - 1.1 * interval else interval
    return int(pending // step) > int(last_buffered_at // step)


def enough_to_buffer(limits: Limits, new_tokens: int, on_idle: bool) -> bool:
    """A run with less than half an interval of new content is not worth a call,
    unless the agent went idle (buffer_on_idle)."""
    return on_idle or new_tokens >= (limits.buffer_tokens or 0) / 2


def activation_prefix(
    limits: Limits, chunks: Sequence[Chunk], pending: int, threshold: int, force: bool = False
) -> list[Chunk]:
    """The prefix of chunks an activation takes now: the smallest prefix that
    brings the window down to the kept floor without overshooting it by much, keeping
    at least min(1000, floor) tokens raw; at least one chunk."""
    if not chunks:
        return []
    ratio = limits.buffer_activation
    keep = threshold * (1 - ratio) if ratio <= 1 else ratio
    target = max(0.0, pending - keep)
    min_remaining = min(MIN_REMAINING_TOKENS, keep)
    over = under = None
    total = 0
    for index, chunk in enumerate(chunks):
        total += chunk.message_tokens
        if total >= target and over is None:
            over = (index, total)
        if total < target:
            under = (index, total)
    if force and over and pending - over[1] >= min_remaining:
        count = over[0] + 1
    elif over and over[1] - target <= 0.95 * keep and pending - over[1] >= min_remaining:
        count = over[0] + 1
    elif under and pending - under[1] >= min_remaining:
        count = under[0] + 1
    elif over:
        count = over[0] + 1
    else:
        count = 1
    return list(chunks[:count])


def past_block_after(limits: Limits, pending: int, threshold: int) -> bool:
    """Must the turn observe synchronously? With buffering, only past block_after (the
    safety valve when background work falls behind); without it, at the threshold."""
    if limits.buffer_tokens is None:
        return pending >= threshold
    return limits.block_after is not None and pending >= limits.block_after


def reflection_due(limits: Limits, observation_tokens: int, blocked_at: int | None) -> bool:
    """The log is over its threshold, and the last sync reflection did not already fail
    to get below it at this very size."""
    return observation_tokens >= limits.observation_tokens and blocked_at != observation_tokens


def reflection_buffer_due(limits: Limits, observation_tokens: int) -> bool:
    return limits.reflection_buffer_at is not None and observation_tokens >= limits.reflection_buffer_at


def reflection_must_block(limits: Limits, observation_tokens: int) -> bool:
    """Reflect synchronously now: no background reflection configured, or past its block_after."""
    if limits.reflection_buffer_at is None:
        return True
    return limits.reflection_block_after is not None and observation_tokens >= limits.reflection_block_after


def reflection_target(limits: Limits, input_tokens: int, buffered: bool) -> int:
    """The size a reflection must get below: the threshold, or 3/4 of its input ahead of time."""
    return round(0.75 * input_tokens) if buffered else limits.observation_tokens


def start_level(manual: bool, reflector_models: str) -> int:
    """Compression level of the first attempt: manual runs start gentle; models
    known to under-compress start higher."""
    if manual:
        return 0
    return 2 if "gemini-2.5-flash" in reflector_models else 1


def due_floor(limits: Limits) -> tuple[int, int]:
    """(unobserved tokens, observation tokens) from which a record may have background work:
    what the poll asks the store for (`Store.due_work`), and where `background_work_due` starts."""
    return limits.buffer_tokens or limits.message_tokens, limits.reflection_buffer_at or limits.observation_tokens


def background_work_due(limits: Limits, state: RecordState) -> bool:
    """Is there background work for this record: an interval's worth of new messages since the
    last buffering (the threshold, unbuffered), buffered observations to activate, or a log to
    reflect that no buffered reflection covers yet? (The hook asks, to start a worker.)"""
    pending_floor, reflect_floor = due_floor(limits)
    if state.pending_tokens - state.last_buffered_at_tokens >= pending_floor:
        return True
    if state.chunk_count and state.pending_tokens >= limits.message_tokens:
        return True
    return state.observation_tokens >= reflect_floor and state.buffered_reflection_generation != state.generation
