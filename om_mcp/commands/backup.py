"""`om-mcp backup FILE`: an online, consistent copy through SQLite's backup API.

Safe while servers run and write: the copy is one snapshot, taken under a read
lock that lets writers go on (WAL). Written beside FILE and renamed into place,
so FILE is never half a database.

From PostgreSQL (--db postgresql://...) the copy is a new SQLite file read from one
snapshot (as `om-mcp migrate` does); PostgreSQL's own backups are pg_dump's job.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
from pathlib import Path
from typing import Any

from om_mcp.commands.common import (
    EXIT_CODES,
    EXIT_CONFIG,
    EXIT_FAILED,
    EXIT_OK,
    add_config_arguments,
    fail,
    prepare,
    run_memory,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "file", metavar="FILE", help="where to write the copy (a SQLite file, also from PostgreSQL; or use pg_dump)"
    )
    parser.add_argument("--force", action="store_true", help="replace FILE if it exists")
    add_config_arguments(parser, json_flag=True)
    parser.epilog = EXIT_CODES


def run(args: argparse.Namespace) -> int:
    target = Path(args.file).expanduser()
    if target.is_dir():
        return fail(f"{target} is a directory: give the backup file's path", EXIT_CONFIG)
    if target.exists() and not args.force:
        return fail(f"{target} exists: choose another name, or --force to replace it", EXIT_CONFIG)
    if not target.parent.is_dir():
        return fail(f"{target.parent} does not exist: create it first, or give another path", EXIT_CONFIG)
    config, code = prepare(args)
    if config is None:
        return code
    if config.db_url is None and target.resolve() == Path(config.db_path).resolve():  # type: ignore[arg-type]
        return fail("the backup cannot replace the database itself", EXIT_CONFIG)

    async def main(memory: Any) -> int:
        from om_mcp.commands._output import print_json

        partial = target.with_name(f".{target.name}.partial")
        try:
            partial.unlink(missing_ok=True)
            size = await memory.backup(str(partial))
            os.replace(partial, target)
        except (OSError, sqlite3.Error) as error:
            partial.unlink(missing_ok=True)
            reason = getattr(error, "strerror", None) or error
            return fail(f"cannot write {target}: {reason}", EXIT_FAILED)
        from om_mcp.store.local import admin

        threads, messages = admin.thread_and_message_counts(target)
        report = {"file": str(target), "bytes": size, "threads": threads, "messages": messages}
        if args.json:
            print_json(report)
        else:
            print(f"backed up {messages:,} messages in {threads} threads to {target} ({size:,} bytes)")
        return EXIT_OK

    return run_memory(config, main)
