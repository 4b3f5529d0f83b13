"""`Config`: the one configuration model. Every key is checked at start; an
unknown key or a bad value stops start-up with its full key path."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from om_mcp import paths
from om_mcp.config.memory import ObservationalMemoryConfig
from om_mcp.config.privacy import PrivacyConfig
from om_mcp.config.server import ServerConfig
from om_mcp.config.working_memory import WorkingMemoryConfig


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Config(_Section):
    db_path: Path | None = None
    db_url: str | None = Field(None, description="postgresql://user:password@host/db: PostgreSQL instead of a file")
    default_resource_id: str = Field("default", min_length=1)
    output_token_budget: int = Field(8000, ge=500, description="largest tool output, in tokens")
    max_message_chars: int = Field(1_000_000, gt=0, description="largest single message accepted")
    max_batch_messages: int = Field(1000, gt=0)
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    server: ServerConfig = Field(default_factory=ServerConfig)
    working_memory: WorkingMemoryConfig = Field(default_factory=WorkingMemoryConfig)
    observational_memory: ObservationalMemoryConfig = Field(default_factory=ObservationalMemoryConfig)
    privacy: PrivacyConfig = Field(default_factory=PrivacyConfig)

    @field_validator("db_url")
    @classmethod
    def _db_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("postgresql://", "postgres://")):
            raise ValueError(
                "must be a PostgreSQL URL, postgresql://user:password@host:5432/database (a SQLite file is db_path)"
            )
        return value

    @model_validator(mode="after")
    def _one_database(self) -> Config:
        if self.db_url is not None and self.db_path is not None:
            raise ValueError(
                "db_path and db_url are both set (OM_DB_PATH / OM_DB_URL, --db): keep one; db_url is"
                " PostgreSQL, db_path a SQLite file"
            )
        return self

    @model_validator(mode="after")
    def _one_person(self) -> Config:
        bound = any("*" not in t.resources for t in self.server.auth.tokens)
        if self.observational_memory.user.enabled and (bound or self.server.oauth.on):
            raise ValueError(
                "observational_memory.user.enabled: the person layer is one person's, and would show one tenant's"
                " lines to another; keep it off on a server whose server.auth.tokens or OAuth grants are bound to"
                " resources"
            )
        return self

    def database(self, env: Mapping[str, str] | None = None) -> str | Path:
        """Where the memory lives: db_url when set, else the SQLite file."""
        return self.db_url if self.db_url is not None else self.resolved_db_path(env)

    def resolved_db_path(self, env: Mapping[str, str] | None = None) -> Path:
        """The database file: configured, else memory.db in the data folder (`om_mcp/paths.py`)."""
        if self.db_path is not None:
            return self.db_path.expanduser()
        return paths.data_dir(env) / "memory.db"
