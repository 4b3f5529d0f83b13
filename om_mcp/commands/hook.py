"""`om-mcp hook HOST`: what a coding agent's lifecycle hooks run (HOST: one of `hosts.ADAPTERS`).

Reads the hook's JSON on stdin. Every event catches up on the session's
transcript (the new part only); SessionStart also prints the project's memory
as `hookSpecificOutput.additionalContext`. Observation is handed to a live
om-mcp process, or to a worker started in the background. Always exits 0:
a hook must never break the agent's session (errors go to
$XDG_DATA_HOME/om-mcp/hook.log). `OM_MCP_HOOKS=off` makes it exit at once.

`om_mcp.cli` sends `om-mcp hook ...` straight to `main` below, so the hook
does not build the other commands' parsers (and import their modules).
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

from om_mcp.hosts import ADAPTERS

HELP = "record a coding agent's session from its hooks (reads the hook JSON on stdin)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("host", choices=list(ADAPTERS), help="the agent that runs the hook")
    parser.add_argument("--db", help="the database file (default: $OM_DB_PATH, else ~/.local/share/om-mcp/memory.db)")
    parser.add_argument("--config", help="TOML config file (or $OM_MCP_CONFIG)")
    parser.add_argument(
        "--max-chars",
        type=int,
        default=8000,
        help="longest SessionStart context in characters (default 8000; Claude Code shows 10000)",
    )
    parser.add_argument(
        "--tool-output-chars",
        type=int,
        default=2000,
        help="a longer tool output is stored as its first 3/4 and last 1/4 of this many characters (default 2000)",
    )
    parser.add_argument(
        "--no-worker",
        action="store_true",
        help="never start a background worker (observation then waits for a running server)",
    )
    parser.add_argument(
        "--worker-idle-exit",
        type=float,
        default=60.0,
        help="seconds a started worker waits for more work before it exits (default 60)",
    )


def run(args: argparse.Namespace) -> int:
    from om_mcp.hook.run import HookOptions, run_hook

    options = HookOptions(
        host=args.host,
        db=args.db,
        config=args.config,
        max_chars=args.max_chars,
        tool_output_chars=args.tool_output_chars,
        worker=not args.no_worker,
        worker_idle_exit=args.worker_idle_exit,
    )
    from om_mcp.hosts.events import MAX_INPUT_BYTES

    output = run_hook(options, sys.stdin.buffer.read(MAX_INPUT_BYTES + 1))  # bounded: more is refused
    if output:
        sys.stdout.write(output + "\n")
        sys.stdout.flush()
    return 0


def main(argv: list[str]) -> int:
    """`om-mcp hook ARGS` without the rest of the CLI; a bad argument is logged, never exit 2
    (Claude Code reads exit 2 from some hooks as "block this prompt")."""
    if "-h" in argv or "--help" in argv:
        parser = argparse.ArgumentParser(prog="om-mcp hook", description=HELP)
        add_arguments(parser)
        parser.parse_args(argv)
        return 0
    parser = _QuietParser(prog="om-mcp hook", description=HELP, add_help=False)
    add_arguments(parser)
    try:
        args = parser.parse_args(argv)
    except argparse.ArgumentError as error:
        import os

        from om_mcp.hook.run import log_line

        log_line(os.environ, argv[0] if argv else "-", None, f"bad arguments {argv}: {error}")
        return 0
    return run(args)


class _QuietParser(argparse.ArgumentParser):
    """Raises instead of printing the usage and exiting 2."""

    def error(self, message: str) -> NoReturn:
        raise argparse.ArgumentError(None, message)
