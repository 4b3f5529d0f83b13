"""`om-mcp threads [--resource R]`: threads, newest first, with their two windows and last cycle."""

from __future__ import annotations

import argparse
from typing import Any

from om_mcp.commands.common import EXIT_CODES, EXIT_NOT_FOUND, EXIT_OK, add_config_arguments, fail, prepare, run_memory


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--resource", metavar="R", help="only this resource's threads (default: every resource)")
    parser.add_argument("--limit", type=int, default=200, metavar="N", help="at most N threads (200)")
    add_config_arguments(parser, json_flag=True)
    parser.epilog = EXIT_CODES


def run(args: argparse.Namespace) -> int:
    config, code = prepare(args)
    if config is None:
        return code

    async def main(memory: Any) -> int:
        from om_mcp.commands._output import print_json, print_table
        from om_mcp.commands._view import THREAD_COLUMNS, paused_line, thread_row, thread_table_rows

        store = memory.store
        if args.resource and not any(r.id == args.resource for r in await store.list_resources()):
            return fail(f"unknown resource {args.resource!r}", EXIT_NOT_FOUND)
        states = await store.thread_states(
            memory.config.observational_memory.scope, access=memory.access, resource_id=args.resource, limit=args.limit
        )
        if args.json:
            print_json([thread_row(s) for s in states])
            return EXIT_OK
        if memory.config.observational_memory.budget.any:
            paused = paused_line((await memory.observation.budget.state()).as_dict())
            if paused:
                print(paused + "\n")
        print_table(thread_table_rows(states), THREAD_COLUMNS)
        return EXIT_OK

    return run_memory(config, main)
