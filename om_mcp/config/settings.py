"""`Config`: the one configuration model. Every key is checked at start; an
unknown key or a bad value stops start-up with its full key path."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal, Mapping

from pydantic import BaseModel, ConfigDict, Field

from om_mcp.config.memory import ObservationalMemoryConfig
from om_mcp.config.server import ServerConfig
from om_mcp.config.working_memory import WorkingMemoryConfig


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


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
