"""`om-mcp setup [HOST]`: connect this om-mcp to an agent host, in one command.

Writes the host's MCP server entry and, where the host has hooks, the hooks
that record each session, with the absolute path of the running om-mcp
(`hosts.setup.launch`), merged into the files already there
(`hosts.setup.files`, `hosts.setup.entries`; each host's files in its module
in `hosts/setup/`). A second run changes nothing; `--dry-run` prints the diff;
`--uninstall` removes exactly what setup adds; `--project` writes the
project's files (the git root of the working directory). Then it checks what
it wrote (`setup_check`). With no host it lists the hosts found here.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from om_mcp.commands.common import EXIT_CONFIG, EXIT_FAILED, EXIT_OK

if TYPE_CHECKING:
    from om_mcp.hosts.setup import HostSetup, Place

HELP = "connect om-mcp to an agent host: its MCP server entry and the hooks that record sessions"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from om_mcp.hosts.setup import HOSTS

    parser.add_argument("host", nargs="?", choices=list(HOSTS), help="the host to set up (none: list the hosts here)")
    parser.add_argument("--project", action="store_true", help="write the project's files instead of the user's")
    parser.add_argument("--dry-run", action="store_true", help="print what would change (a diff), change nothing")
    parser.add_argument("--uninstall", action="store_true", help="remove what setup added, nothing else")
    parser.add_argument("--no-check", action="store_true", help="do not start the server and the hook afterwards")
    parser.add_argument(
        "--plugin",
        action="store_true",
        help="claude-code with the om-mcp plugin: only record where om-mcp is, for the plugin's launcher",
    )


def run(args: argparse.Namespace) -> int:
    from om_mcp.hosts.common import find_project
    from om_mcp.hosts.setup import HOSTS, Place
    from om_mcp.hosts.setup.launch import om_mcp_command, record_command

    home = Path(os.environ.get("HOME") or Path.home())
    if args.host is None:
        return _list(HOSTS, Place(home=home), om_mcp_command())
    host = HOSTS[args.host]
    if args.project and not host.has_project:
        print(f"om-mcp setup: {host.title} has no project-level file; run it without --project", file=sys.stderr)
        return EXIT_CONFIG
    command = om_mcp_command()
    if args.plugin:
        if args.host != "claude-code":
            print("om-mcp setup: --plugin is for claude-code", file=sys.stderr)
            return EXIT_CONFIG
        print(f"recorded {command[0]} for the plugin's launcher in {record_command(command)}")
        return EXIT_OK
    place = Place(home=home, project=find_project(Path.cwd()).root if args.project else None)
    return _setup(host, place, command, args)


def _setup(host: HostSetup, place: Place, command: list[str], args: argparse.Namespace) -> int:
    from om_mcp.hosts.setup.files import ConfigProblem, apply
    from om_mcp.hosts.setup.launch import record_command

    try:
        changes = host.changes(place, command, args.uninstall)
    except ConfigProblem as problem:
        print(f"om-mcp setup: {problem}", file=sys.stderr)
        return EXIT_FAILED
    failed = False
    for change in changes:
        if change.manual is not None:
            failed = True
            print(
                f"{change.path}: has comments, which a rewrite would lose; left untouched. Add this {change.what}"
                f" entry by hand:\n{change.manual}"
            )
            continue
        if not change.changed:
            print(f"{change.path}: {change.what} already {'absent' if args.uninstall else 'in place'}, unchanged")
            continue
        if args.dry_run:
            sys.stdout.write(change.diff())
            continue
        try:
            backup = apply(change)
        except ConfigProblem as problem:
            print(f"om-mcp setup: {problem}", file=sys.stderr)
            return EXIT_FAILED
        done = "removed" if args.uninstall else "wrote"
        kept = f" (previous version kept in {backup})" if backup else ""
        print(f"{change.path}: {done} the {change.what}{kept}")
    if args.dry_run or args.uninstall:
        return EXIT_FAILED if failed else EXIT_OK
    if host.name == "claude-code" and place.project is None:
        record_command(command)
    warning = _warning(host.name, place)
    if warning:
        print(f"warning: {warning}")
    if not args.no_check and not failed:
        failed = not _check(host, command)
    if not failed:
        for note in host.notes:
            print(f"next: {note}")
    return EXIT_FAILED if failed else EXIT_OK


def _warning(name: str, place: Place) -> str | None:
    if name == "codex":
        from om_mcp.hosts.setup.codex import hooks_switched_off

        return hooks_switched_off(place)
    return None


def _check(host: HostSetup, command: list[str]) -> bool:
    from om_mcp.commands.setup_check import check_hook, check_server
    from om_mcp.hosts.setup.base import server_args
    from om_mcp.hosts.setup.launch import shell_command

    results = [check_server(command[0], server_args(command, host.hook_event is not None))]
    if host.hook_event is not None:
        results.append(check_hook(shell_command(command, "hook", host.name), host.hook_event("@CWD@")))
    for ok, line in results:
        print(f"check: {'ok' if ok else 'FAILED'}: {line}")
    return all(ok for ok, _ in results)


def _list(hosts: dict[str, HostSetup], place: Place, command: list[str]) -> int:
    from om_mcp.commands._output import print_table
    from om_mcp.hosts.setup.files import ConfigProblem

    rows = []
    for host in hosts.values():
        try:
            files = ", ".join(dict.fromkeys(str(c.path) for c in host.changes(place, command, False)))
        except ConfigProblem as problem:
            files = str(problem)
        rows.append(
            {
                "host": host.name,
                "found": host.detect(place) or "not found",
                "gets": "MCP server" + (" and hooks" if host.hook_event else ""),
                "files": files,
            }
        )
    print(f"om-mcp is {' '.join(command)}; `om-mcp setup HOST` writes its absolute path into:\n")
    print_table(rows, ["host", "found", "gets", "files"], out=sys.stdout)
    return EXIT_OK
