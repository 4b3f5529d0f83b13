"""`om-mcp worker`: observe and reflect in the background, then exit when idle.

The hooks start it detached when work is due and no live om-mcp process holds
the "worker" lease (`om-mcp worker --idle-exit 60 --lease-owner <id>`); it can
also run by hand (`--idle-exit 0` runs until Ctrl-C). It drains exactly what a
running server drains (`om_mcp.engine.drain`), with the model the configuration
chooses ("auto": a provider key, else the `claude` CLI login).
"""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path
from typing import Any

from om_mcp.commands.common import add_config_arguments, load, open_database_or_exit, run_async

LOG_MAX_BYTES = 1_000_000
log = logging.getLogger("om_mcp")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--idle-exit",
        type=float,
        default=60.0,
        help="exit after this many seconds with nothing to do (default 60; 0 = run until stopped)",
    )
    parser.add_argument("--poll", type=float, default=2.0, help="seconds between looks for new work (default 2)")
    parser.add_argument("--log-file", help="append the log to this file (capped at 1 MB) instead of stderr")
    parser.add_argument("--lease-owner", help=argparse.SUPPRESS)  # the lease the starting hook took for it
    add_config_arguments(parser)


def run(args: argparse.Namespace) -> int:
    config = load(args)
    if config is None:
        return 2
    if args.log_file:
        _log_to_file(Path(args.log_file), config.log_level)
    config, refused = open_database_or_exit(config)
    if refused:
        return refused

    async def main() -> None:
        from om_mcp.engine import Memory
        from om_mcp.engine.drain import Drainer

        memory = await Memory.open(config)
        try:
            async with memory.running(poll_seconds=None):
                log.info("om-mcp worker %d: started on %s", os.getpid(), _where(config))
                await Drainer(memory, owner=args.lease_owner).run_until_idle(args.poll, args.idle_exit)
        finally:
            await memory.close()

    run_async(main)
    return 0


def _log_to_file(path: Path, level: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        if path.stat().st_size > LOG_MAX_BYTES:
            os.replace(path, path.with_name(path.name + ".1"))
    except FileNotFoundError:
        pass
    logging.basicConfig(
        filename=str(path),
        level=level.upper(),
        force=True,
        format=f"%(asctime)s %(levelname)s worker {os.getpid()} %(name)s: %(message)s",
    )


def _where(config: Any) -> str:
    """The database, as a log line may show it (a URL without its password)."""
    if config.db_url is None:
        return str(config.db_path)
    from om_mcp.store.urls import redact

    return redact(config.db_url)
