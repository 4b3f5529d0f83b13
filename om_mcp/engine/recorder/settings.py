"""The few settings the recorder needs, from the real configuration, cached.

Among them the resolved `Limits`, so the recorder decides "is work due" by the
engine's own rule (`engine.observation.thresholds.background_work_due`).

Loading the configuration builds the pydantic model (about 0.3 s), too slow for
every prompt's hook. So the recorder keeps what it needs in a small JSON file named by a
hash of everything the configuration depends on (the --db and --config flags,
the config file in force (`om_mcp/paths.py: config_file`: the named one, else the default
config.toml when it exists) with its size and time, the OM_* variables, the data folder
(`om_mcp/paths.py`: where the database is by default), the om-mcp version). Any change gives another name: the config
is loaded once, the same way `om-mcp serve` loads it, and cached again.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from om_mcp import __version__
from om_mcp.limits import Limits
from om_mcp.paths import cache_dir, data_dir
from om_mcp.paths import config_file as config_in_force

if TYPE_CHECKING:
    from om_mcp.config import Config


@dataclass(frozen=True)
class RecorderSettings:
    db_path: str
    observation: bool  # observational_memory.enabled
    scope: str  # observational_memory.scope: "thread" | "resource"
    limits: Limits  # observational_memory.limits(): the numbers the thresholds compare against
    working_memory: str | None  # its scope, None when off
    max_message_chars: int
    privacy: dict[str, Any] = field(default_factory=dict)  # [privacy] as plain settings (om_mcp.privacy.redactor_for)
    user_tokens: int | None = None  # [observational_memory.user]: its token budget, None when the layer is off


def load_settings(
    db: str | None = None, config_file: str | None = None, env: Mapping[str, str] | None = None
) -> RecorderSettings:
    """The settings for these flags and this environment; ConfigError when the configuration is invalid."""
    env = os.environ if env is None else env
    path = cache_dir(env) / f"hook-settings-{_fingerprint(db, config_file, env)}.json"
    try:
        cached = json.loads(path.read_text(encoding="utf-8"))
        return RecorderSettings(**{**cached, "limits": Limits(**cached["limits"])})
    except (OSError, ValueError, TypeError, KeyError):
        pass
    settings = _from_config(db, config_file, env)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_text(json.dumps(asdict(settings)), encoding="utf-8")
        os.replace(temporary, path)
    except OSError:
        pass  # no cache this time; the settings are still right
    return settings


def _from_config(db: str | None, config_file: str | None, env: Mapping[str, str]) -> RecorderSettings:
    from om_mcp.config import load_config  # pydantic: only on a cache miss

    if db:  # the flag wins over the environment's choice of database, as for every command
        env = {k: v for k, v in env.items() if k != "OM_DB_URL"}
    return settings_of(load_config(config_file, env=env, overrides={"db_path": db}), env)


def settings_of(config: Config, env: Mapping[str, str] | None = None) -> RecorderSettings:
    """What the recorder keeps of a loaded configuration; ConfigError when it names PostgreSQL."""
    from om_mcp.config import ConfigError

    if config.db_url is not None:
        # The hooks write SQLite directly, to stay fast; recording elsewhere would split the memory.
        raise ConfigError(
            "db_url: the hooks record into a SQLite file only; give the hook --db PATH, or let the agent store"
            " the conversation with append_messages on the PostgreSQL server"
        )
    om = config.observational_memory
    wm = config.working_memory
    return RecorderSettings(
        db_path=str(config.resolved_db_path(env)),
        observation=om.enabled,
        scope=om.scope,
        limits=om.limits(),
        working_memory=wm.scope if wm.enabled else None,
        max_message_chars=config.max_message_chars,
        privacy=config.privacy.settings(),
        user_tokens=om.user.tokens if om.user.enabled else None,
    )


def _fingerprint(db: str | None, config_file: str | None, env: Mapping[str, str]) -> str:
    path = config_in_force(config_file, env)
    stamp: list[int] | str | None = None
    if path is not None:
        try:
            info = os.stat(path)
            stamp = [info.st_size, info.st_mtime_ns, info.st_ino]
        except OSError:
            stamp = "missing"
    inputs = {
        "version": __version__,
        "db": db,
        "config": str(path) if path is not None else None,
        "stamp": stamp,
        "env": sorted((k, v) for k, v in env.items() if k.startswith("OM_") and not k.startswith("OM_MCP_")),
        "data": str(data_dir(env)),  # where the database is when no db_path is configured
    }
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode("utf-8", "replace")).hexdigest()[:20]
