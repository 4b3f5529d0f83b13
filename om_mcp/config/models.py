"""Config types for choosing and calling models (a provider/model string,
a fallback list, or a by-input-size table).

These are used inside the project's config model, so TOML keys are snake_case
and unknown keys are errors that name the key (extra="forbid"); `om_mcp.models`
calls the models they describe.

A model choice is one of:
  * a "provider/model" string routed through litellm ("google/..." is mapped to
    litellm's "gemini/...", and "default" means DEFAULT_MODEL);
  * a `ModelTarget` table (model plus endpoint, key and retry settings);
  * a fallback list of strings or targets, tried in order;
  * a `ByInputSize` table picking a model by the call's input token count.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    TypeAdapter,
    field_validator,
    model_validator,
)

DEFAULT_MODEL = "gemini/gemini-2.5-flash"
# Resolved at start from what the machine has: a provider key, the claude CLI, or MCP sampling.
AUTO = "auto"
DEFAULT_MAX_OUTPUT_TOKENS = 100_000

# Mastra-style provider prefixes that litellm spells differently.
PROVIDER_ALIASES = {"google": "gemini"}

# Keys the client sets itself; letting provider_options override them would
# silently defeat timeouts, retries or key handling.
RESERVED_PROVIDER_OPTIONS = frozenset(
    {
        "model",
        "messages",
        "timeout",
        "num_retries",
        "max_retries",
        "api_key",
        "api_base",
        "base_url",
        "stream",
        "temperature",
        "max_tokens",
    }
)


def map_model_name(name: str) -> str:
    """The litellm name for a configured model string ("default", "google/x" -> "gemini/x")."""
    name = name.strip()
    if not name:
        raise ValueError("model name must not be empty")
    if name == "default":
        return DEFAULT_MODEL
    if name == AUTO:
        return AUTO
    provider, sep, rest = name.partition("/")
    if sep and provider in PROVIDER_ALIASES:
        return f"{PROVIDER_ALIASES[provider]}/{rest}"
    return name


ModelName = Annotated[str, AfterValidator(map_model_name)]


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ModelTarget(_Config):
    """One model to call, with its endpoint, key and retry count; a fallback list tries
    each enabled entry with its own retries before the next."""

    model: ModelName = Field(description="litellm 'provider/model'; 'google/' becomes 'gemini/'")
    api_base: str | None = Field(default=None, description="endpoint URL, e.g. http://127.0.0.1:8080/v1")
    api_key_env: str | None = Field(default=None, description="name of the environment variable that holds the API key")
    max_retries: int = Field(default=2, ge=0, description="retries of transient errors for this entry")
    enabled: bool = True

    @field_validator("api_base", "api_key_env")
    @classmethod
    def _not_blank(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("must not be empty when set")
        return value.strip() if value is not None else None


ModelEntry = ModelName | ModelTarget


class ByInputSize(_Config):
    """Pick a model by the call's input token count.

    `up_to` maps a threshold to a model; an input goes to the smallest
    threshold that is >= its size. TOML table keys are strings, so "8000" and
    8000 both work; thresholds are kept sorted ascending.
    """

    up_to: dict[int, ModelEntry]

    @field_validator("up_to", mode="before")
    @classmethod
    def _parse_thresholds(cls, raw: Any) -> Any:
        if not isinstance(raw, dict):
            return raw  # let pydantic report the type error
        if not raw:
            raise ValueError("up_to must list at least one threshold")
        parsed: dict[int, Any] = {}
        for key, value in raw.items():
            threshold = _parse_threshold(key)
            if threshold in parsed:
                raise ValueError(f"up_to threshold {key!r} is a duplicate of {threshold}")
            parsed[threshold] = value
        return dict(sorted(parsed.items()))

    def thresholds(self) -> list[int]:
        return sorted(self.up_to)

    def resolve(self, input_tokens: int) -> ModelEntry | None:
        """The entry of the smallest threshold >= input_tokens (inclusive); None above the largest."""
        for threshold in self.thresholds():
            if input_tokens <= threshold:
                return self.up_to[threshold]
        return None


def _parse_threshold(key: Any) -> int:
    if isinstance(key, bool):
        raise ValueError(f"up_to threshold {key!r} is not an integer")
    try:
        value = key if isinstance(key, int) else int(str(key).strip())
    except ValueError:
        raise ValueError(f"up_to threshold {key!r} is not an integer") from None
    if value <= 0:
        raise ValueError(f"up_to threshold {key!r} must be a positive integer")
    return value


def _choice_kind(value: Any) -> str | None:
    # Discriminating by shape gives one clear error per field instead of one
    # per union member.
    if isinstance(value, str):
        return "name"
    if isinstance(value, (list, tuple)):
        return "fallbacks"
    if isinstance(value, ByInputSize) or (isinstance(value, dict) and "up_to" in value):
        return "by_input_size"
    if isinstance(value, (ModelTarget, dict)):
        return "target"
    return None


FallbackList = Annotated[list[ModelEntry], Field(min_length=1)]

ModelChoice = Annotated[
    Annotated[ModelName, Tag("name")]
    | Annotated[ModelTarget, Tag("target")]
    | Annotated[FallbackList, Tag("fallbacks")]
    | Annotated[ByInputSize, Tag("by_input_size")],
    Discriminator(
        _choice_kind,
        custom_error_type="model_choice",
        custom_error_message=(
            "a model choice is a model string, a table with 'model', a list of those, or a table with 'up_to'"
        ),
    ),
]

_choice_adapter: TypeAdapter[Any] = TypeAdapter(ModelChoice)


def parse_model_choice(raw: Any) -> Any:
    """Validate a raw choice (string, dict, list, or already-built objects)."""
    return _choice_adapter.validate_python(raw)


def as_target(entry: str | ModelTarget) -> ModelTarget:
    return entry if isinstance(entry, ModelTarget) else ModelTarget(model=entry)


def normalize_choice(choice: Any) -> list[ModelTarget] | ByInputSize:
    """The uniform internal form: an ordered fallback list of targets, or a by-size selector.

    `None` means the default model (an unset role falls back to the other role's model,
    then to the default, in the caller's config).
    """
    if choice is None:
        return [ModelTarget(model=DEFAULT_MODEL)]
    choice = parse_model_choice(choice)
    if isinstance(choice, ByInputSize):
        return choice
    if isinstance(choice, list):
        return [as_target(entry) for entry in choice]
    return [as_target(choice)]


class ModelSettings(_Config):
    """Per-role generation settings: temperature, max_output_tokens, provider options."""

    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    max_output_tokens: int | None = Field(default=None, ge=1)
    provider_options: dict[str, Any] = Field(
        default_factory=dict, description="passed to litellm verbatim, e.g. Gemini thinking settings"
    )

    @field_validator("provider_options")
    @classmethod
    def _no_reserved_keys(cls, value: dict[str, Any]) -> dict[str, Any]:
        clash = sorted(set(value) & RESERVED_PROVIDER_OPTIONS)
        if clash:
            raise ValueError(f"provider_options may not set {', '.join(clash)}; use the dedicated settings")
        return value


def is_default_selection(choice: Any) -> bool:
    """True for the default model selection (which gets a default max_output_tokens): unset, "default", the
    default model itself, or a by-input-size selector."""
    if choice is None:
        return True
    normal = normalize_choice(choice)
    if isinstance(normal, ByInputSize):
        return True
    # A fallback list is a custom choice even if it names the default model.
    return len(normal) == 1 and not isinstance(choice, list) and normal[0].model == DEFAULT_MODEL


def effective_max_output_tokens(choice: Any, settings: ModelSettings | None) -> int | None:
    """max_output_tokens for a call: the configured value, else 100000
    for the default selection, else None (the provider's own default)."""
    if settings is not None and settings.max_output_tokens is not None:
        return settings.max_output_tokens
    return DEFAULT_MAX_OUTPUT_TOKENS if is_default_selection(choice) else None


class CallPolicy(_Config):
    """Timeouts and retry pacing shared by every call: only transient errors are retried.

    Each attempt gets `timeout_seconds` (less if the budget is nearly spent);
    transient failures are retried with exponential backoff and jitter; no new
    attempt or sleep starts once `total_budget_seconds` would be exceeded, so a
    dead provider never holds a caller for minutes.
    """

    timeout_seconds: float = Field(default=20.0, gt=0)
    total_budget_seconds: float = Field(default=45.0, gt=0)
    backoff_initial_seconds: float = Field(default=0.5, ge=0)
    backoff_max_seconds: float = Field(default=8.0, ge=0)
    jitter: float = Field(default=0.2, ge=0, le=1, description="± fraction applied to each backoff")

    @model_validator(mode="after")
    def _backoff_order(self) -> CallPolicy:
        if self.backoff_max_seconds < self.backoff_initial_seconds:
            raise ValueError("backoff_max_seconds must be >= backoff_initial_seconds")
        return self
