"""What every command shares: --db/--config/--json flags, loading the config, opening
the database (refused in one line when it cannot be used), and running a coroutine."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any, Awaitable, Callable, TypeVar

from om_mcp import logs
from om_mcp.config import Config, ConfigError, load_config

T = TypeVar("T")
EXIT_CONFIG = 2
EXIT_DATABASE = 3


def add_config_arguments(parser: argparse.ArgumentParser, *, json_flag: bool = False) -> None:
    parser.add_argument("--db", help="the database file (default: $OM_DB_PATH, else ~/.local/share/om-mcp/memory.db)")
    parser.add_argument("--config", help="TOML config file (or $OM_MCP_CONFIG)")
    if json_flag:
        parser.add_argument("--json", action="store_true", help="print JSON for scripts")


def load(args: argparse.Namespace, overrides: dict[str, Any] | None = None) -> Config | None:
    """The config (flags > environment > file > defaults), or None after printing why not."""
    try:
        config = load_config(getattr(args, "config", None), overrides={**(overrides or {}), "db_path": args.db})
    except ConfigError as error:
        print(f"om-mcp: {error}", file=sys.stderr)
        return None
    logs.configure(config.log_level)
    return config.model_copy(update={"db_path": config.resolved_db_path()})


def open_database_or_exit(config: Config) -> tuple[Config, int]:
    """Check the database file now; (config, 0), or (config, exit code) after one line."""
    from om_mcp.store.errors import DatabaseRefused
    from om_mcp.store.sqlite.database import connect

    try:
        connect(config.db_path).close()  # type: ignore[arg-type]
    except DatabaseRefused as error:
        print(f"om-mcp: {error}", file=sys.stderr)
        return config, EXIT_DATABASE
    logging.getLogger("om_mcp").info("database: %s", config.db_path)
    return config, 0


def run_async(main: Callable[[], Awaitable[T]]) -> T:
    import anyio

    return anyio.run(main)
