"""What every command shares: --db/--config/--json flags, loading the config, opening
the database (refused in one line when it cannot be used), and running a coroutine."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from om_mcp import logs
from om_mcp.config import Config, ConfigError, load_config

T = TypeVar("T")
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_CONFIG = 2  # bad arguments or configuration
EXIT_DATABASE = 3
EXIT_NOT_FOUND = 4
EXIT_PENDING = 5  # done in the memory, not yet in the file: a forget whose erase waits for a reader
EXIT_CODES = (
    "exit codes: 0 ok, 1 failed, 2 bad arguments or configuration, 3 database refused, 4 not found,"
    " 5 forgotten but not yet erased from the file"
)


def add_config_arguments(parser: argparse.ArgumentParser, *, json_flag: bool = False) -> None:
    parser.add_argument(
        "--db",
        help="the database file, or a postgresql:// URL (default: $OM_DB_URL, else $OM_DB_PATH,"
        " else ~/.local/share/om-mcp/memory.db)",
    )
    parser.add_argument("--config", help="TOML config file (or $OM_MCP_CONFIG)")
    if json_flag:
        parser.add_argument("--json", action="store_true", help="print JSON for scripts")


def load(args: argparse.Namespace, overrides: dict[str, Any] | None = None) -> Config | None:
    """The config (flags > environment > file > defaults), or None after printing why not."""
    db = getattr(args, "db", None)
    key = "db_url" if db and db.startswith(("postgresql://", "postgres://")) else "db_path"
    env = dict(os.environ)
    if db:  # the flag wins over the environment's choice of the other kind of database
        env.pop("OM_DB_URL" if key == "db_path" else "OM_DB_PATH", None)
    try:
        config = load_config(getattr(args, "config", None), env=env, overrides={**(overrides or {}), key: db})
    except ConfigError as error:
        print(f"om-mcp: {error}", file=sys.stderr)
        return None
    logs.configure(config.log_level)
    if config.db_url is not None:
        return config
    return config.model_copy(update={"db_path": config.resolved_db_path()})


def open_database_or_exit(config: Config) -> tuple[Config, int]:
    """Check the database now (a file: opened, checked, migrated; PostgreSQL: connected and
    migrated); (config, 0), or (config, exit code) after one line."""
    from om_mcp.store.errors import DatabaseRefused, StoreUnavailable

    try:
        if (url := config.db_url) is not None:
            from om_mcp.store import open_store

            async def check() -> None:
                await (await open_store(url)).close()

            run_async(check)
        else:
            from om_mcp.store.local import connect

            connect(config.db_path).close()  # type: ignore[arg-type]
    except (DatabaseRefused, StoreUnavailable) as error:
        print(f"om-mcp: {error}", file=sys.stderr)
        return config, EXIT_DATABASE
    from om_mcp.store.urls import redact

    where = redact(config.db_url) if config.db_url else config.db_path
    logging.getLogger("om_mcp").info("database: %s", where)
    return config, 0


def run_async(main: Callable[[], Awaitable[T]]) -> T:
    import anyio

    return anyio.run(main)


def prepare(
    args: argparse.Namespace, overrides: dict[str, Any] | None = None, *, must_exist: bool = True
) -> tuple[Config | None, int]:
    """Config loaded and database checked for a shell command: (config, 0) or (None, exit code).
    Routine info logs stay quiet (the command prints what matters); debug still shows.
    With `must_exist`, a missing database is 'not found' rather than created."""
    config = load(args, overrides)
    if config is None:
        return None, EXIT_CONFIG
    if config.log_level == "info":
        logs.configure("warning")
    missing = config.db_url is None and str(config.db_path) != ":memory:" and not config.db_path.exists()  # type: ignore[union-attr]
    if must_exist and missing:
        print(
            f"om-mcp: no database at {config.db_path} (nothing stored yet; --db or $OM_DB_PATH choose another)",
            file=sys.stderr,
        )
        return None, EXIT_NOT_FOUND
    config, refused = open_database_or_exit(config)
    return (None, refused) if refused else (config, EXIT_OK)


def fail(message: str, code: int = EXIT_FAILED) -> int:
    """One line on stderr, and the exit code."""
    print(f"om-mcp: {message}", file=sys.stderr)
    return code


def run_memory(config: Config, main: Callable[[Any], Awaitable[int]], **options: Any) -> int:
    """Open the memory, run `main(memory)`, close it; engine errors become their exit codes
    (unknown thread or resource 4, bad input 2, database unavailable 1), said in one line."""
    from om_mcp.engine.errors import InputError, NotFound, Unavailable
    from om_mcp.engine.memory import Memory
    from om_mcp.store.errors import StoreUnavailable

    async def go() -> int:
        memory = await Memory.open(config, **options)
        try:
            return await main(memory)
        finally:
            await memory.close()

    try:
        return run_async(go)
    except NotFound as error:
        return fail(str(error), EXIT_NOT_FOUND)
    except InputError as error:
        return fail(str(error), EXIT_CONFIG)
    except (Unavailable, StoreUnavailable) as error:  # e.g. a write to a read-only database
        return fail(str(error), EXIT_FAILED)
    except ConfigError as error:  # found only once the engine resolves its models (a cap without a price)
        return fail(str(error), EXIT_CONFIG)
