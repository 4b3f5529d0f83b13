"""`om-mcp restore THREAD --generation N`: undo a reflection;
`om-mcp restore [THREAD] --line ID`: bring back one line a reflection retired.

Generation N of the thread's log (`om-mcp show THREAD --generations` lists them)
becomes the active log again, as a new generation: nothing is deleted, and the
restore can itself be undone the same way. What the user said since is kept: lines
remembered since are carried over, and lines corrected since stay corrected. The
command lists what it keeps and what of the active log it drops (the Observer's lines
since, which the log it replaces keeps); `--dry-run` lists it and changes nothing.

A line (its id from recall's search, from `om-mcp show` before the reflection, or from
the retired lines `show` lists; the short id alone with the THREAD) goes back at the end of the active
log under its Date line; an archived day's id brings the day back. Recorded as an event.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from om_mcp.commands.common import EXIT_CODES, EXIT_CONFIG, EXIT_OK, add_config_arguments, prepare, run_memory


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("thread", metavar="THREAD", nargs="?", help="the thread id")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--generation", type=int, metavar="N", help="the generation to restore")
    which.add_argument("--line", metavar="ID", help="a retired line (or an archived day) to bring back")
    parser.add_argument(
        "--dry-run", action="store_true", help="with --generation: list what it would keep and drop, change nothing"
    )
    add_config_arguments(parser, json_flag=True)
    parser.epilog = EXIT_CODES


def run(args: argparse.Namespace) -> int:
    config, code = prepare(args)
    if config is None:
        return code
    if args.generation is not None and not args.thread:
        print("om-mcp restore: --generation needs the THREAD it belongs to", file=sys.stderr)
        return EXIT_CONFIG
    if args.dry_run and args.generation is None:
        print("om-mcp restore: --dry-run goes with --generation", file=sys.stderr)
        return EXIT_CONFIG

    async def main(memory: Any) -> int:
        from om_mcp.commands._output import print_json

        if args.line is not None:
            line = await memory.control.restore_line(args.line, args.thread)
            if args.json:
                print_json(line.model_dump())
            else:
                where = line.was if line.was.startswith("retired") else f"of {line.was}"
                print(f"restored a line {where}: {line.text}\n  its id is now {line.id}")
            return EXIT_OK
        done = await memory.control.restore_generation(args.thread, args.generation, apply=not args.dry_run)
        if args.json:
            print_json(done.model_dump())
            return EXIT_OK
        verb = "restored" if done.done else "would restore"
        print(
            f"{verb} generation {done.restored} of {args.thread!r} as generation {done.generation}"
            f" ({done.groups} groups, {done.back} lines back)"
        )
        if done.kept:
            print(f"kept, as you stated them since ({len(done.kept)}):")
            print("".join(f"  {line}\n" for line in done.kept), end="")
        if done.dropped:
            print(f"{'dropped' if done.done else 'would drop'} from the active log ({len(done.dropped)}):")
            print("".join(f"  {line}\n" for line in done.dropped), end="")
        undo = done.generation - 1
        if done.done:
            print(f"the log it replaced stays in the history: restore {args.thread} --generation {undo} undoes this")
        return EXIT_OK

    return run_memory(config, main)
