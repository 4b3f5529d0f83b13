"""`Limits`: the token numbers the thresholds compare against, resolved from the configuration.

A plain dataclass with no dependency, so the short-lived hook process reads the
same numbers and applies the same rules (`engine/observation/thresholds.py`) as
the server, without loading pydantic: `ObservationalMemoryConfig.limits()` makes
them, the hook caches them as JSON.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    message_tokens: int
    observation_tokens: int
    buffer_tokens: int | None  # None: observation buffering off
    buffer_activation: float  # ratio in (0,1], or >= 1000 tokens to keep
    block_after: int | None
    reflection_buffer_at: int | None  # observation tokens at which background reflection starts
    reflection_block_after: int | None
