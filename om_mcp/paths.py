"""Where om-mcp keeps its files: the XDG base directories, resolved by one rule for every module.

    data_dir()    $XDG_DATA_HOME/om-mcp,   else ~/.local/share/om-mcp   the database, the hook's and worker's logs
    config_dir()  $XDG_CONFIG_HOME/om-mcp, else ~/.config/om-mcp        config.toml; the plugin launcher's record
    cache_dir()   $XDG_CACHE_HOME/om-mcp,  else ~/.cache/om-mcp         the hook's settings, the `claude` login check

A variable that is empty counts as unset; `~` is the environment's HOME, else the user's home
(`Path.home()`). Each function reads the environment it is given (default: this process's), so
a hook, the worker it starts and the server agree on one file whoever reads the rule, and tests
give their own. Plain `os` and `pathlib`: the hook loads this on every prompt.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

APP = "om-mcp"
CONFIG_FILE_ENV = "OM_MCP_CONFIG"  # a config file other than the default one
# Each base directory: its variable, and its place under the home folder when the variable is unset.
DEFAULTS = {"DATA": (".local", "share"), "CONFIG": (".config",), "CACHE": (".cache",)}
Kind = Literal["DATA", "CONFIG", "CACHE"]


def home(env: Mapping[str, str] | None = None) -> Path:
    """The environment's HOME, else the user's home."""
    env = os.environ if env is None else env
    return Path(env.get("HOME") or Path.home())


def xdg_home(kind: Kind, env: Mapping[str, str] | None = None, home_dir: Path | None = None) -> Path:
    """$XDG_<kind>_HOME, else its default under `home_dir` (default: `home(env)`)."""
    env = os.environ if env is None else env
    value = env.get(f"XDG_{kind}_HOME")
    if value:
        return Path(value)
    return (home_dir if home_dir is not None else home(env)).joinpath(*DEFAULTS[kind])


def data_dir(env: Mapping[str, str] | None = None) -> Path:
    return xdg_home("DATA", env) / APP


def config_dir(env: Mapping[str, str] | None = None) -> Path:
    return xdg_home("CONFIG", env) / APP


def cache_dir(env: Mapping[str, str] | None = None) -> Path:
    return xdg_home("CACHE", env) / APP


def default_config_file(env: Mapping[str, str] | None = None) -> Path:
    """The config file every process reads when none is named: config.toml in the config folder."""
    return config_dir(env) / "config.toml"


def config_file(named: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None) -> Path | None:
    """The config file in force: `named` (a --config flag), else $OM_MCP_CONFIG, else the default file
    when it exists (None: no file, the defaults). A named file is returned whether or not it exists:
    loading it says it is missing, where a missing default file just means "not written yet"."""
    env = os.environ if env is None else env
    chosen = named or env.get(CONFIG_FILE_ENV)
    if chosen:
        return Path(chosen).expanduser()
    default = default_config_file(env)
    return default if default.is_file() else None
