"""`om-mcp restore THREAD --generation N`: undo a reflection.

Generation N of the thread's log (`om-mcp show THREAD --generations` lists them)
becomes the active log again, as a new generation: nothing is deleted, and the
restore can itself be undone the same way. Recorded as an event.
"""

from __future__ import annotations

import argparse
from typing import Any

from om_mcp.commands.common import EXIT_CODES, EXIT_OK, add_config_arguments, prepare, run_memory


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("thread", metavar="THREAD", help="the thread id")
    parser.add_argument("--generation", type=int, required=True, metavar="N", help="the generation to restore")
    add_config_arguments(parser, json_flag=True)
    parser.epilog = EXIT_CODES


def run(args: argparse.Namespace) -> int:
    config, code = prepare(args)
    if config is None:
        return code

    async def main(memory: Any) -> int:
        from om_mcp.commands._output import print_json

        done = await memory.control.restore_generation(args.thread, args.generation)
        if args.json:
            print_json(done.model_dump())
        else:
            print(
                f"restored generation {done.restored} of {args.thread!r} as generation {done.generation}"
                f" ({done.groups} groups); the log it replaced stays in the history"
            )
        return EXIT_OK

    return run_memory(config, main)
