"""`om-mcp forget --thread T | --resource R`: delete for good, as `delete_thread` does.

Everything derived goes too (search entries, observations that quote it, working
memory, events, vectors), the search index is rewritten and the WAL folded in, and
SQLite zeroes freed pages: afterwards the text is not in the file's bytes.
Asks first on a terminal; elsewhere it needs --yes.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from om_mcp.commands.common import (
    EXIT_CODES,
    EXIT_CONFIG,
    EXIT_FAILED,
    EXIT_NOT_FOUND,
    EXIT_OK,
    add_config_arguments,
    fail,
    prepare,
    run_memory,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--thread", metavar="T", help="forget this thread")
    which.add_argument("--resource", metavar="R", help="forget this resource: all its threads and its memory")
    parser.add_argument("--yes", action="store_true", help="do not ask (needed when not on a terminal)")
    add_config_arguments(parser, json_flag=True)
    parser.epilog = EXIT_CODES


def run(args: argparse.Namespace) -> int:
    config, code = prepare(args)
    if config is None:
        return code

    async def main(memory: Any) -> int:
        from om_mcp.commands._output import print_json
        from om_mcp.commands._view import count

        if args.thread:
            thread = await memory.thread(args.thread)
            if thread is None:
                return fail(f"unknown thread {args.thread!r}", EXIT_NOT_FOUND)
            what = f"thread {args.thread!r} ({thread.message_count:,} messages)"
        else:
            found = [r for r in await memory.store.list_resources() if r.id == args.resource]
            if not found:
                return fail(f"unknown resource {args.resource!r}", EXIT_NOT_FOUND)
            what = f"resource {args.resource!r} ({found[0].threads} threads, {found[0].messages:,} messages)"
        if not args.yes:
            answer = _ask(f"Forget {what} for good? This cannot be undone. [y/N] ")
            if answer is None:
                return fail("not on a terminal: add --yes to forget without asking", EXIT_CONFIG)
            if answer.strip().lower() not in ("y", "yes"):
                print("nothing forgotten", file=sys.stderr)
                return EXIT_FAILED
        if args.thread:
            done = await memory.delete_thread(args.thread)
            report = {"thread_id": args.thread, "threads": 1, "messages": done.deleted_messages}
        else:
            threads, messages = await memory.forget_resource(args.resource)
            report = {"resource_id": args.resource, "threads": threads, "messages": messages}
        if args.json:
            print_json(report)
        else:
            print(
                f"forgot {what.split(' (')[0]}: {count(report['threads'], 'thread')},"
                f" {count(report['messages'], 'message')}; their text is erased from the database file"
            )
        return EXIT_OK

    return run_memory(config, main)


def _ask(question: str) -> str | None:
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        return None
    sys.stderr.write(question)
    sys.stderr.flush()
    return sys.stdin.readline()
