"""`om-mcp edit LINE_ID TEXT`: correct one observation line.

The line (its id is in `om-mcp show`) gets the new text and keeps its place, priority
marker and time unless TEXT gives its own; it is marked `[user-stated]`, and the
Reflector keeps such lines through every reflection. Recorded as an event.
"""

from __future__ import annotations

import argparse
from typing import Any

from om_mcp.commands.common import EXIT_CODES, EXIT_OK, add_config_arguments, prepare, run_memory


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "line", metavar="LINE_ID", help="the line's id: <group id>.<6 hex>, or the 6 hex alone (om-mcp show prints it)"
    )
    parser.add_argument("text", metavar="TEXT", help="what the line should say")
    parser.add_argument("--thread", metavar="T", help="refuse unless the line is in this thread's log")
    add_config_arguments(parser, json_flag=True)
    parser.epilog = EXIT_CODES


def run(args: argparse.Namespace) -> int:
    config, code = prepare(args)
    if config is None:
        return code

    async def main(memory: Any) -> int:
        from om_mcp.commands._output import print_json

        done = await memory.control.edit_observation(args.line, args.text, args.thread)
        if args.json:
            print_json(done.model_dump())
        else:
            print(
                f"corrected: {done.text}\n  its id is now {done.id}\n  the log is now generation {done.generation};"
                f" the memory as of any time before shows the old line (show --diff {done.generation} shows the edit)"
            )
        return EXIT_OK

    return run_memory(config, main)
