"""`om-mcp search QUERY [--resource R]`: messages and observations ranked as `recall` ranks them."""

from __future__ import annotations

import argparse
from typing import Any

from om_mcp.commands.common import EXIT_CODES, EXIT_NOT_FOUND, EXIT_OK, add_config_arguments, fail, prepare, run_memory


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("query", metavar="QUERY", help="words to look for (any text is safe)")
    parser.add_argument("--resource", metavar="R", help="whose memory (default: the configured default resource)")
    parser.add_argument("--thread", metavar="T", help="only this thread")
    parser.add_argument("--limit", type=int, default=20, metavar="N", help="at most N results (20)")
    add_config_arguments(parser, json_flag=True)
    parser.epilog = EXIT_CODES


def run(args: argparse.Namespace) -> int:
    config, code = prepare(args)
    if config is None:
        return code

    async def main(memory: Any) -> int:
        from om_mcp.commands._output import print_json, print_table
        from om_mcp.commands._view import one_line, when

        resource = args.resource
        if args.thread:
            thread = await memory.thread(args.thread)
            if thread is None:
                return fail(f"unknown thread {args.thread!r}", EXIT_NOT_FOUND)
            resource = resource or thread.resource_id
        resource = resource or memory.config.default_resource_id
        if not any(r.id == resource for r in await memory.store.list_resources()):
            return fail(f"unknown resource {resource!r}", EXIT_NOT_FOUND)
        results = await memory.retrieval.search(resource, args.query, thread_id=args.thread, limit=args.limit)
        if args.json:
            print_json(results)
        else:
            print_table(
                [
                    {
                        "score": r.score,
                        "thread": r.thread_id,
                        "id": r.range or r.message_id,
                        "role": r.role,
                        "date": when(r.created_at),
                        "text": one_line(r.snippet, 90),
                    }
                    for r in results
                ],
                ["score", "thread", "id", "role", "date", "text"],
            )
        return EXIT_OK

    return run_memory(config, main)
