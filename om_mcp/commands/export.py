"""`om-mcp export [--resource R] > memory.jsonl`: the memory as versioned JSONL.

Every thread, message (all parts), observation generation, working memory and
extracted value, from one consistent snapshot (servers may keep writing). Stdout
carries the data; the progress bar goes to stderr. `-o FILE` writes FILE whole
or not at all. `om-mcp import memory.jsonl` reads it back on another machine.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
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
    parser.add_argument("--resource", metavar="R", help="only this resource (default: everything)")
    parser.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    add_config_arguments(parser)
    parser.epilog = EXIT_CODES


def run(args: argparse.Namespace) -> int:
    config, code = prepare(args)
    if config is None:
        return code
    target = Path(args.output).expanduser() if args.output else None
    if target is not None and target.is_dir():
        return fail(f"{target} is a directory: give the export file's path", EXIT_CONFIG)

    async def main(memory: Any) -> int:
        from om_mcp.commands._output import progress
        from om_mcp.commands._view import count

        resources = await memory.store.list_resources()
        if args.resource:
            resources = [r for r in resources if r.id == args.resource]
            if not resources:
                return fail(f"unknown resource {args.resource!r}", EXIT_NOT_FOUND)
        total = sum(r.messages for r in resources)
        partial = target.with_name(f".{target.name}.partial") if target else None
        try:
            out = open(partial, "w", encoding="utf-8") if partial else sys.stdout  # noqa: SIM115
            try:
                with progress(total, "exporting messages") as advance:
                    counts = await memory.export_to(out, args.resource, advance)
            finally:
                if partial:
                    out.close()
            if partial and target:
                os.replace(partial, target)
        except OSError as error:
            if partial:
                partial.unlink(missing_ok=True)
            return fail(f"cannot write the export: {error.strerror or error}", EXIT_FAILED)
        summary = ", ".join(count(n, kind.replace("_", " ")) for kind, n in counts.items())
        print(f"exported {summary}" + (f" to {target}" if target else ""), file=sys.stderr)
        return EXIT_OK

    return run_memory(config, main)
