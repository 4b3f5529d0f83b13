"""`om-mcp remember TEXT [--thread T | --resource R | --user]`: remember this, word for word.

The line goes into the log at once, with no model: high priority and marked
`[user-stated]`, so every reflection keeps it as written. `--thread T`: that thread's memory
(in resource scope, its resource's log); `--resource R`: a resource's log (resource scope);
`--user`: the person layer, which every resource's context shows when
`[observational_memory.user] enabled = true` (`--user --working-memory TEXT` sets the person's
working memory note instead). With none: the project of the current folder, found as the hooks
find it (`hosts/common.py: find_project`), so that project's next session starts with the line.
Like every writing command it creates the database on a fresh machine. A
`<remember>...</remember>` span in a user's message does the same, as it is stored.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from om_mcp.commands.common import EXIT_CODES, EXIT_CONFIG, EXIT_OK, add_config_arguments, prepare, run_memory


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("text", metavar="TEXT", help="what to remember, in your words (one line)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--thread", metavar="T", help="into this thread's memory")
    where.add_argument(
        "--resource", metavar="R", help="into this resource's log (default: the project of the current folder)"
    )
    where.add_argument("--user", action="store_true", help="into the person layer, shown in every resource")
    parser.add_argument(
        "--working-memory",
        action="store_true",
        help="with --user: TEXT replaces the person layer's working memory (Markdown) instead",
    )
    add_config_arguments(parser, json_flag=True)
    parser.epilog = EXIT_CODES


def run(args: argparse.Namespace) -> int:
    if args.working_memory and not args.user:
        print("om-mcp remember: --working-memory goes with --user (the person layer's note)", file=sys.stderr)
        return EXIT_CONFIG
    config, code = prepare(args, must_exist=False)
    if config is None:
        return code
    here = None
    if not (args.thread or args.resource or args.user):
        from om_mcp.hosts.common import find_project

        here = find_project(os.getcwd())

    async def main(memory: Any) -> int:
        from om_mcp.commands._output import print_json

        if args.working_memory:
            stored = await memory.set_user_working_memory(args.text)
            print_json({"working_memory": stored}) if args.json else print("the person layer's working memory is set")
            return EXIT_OK
        resource = here.resource_id if here else args.resource
        done = await memory.remember(args.text, thread_id=args.thread, resource_id=resource, user=args.user)
        if args.json:
            print_json(done.model_dump())
            return EXIT_OK
        if args.user:
            where = "the person layer (every project's sessions show it)"
        elif here is not None:
            where = f"the project of this folder, {here.root} ({done.record_key}); its next session starts with it"
        else:
            where = done.record_key
        print(f"remembered in {where}:\n  {done.text}\n  its id is {done.id}")
        return EXIT_OK

    return run_memory(config, main)
