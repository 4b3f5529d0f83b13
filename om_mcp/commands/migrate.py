"""`om-mcp migrate --from sqlite:///path/memory.db --to postgresql://user@host/db`:
copy a whole memory into another database (usually a SQLite file into PostgreSQL).

Safe to stop and run again: it continues where it stopped, and once done, running
it again changes nothing. Stop the servers writing to the source first: what they
write after the copy started is not copied. The source is never changed (beyond
being brought to this version's schema).
"""

from __future__ import annotations

import argparse
import sys
from contextlib import ExitStack
from typing import Any

from om_mcp.commands._output import print_json, print_table, progress
from om_mcp.commands.common import EXIT_DATABASE, run_async

DONE = """copied {source} -> {target}{resumed}
  {rows} rows, {threads} threads indexed for search
Point om-mcp at the new database: {setting}, then restart the servers."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--from",
        dest="source",
        required=True,
        help="the database to copy: sqlite:///path/memory.db (or a path), or postgresql://...",
    )
    parser.add_argument(
        "--to",
        dest="target",
        required=True,
        help="where to copy it: postgresql://user:password@host:5432/db (or a new SQLite file)",
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def run(args: argparse.Namespace) -> int:
    from om_mcp import logs
    from om_mcp.store import copy_memory, describe_location
    from om_mcp.store.errors import DatabaseRefused, StoreUnavailable

    logs.configure("warning")
    with ExitStack() as bars:

        def bar(description: str, total: int):
            return bars.enter_context(progress(total, description))

        try:
            report = run_async(lambda: copy_memory(args.source, args.target, progress=bar))
        except (DatabaseRefused, StoreUnavailable) as error:
            print(f"om-mcp: {error}", file=sys.stderr)
            return EXIT_DATABASE
    summary: dict[str, Any] = {
        "source": describe_location(args.source),
        "target": describe_location(args.target),
        "resumed": report.resumed,
        "rows": report.rows,
        "source_rows": report.totals,
        "indexed_threads": report.indexed_threads,
    }
    if args.json:
        print_json(summary)
        return 0
    print_table(
        [(name, report.totals[name], report.rows.get(name, 0)) for name in report.totals],
        [("table", "table"), ("source", "rows in source"), ("copied", "copied now")],
    )
    print(
        DONE.format(
            source=summary["source"],
            target=summary["target"],
            resumed=" (resumed: rows already there were kept)" if report.resumed else "",
            rows=sum(report.totals.values()),
            threads=report.indexed_threads,
            setting=f'db_url = "{summary["target"]}" (or OM_DB_URL)'
            if summary["target"].startswith("postgres")
            else f'db_path = "{summary["target"].removeprefix("sqlite://")}" (or OM_DB_PATH)',
        )
    )
    return 0
