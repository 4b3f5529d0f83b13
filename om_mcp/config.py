"""The one configuration model, loaded from TOML, `OM_*` variables and flags.

Precedence: flags > environment > file > defaults. Every key is checked at
start; an unknown key or a bad value stops start-up with its full key path.
Fractions and multipliers (buffer_tokens = 0.2, block_after = 1.2, ...) are
resolved into token counts once, here, so the engine only sees numbers.
"""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal, Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from om_mcp.engine.durations import parse_idle
from om_mcp.engine.extractors import check_extractors
from om_mcp.engine.working_memory import WorkingMemoryConfig
from om_mcp.models.settings import CallPolicy, ModelChoice, ModelSettings

ENV_PREFIX = "OM_"
CONFIG_FILE_ENV = "OM_MCP_CONFIG"
# Short names people actually type, mapped to their key paths.
ENV_ALIASES = {
    "OM_DB_PATH": ("db_path",),
    "OM_MODEL": ("observational_memory", "model"),
    "OM_HTTP_TOKEN": ("server", "auth", "http_token"),  # one plain token for all resources, hashed at load
}


class ConfigError(ValueError):
    """Start-up configuration is invalid; the message names the option."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


TOKEN_HASH_PREFIX = "sha256:"


def hash_token(token: str) -> str:
    """How a bearer token is stored: the sha256 of a high-entropy secret needs no salt or stretching."""
    return TOKEN_HASH_PREFIX + hashlib.sha256(token.encode()).hexdigest()


class TokenEntry(_Section):
    """One bearer token, stored as its hash, bound to the resources it may use ("*" = all)."""

    hash: str = Field(description="hash_token() of the secret")
    resources: list[Annotated[str, Field(min_length=1, max_length=200)]] = Field(min_length=1)
    name: str = Field("", max_length=100, description="who holds it; shown in logs, never secret")

    @field_validator("hash")
    @classmethod
    def _hash(cls, value: str) -> str:
        value = value.strip().lower()
        digest = value.removeprefix(TOKEN_HASH_PREFIX)
        if not value.startswith(TOKEN_HASH_PREFIX) or len(digest) != 64 or digest.strip("0123456789abcdef"):
            raise ValueError("must be 'sha256:' and 64 hex digits (the line om-mcp token create prints), not the token")
        return value


class AuthConfig(_Section):
    mode: Literal["none", "bearer"] | None = Field(
        None, description="none or bearer; unset means bearer when tokens are configured"
    )
    tokens: list[TokenEntry] = Field(default_factory=list)
    http_token: str | int | None = Field(None, exclude=True, repr=False, description="from OM_HTTP_TOKEN")
    resource_url: str | None = Field(
        None, pattern=r"^https?://", description="public URL of the MCP endpoint (protected-resource metadata)"
    )
    authorization_servers: list[Annotated[str, Field(pattern=r"^https?://")]] = Field(default_factory=list)

    @model_validator(mode="after")
    def _check(self) -> "AuthConfig":
        if self.http_token is not None:
            plain = str(self.http_token)  # an all-digit token arrives parsed as a JSON number
            if len(plain) < 16:
                raise ValueError("http_token (OM_HTTP_TOKEN) must be at least 16 characters; use om-mcp token create")
            self.tokens.append(TokenEntry(hash=hash_token(plain), resources=["*"], name="OM_HTTP_TOKEN"))
            self.http_token = None
        hashes = [t.hash for t in self.tokens]
        if len(set(hashes)) != len(hashes):
            raise ValueError("tokens: the same token hash is listed twice")
        if self.mode is None:
            self.mode = "bearer" if self.tokens else "none"
        if self.mode == "bearer" and not self.tokens:
            raise ValueError("mode 'bearer' needs at least one token: run om-mcp token create --resource NAME")
        if self.mode == "none" and self.tokens:
            # Tokens that silently do nothing would leave the server open while looking closed.
            raise ValueError("mode is 'none' but tokens are configured (or OM_HTTP_TOKEN is set): set mode = 'bearer'"
                             " or remove the tokens")
        return self


class HttpConfig(_Section):
    allowed_hosts: list[str] = Field(
        default_factory=list, description="Host header values accepted besides loopback ('mem.example.com', '10.0.0.5:*')"
    )
    allowed_origins: list[str] = Field(
        default_factory=list, description="Origin header values accepted besides loopback ('https://app.example.com')"
    )
    session_idle_seconds: float = Field(1800.0, gt=0, le=86_400 * 7, description="idle legacy sessions end after this")
    max_sessions: int = Field(100, ge=1, le=100_000, description="open legacy sessions at most; more get 503")
    rate_limit_per_minute: int = Field(
        600, ge=0, description="requests per token (per client address on a public bind without auth); 0 = off"
    )
    max_body_bytes: int = Field(4 * 1024 * 1024, ge=1024, description="largest request body; larger gets 413")


class ServerConfig(_Section):
    transport: Literal["stdio", "http"] = "stdio"
    host: str = "127.0.0.1"
    port: int = Field(8765, ge=1, le=65535)
    path: str = "/mcp"
    auth: AuthConfig = Field(default_factory=AuthConfig)
    http: HttpConfig = Field(default_factory=HttpConfig)


class Extractor(_Section):
    name: str = Field(min_length=1)
    instructions: str = ""
    schema_: dict[str, Any] | None = Field(None, alias="schema")
    include_previous_extraction: bool = True
    metadata_key_path: str | Literal[False] | None = None


class ObservationConfig(_Section):
    model: ModelChoice | None = None
    model_settings: ModelSettings = Field(default_factory=lambda: ModelSettings(temperature=0.3))
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
    def _check(self) -> "ObservationConfig":
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
    model_settings: ModelSettings = Field(default_factory=lambda: ModelSettings(temperature=0.0))
    observation_tokens: int = Field(40_000, gt=0)
    instruction: str | None = None
    extract: list[Extractor] = Field(default_factory=list)
    buffer_activation: float | None = None
    block_after: float | None = None
    activate_after_idle: int | str | Literal[False] | None = None
    activate_on_provider_change: bool = False

    @model_validator(mode="after")
    def _check(self) -> "ReflectionConfig":
        if self.buffer_activation is not None and not 0 < self.buffer_activation <= 1:
            raise ValueError("buffer_activation must be in (0, 1]")
        if self.block_after is not None and self.block_after < 1:
            raise ValueError("block_after must be a multiplier >= 1 or absolute tokens >= 100")
        return self


class RetrievalConfig(_Section):
    vector: bool = False
    scope: Literal["resource", "thread"] = "resource"
    instructions: str | None = None
    embedder: str = "hashing"


class ObservationalMemoryConfig(_Section):
    enabled: bool = True
    model: ModelChoice | None = None
    scope: Literal["thread", "resource"] = "thread"
    observation: ObservationConfig = Field(default_factory=ObservationConfig)
    reflection: ReflectionConfig = Field(default_factory=ReflectionConfig)
    share_token_budget: bool = False
    temporal_markers: bool = False
    obscure_thread_ids: bool | None = None
    activate_after_idle: int | str | Literal[False] | None = None
    activate_on_provider_change: bool = False
    retrieval: bool | RetrievalConfig = True
    call_policy: CallPolicy = Field(default_factory=CallPolicy)
    turn_wait_seconds: float = Field(
        10.0, ge=0, description="longest a tool call waits for a synchronous cycle; it then goes on in the background"
    )
    lease_seconds: float = Field(
        30.0, gt=0, description="how long a cycle's lease lives without renewal (a crashed process's work is retaken after it)"
    )

    @model_validator(mode="before")
    @classmethod
    def _from_bool(cls, value: Any) -> Any:
        return {"enabled": value} if isinstance(value, bool) else value

    @model_validator(mode="after")
    def _check(self) -> "ObservationalMemoryConfig":
        if self.model is not None and (self.observation.model is not None or self.reflection.model is not None):
            raise ValueError(
                "observational_memory.model cannot be combined with observation.model or reflection.model;"
                " set either the shared model or the per-role models"
            )
        obs, refl = self.observation, self.reflection
        buffering_set = any(
            v is not None for v in (obs.buffer_tokens, obs.block_after, refl.buffer_activation, refl.block_after)
        )
        if self.scope == "resource" and buffering_set and obs.buffer_tokens is not False:
            raise ValueError(
                "async buffering is not supported with scope 'resource': remove the buffer_tokens,"
                " block_after and buffer_activation settings or set observation.buffer_tokens = false"
            )
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
        for owner, path in ((self, ""), (obs, "observation."), (refl, "reflection.")):
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
        return RetrievalConfig() if self.retrieval is True else self.retrieval

    def limits(self) -> "Limits":
        return Limits.resolve(self)


class Limits(BaseModel):
    """Token numbers resolved from the ratios and multipliers in the config."""

    message_tokens: int
    observation_tokens: int
    buffer_tokens: int | None  # None: observation buffering off
    buffer_activation: float  # ratio in (0,1], or >= 1000 tokens to keep
    block_after: int | None
    reflection_buffer_at: int | None  # observation tokens at which background reflection starts
    reflection_block_after: int | None

    @classmethod
    def resolve(cls, om: ObservationalMemoryConfig) -> "Limits":
        obs, refl = om.observation, om.reflection
        buffering = om.scope == "thread" and obs.buffer_tokens is not False and not om.share_token_budget
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
        return cls(
            message_tokens=obs.message_tokens,
            observation_tokens=refl.observation_tokens,
            buffer_tokens=buffer_tokens,
            buffer_activation=obs.buffer_activation,
            block_after=block_after,
            reflection_buffer_at=reflection_buffer_at,
            reflection_block_after=reflection_block_after,
        )


class Config(_Section):
    db_path: Path | None = None
    default_resource_id: str = Field("default", min_length=1)
    output_token_budget: int = Field(8000, ge=500, description="largest tool output, in tokens")
    max_message_chars: int = Field(1_000_000, gt=0, description="largest single message accepted")
    max_batch_messages: int = Field(1000, gt=0)
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    server: ServerConfig = Field(default_factory=ServerConfig)
    working_memory: WorkingMemoryConfig = Field(default_factory=WorkingMemoryConfig)
    observational_memory: ObservationalMemoryConfig = Field(default_factory=ObservationalMemoryConfig)

    def resolved_db_path(self, env: Mapping[str, str] | None = None) -> Path:
        """The database file: configured, else under $XDG_DATA_HOME, else ~/.local/share."""
        if self.db_path is not None:
            return self.db_path.expanduser()
        env = os.environ if env is None else env
        base = Path(env["XDG_DATA_HOME"]) if env.get("XDG_DATA_HOME") else Path.home() / ".local" / "share"
        return base / "om-mcp" / "memory.db"


def load_config(
    config_file: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Config:
    """Build the config from a TOML file, `OM_*` variables and flag overrides.

    `overrides` uses dotted key paths ("server.port") for the CLI's flags.
    """
    env = os.environ if env is None else env
    data: dict[str, Any] = {}
    config_file = config_file or env.get(CONFIG_FILE_ENV)
    if config_file:
        path = Path(config_file).expanduser()
        try:
            data = tomllib.loads(path.read_text())
        except FileNotFoundError:
            raise ConfigError(f"config file not found: {path}") from None
        except tomllib.TOMLDecodeError as error:
            raise ConfigError(f"config file {path} is not valid TOML: {error}") from None
    settings = []
    for name, value in env.items():
        if not name.startswith(ENV_PREFIX) or name == CONFIG_FILE_ENV:
            continue
        keys = ENV_ALIASES.get(name) or tuple(k.lower() for k in name[len(ENV_PREFIX):].split("__"))
        settings.append((keys, value, name))
    # Shallow keys first, so OM_OBSERVATIONAL_MEMORY=false cannot wipe out OM_MODEL.
    for keys, value, name in sorted(settings, key=lambda item: len(item[0])):
        _set_path(data, keys, _env_value(value), source=name)
    for dotted, value in (overrides or {}).items():
        if value is not None:
            _set_path(data, tuple(dotted.split(".")), value, source=f"--{dotted}")
    try:
        return Config.model_validate(data)
    except ValidationError as error:
        raise ConfigError(_describe(error)) from None


def _env_value(text: str) -> Any:
    # JSON covers numbers, booleans, lists and tables; anything else is a string.
    try:
        return json.loads(text)
    except ValueError:
        return text


def _set_path(data: dict[str, Any], keys: tuple[str, ...], value: Any, source: str) -> None:
    node = data
    for key in keys[:-1]:
        child = node.get(key)
        if isinstance(child, bool):
            child = {"enabled": child}
        if child is None:
            child = {}
        if not isinstance(child, dict):
            raise ConfigError(f"{source}: {'.'.join(keys)} cannot be set because {key} is not a table")
        node[key] = child
        node = child
    if isinstance(node.get(keys[-1]), dict) and isinstance(value, bool):
        node[keys[-1]]["enabled"] = value  # `section = false` on a table that has other keys
    else:
        node[keys[-1]] = value


def _describe(error: ValidationError) -> str:
    lines = ["invalid configuration:"]
    for item in error.errors():
        path = ".".join(str(p) for p in item["loc"] if not str(p).startswith(("function-", "tagged-union")))
        message = item["msg"].removeprefix("Value error, ")
        if item["type"] == "extra_forbidden":
            message = "unknown option"
        lines.append(f"  {path or '(top level)'}: {message}")
    return "\n".join(lines)
