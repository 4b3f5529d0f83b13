"""`om-mcp config path|show|set KEY VALUE`: the config file every om-mcp process reads.

The file is the one --config or $OM_MCP_CONFIG names, else `config.toml` in the config folder
(`om_mcp/paths.py`). `set` changes one option in the text (the user's other keys and comments
stay: `config/file.py`), checks the whole file with the same model the server loads, and
replaces the file atomically; a bad key or value changes nothing and names the option.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from om_mcp.commands.common import EXIT_CONFIG, EXIT_OK, fail

NOTE = "servers read it when they start; hooks and commands on their next run"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="another TOML config file (or $OM_MCP_CONFIG)")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    where = actions.add_parser("path", help="print the config file's path (whether or not it exists yet)")
    show = actions.add_parser("show", help="the options whose value is not the default, and where each comes from")
    show.add_argument("--all", action="store_true", help="every option, defaults included")
    show.add_argument("--json", action="store_true", help="print JSON for scripts")
    change = actions.add_parser("set", help="set one option in the config file (checked first; comments kept)")
    change.add_argument("key", metavar="KEY", help="the option's key path, e.g. observational_memory.user.enabled")
    change.add_argument("value", metavar="VALUE", help="a TOML value (true, 300, [1, 2]); other text is a string")
    for sub in (where, show, change):  # before or after the action
        sub.add_argument("--config", default=argparse.SUPPRESS, help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    env = os.environ
    if args.action == "path":
        print(file_in_use(args.config, env))
        return EXIT_OK
    if args.action == "show":
        return _show(args, env)
    return _set(args, env)


def file_in_use(named: str | None, env: Mapping[str, str]) -> Path:
    """The file a process started here reads, or the default one `set` would create."""
    from om_mcp import paths

    return paths.config_file(named, env) or paths.default_config_file(env)


def where_line(env: Mapping[str, str] | None = None) -> str:
    """`setup`'s line saying where the settings every om-mcp process reads are."""
    env = os.environ if env is None else env
    path = file_in_use(None, env)
    state = "" if path.is_file() else ", not written yet: every option has its default"
    return f"config: {path}{state}; the server, the hooks and every command read it (om-mcp config set KEY VALUE)"


def _set(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    from om_mcp.config.file import EditRefused, set_option, value_text, write_atomically
    from om_mcp.config.loader import ConfigError, environment_settings, validate

    path = file_in_use(args.config, env)
    keys = tuple(part.strip() for part in args.key.split("."))
    if not all(keys):
        return fail(f"config set: {args.key!r} is not a key path (e.g. observational_memory.user.enabled)", EXIT_CONFIG)
    try:
        old = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        old = ""
    except (OSError, UnicodeDecodeError) as error:
        return fail(f"config file {path} cannot be read: {error}", EXIT_CONFIG)
    try:
        new = set_option(old, keys, value_text(args.value))
        validate(tomllib.loads(new))
    except EditRefused as error:
        return fail(f"{path}: {error}; nothing changed", EXIT_CONFIG)
    except ConfigError as error:
        return fail(f"{error}\n(nothing changed in {path})", EXIT_CONFIG)
    if new != old:
        try:
            write_atomically(path, new)
        except OSError as error:
            return fail(f"config file {path} cannot be written: {error}", EXIT_CONFIG)
    print(f"{'.'.join(keys)} = {value_text(args.value)} in {path} ({NOTE})")
    for set_keys, _value, name in environment_settings(env):
        if keys[: len(set_keys)] == set_keys or set_keys[: len(keys)] == keys:
            print(f"note: {name} is set in this environment and wins over the file", file=sys.stderr)
    return EXIT_OK


def _show(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    from om_mcp import paths
    from om_mcp.config import Config
    from om_mcp.config.loader import ConfigError, environment_settings, load_config, read_file

    path = paths.config_file(args.config, env)
    try:
        config = load_config(args.config, env=env)
        in_file = _flat(read_file(path)) if path is not None else {}
    except ConfigError as error:
        return fail(str(error), EXIT_CONFIG)
    from_env = {".".join(keys): name for keys, _value, name in environment_settings(env)}
    effective, defaults = _flat(config.model_dump(mode="json")), _flat(Config().model_dump(mode="json"))
    options = {}
    for key, value in effective.items():
        source = _source(key, from_env, in_file)
        if args.all or value != defaults.get(key):
            options[key] = {"value": _shown(key, value), "from": source}
    if args.json:
        print(json.dumps({"file": str(path) if path else None, "options": options}, indent=2))
        return EXIT_OK
    if path is None:
        print(f"# no config file: {paths.default_config_file(env)} does not exist (om-mcp config set creates it)")
    else:
        print(f"# config file: {path}")
    if not options:
        print("# every option has its default (om-mcp config show --all lists them)")
    for key, option in options.items():
        print(f"{key} = {_toml(option['value'])}  # {option['from']}")
    return EXIT_OK


def _flat(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict) and value:
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _source(key: str, from_env: Mapping[str, str], in_file: Mapping[str, Any]) -> str:
    for dotted, name in from_env.items():
        if key == dotted or key.startswith(dotted + "."):
            return name
    if any(key == k or key.startswith(k + ".") or k.startswith(key + ".") for k in in_file):
        return "file"
    return "default"


def _shown(key: str, value: Any) -> Any:
    """A database URL without its password: `config show` is pasted into bug reports."""
    if key == "db_url" and isinstance(value, str):
        from om_mcp.store.urls import redact

        return redact(value)
    return value


def _toml(value: Any) -> str:
    if value is None:
        return "(unset)"  # TOML has no null
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }" if value else "{}"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)
