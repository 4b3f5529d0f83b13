"""The one configuration model, loaded from TOML, `OM_*` variables and flags.

Precedence: flags > environment > file > defaults. The file is the one named by
--config or $OM_MCP_CONFIG, else the default `config.toml` in the config folder
(`om_mcp/paths.py`) when it exists: the server, every hook and every command read
the same one. Every key is checked at start; an unknown key or a bad value stops start-up with its full key path.
Fractions and multipliers (buffer_tokens = 0.2, block_after = 1.2, ...) are
resolved into token counts once, here, so the engine only sees numbers.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from om_mcp import paths
from om_mcp.config.settings import Config

ENV_PREFIX = "OM_"
# OM_MCP_CONFIG, OM_MCP_HOOKS (the hooks' off switch), OM_MCP_BIN (the plugin's launcher):
# variables about how om-mcp runs, never configuration keys.
LAUNCHER_ENV_PREFIX = "OM_MCP_"
# Short names people actually type, mapped to their key paths.
ENV_ALIASES = {
    "OM_DB_PATH": ("db_path",),
    "OM_DB_URL": ("db_url",),
    "OM_MODEL": ("observational_memory", "model"),
    "OM_HTTP_TOKEN": ("server", "auth", "http_token"),  # one plain token for all resources, hashed at load
}


class ConfigError(ValueError):
    """Start-up configuration is invalid; the message names the option."""


def load_config(
    config_file: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Config:
    """Build the config from a TOML file, `OM_*` variables and flag overrides.

    `overrides` uses dotted key paths ("server.port") for the CLI's flags.
    """
    env = os.environ if env is None else env
    path = paths.config_file(config_file, env)
    data = read_file(path) if path is not None else {}
    for keys, value, name in environment_settings(env):
        _set_path(data, keys, value, source=name)
    for dotted, value in (overrides or {}).items():
        if value is not None:
            _set_path(data, tuple(dotted.split(".")), value, source=f"--{dotted}")
    return validate(data)


def environment_settings(env: Mapping[str, str]) -> list[tuple[tuple[str, ...], Any, str]]:
    """(key path, value, variable) for each `OM_*` variable that sets an option, shallow keys first
    (so OM_OBSERVATIONAL_MEMORY=false cannot wipe out OM_MODEL)."""
    settings = []
    for name, value in env.items():
        if not name.startswith(ENV_PREFIX) or name.startswith(LAUNCHER_ENV_PREFIX):
            continue
        keys = ENV_ALIASES.get(name) or tuple(k.lower() for k in name[len(ENV_PREFIX) :].split("__"))
        settings.append((keys, _env_value(value), name))
    return sorted(settings, key=lambda item: len(item[0]))


def read_file(path: Path) -> dict[str, Any]:
    """A config file's tables; ConfigError naming the file when it is missing or not TOML."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"config file {path} cannot be read: {error}") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"config file {path} is not valid TOML: {error}") from None


def validate(data: Mapping[str, Any]) -> Config:
    """The model for these settings; ConfigError naming each bad option."""
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
