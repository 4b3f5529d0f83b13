"""`om-mcp remember TEXT [--thread T | --resource R | --user]`: remember this, word for word.

The line goes into the log at once, with no model: high priority and marked
`[user-stated]`, so every reflection keeps it as written. `--thread T`: that thread's memory
(in resource scope, its resource's log); `--resource R`: a resource's log (resource scope);
`--user`: the person layer, which every resource's context shows when
`[observational_memory.user] enabled = true` (`--user --working-memory TEXT` sets the person's
working memory note instead). With none: the default resource. A
`<remember>...</remember>` span in a user's message does the same, as it is stored.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from om_mcp.commands.common import EXIT_CODES, EXIT_CONFIG, EXIT_OK, add_config_arguments, prepare, run_memory


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("text", metavar="TEXT", help="what to remember, in your words (one line)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--thread", metavar="T", help="into this thread's memory")
    where.add_argument("--resource", metavar="R", help="into this resource's log (resource scope)")
    where.add_argument("--user", action="store_true", help="into the person layer, shown in every resource")
    parser.add_argument(
        "--working-memory",
        action="store_true",
        help="with --user: TEXT replaces the person layer's working memory (Markdown) instead",
    )
    add_config_arguments(parser, json_flag=True)
    parser.epilog = EXIT_CODES


def run(args: argparse.Namespace) -> int:
    config, code = prepare(args)
    if config is None:
        return code

    if args.working_memory and not args.user:
        print("om-mcp remember: --working-memory goes with --user (the person layer's note)", file=sys.stderr)
        return EXIT_CONFIG

    async def main(memory: Any) -> int:
        from om_mcp.commands._output import print_json

        if args.working_memory:
            stored = await memory.set_user_working_memory(args.text)
            print_json({"working_memory": stored}) if args.json else print("the person layer's working memory is set")
            return EXIT_OK
        done = await memory.remember(args.text, thread_id=args.thread, resource_id=args.resource, user=args.user)
        if args.json:
            print_json(done.model_dump())
        else:
            print(f"remembered in {done.record_key}: {done.text}\n  its id is {done.id}")
        return EXIT_OK

    return run_memory(config, main)
