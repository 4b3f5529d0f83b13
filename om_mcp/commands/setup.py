"""`om-mcp setup [HOST]`: connect this om-mcp to an agent host, in one command.

Writes the host's MCP server entry and, where the host has hooks, the hooks
that record each session, merged into the files already there
(`hosts.setup.files`, `hosts.setup.entries`; each host's files in its module
in `hosts/setup/`). For the user's own files the command written is the
absolute path of the running om-mcp (`hosts.setup.launch`: GUI apps do not see
the shell's PATH); `--project` writes files meant to be committed, so they run
`om-mcp` as found on each teammate's PATH. Every file is planned first, and
none is written unless all can be (a file with comments is left alone, and so
are the others). A second run changes nothing; `--dry-run` prints the diff and
writes nothing anywhere; `--uninstall` removes exactly what setup added, with
the backups it made. Codex runs hooks only once trusted: setup has Codex trust
the ones it wrote. Then it checks what it wrote (`setup_check`). With no host
it lists the hosts found here. `claude-code --plugin` is the other way into
Claude Code: it records where om-mcp is for the plugin's launcher and lays out
the plugin, ready for `claude plugin install`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from om_mcp.commands.common import EXIT_CONFIG, EXIT_FAILED, EXIT_OK

if TYPE_CHECKING:
    from om_mcp.hosts.setup import HostSetup, Place

HELP = "connect om-mcp to an agent host: its MCP server entry and the hooks that record sessions"
PROJECT_COMMAND = ["om-mcp"]  # what committed files run: the teammate's own om-mcp, from PATH


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from om_mcp.hosts.setup import HOSTS

    parser.add_argument("host", nargs="?", choices=list(HOSTS), help="the host to set up (none: list the hosts here)")
    parser.add_argument(
        "--project",
        action="store_true",
        help="write the project's files (to commit; they run om-mcp from each person's PATH) instead of the user's",
    )
    parser.add_argument("--dry-run", action="store_true", help="print what would change (a diff), write nothing")
    parser.add_argument("--uninstall", action="store_true", help="remove what setup added, nothing else")
    parser.add_argument("--no-check", action="store_true", help="do not start the server and the hook afterwards")
    parser.add_argument(
        "--plugin",
        action="store_true",
        help="claude-code with the om-mcp plugin: record where om-mcp is for the plugin and lay the plugin out",
    )


def run(args: argparse.Namespace) -> int:
    from om_mcp.hosts.common import find_project
    from om_mcp.hosts.setup import HOSTS, Place
    from om_mcp.hosts.setup.launch import om_mcp_command

    home = Path(os.environ.get("HOME") or Path.home())
    if args.host is None:
        return _list(HOSTS, Place(home=home), om_mcp_command())
    host = HOSTS[args.host]
    if args.project and not host.has_project:
        print(f"om-mcp setup: {host.title} has no project-level file; run it without --project", file=sys.stderr)
        return EXIT_CONFIG
    if args.plugin:
        if host.plugin is None or args.project:
            with_plugin = ", ".join(h.name for h in HOSTS.values() if h.plugin is not None)
            print(f"om-mcp setup: --plugin is for {with_plugin}, without --project", file=sys.stderr)
            return EXIT_CONFIG
        return _plugin(host, om_mcp_command(), args)
    place = Place(home=home, project=find_project(Path.cwd()).root if args.project else None)
    return _setup(host, place, PROJECT_COMMAND if args.project else om_mcp_command(), args)


def _setup(host: HostSetup, place: Place, command: list[str], args: argparse.Namespace) -> int:
    from om_mcp.commands.config import where_line
    from om_mcp.hosts.setup.files import ConfigProblem, write_all

    try:
        changes = host.changes(place, command, args.uninstall)
    except ConfigProblem as problem:
        print(f"om-mcp setup: {problem}", file=sys.stderr)
        return EXIT_FAILED
    refused = [c for c in changes if c.manual is not None]
    if args.uninstall and host.before_uninstall is not None and not refused and not args.dry_run:
        said = host.before_uninstall(place, command)  # while what it undoes is still there to be found
        if said:
            print(said)
            changes = host.changes(place, command, args.uninstall)  # the host edited its files: plan again
    for change in refused:
        print(
            f"{change.path}: has comments, which a rewrite would lose; left untouched. Add this {change.what}"
            f" entry by hand:\n{change.manual}"
        )
    pending = [c for c in changes if c.changed]
    for change in changes:
        if change.manual is None and not change.changed:
            print(f"{change.path}: {change.what} already {'absent' if args.uninstall else 'in place'}, unchanged")
    if refused:
        others = ", ".join(str(c.path) for c in pending)
        print(
            f"nothing written{f' (not {others} either)' if others else ''}: setup writes all of"
            f" {host.title}'s files or none. Once the entry is added by hand, run it again for the rest."
        )
        return EXIT_FAILED
    if args.dry_run:
        for change in pending:
            sys.stdout.write(change.diff())
        if host.after_write_preview and not args.uninstall and place.project is None:
            print(f"and then: {host.after_write_preview}")
        return EXIT_OK
    root = place.project or place.home
    try:
        backups = write_all(pending, uninstall=args.uninstall, root=root)
    except ConfigProblem as problem:
        print(f"om-mcp setup: {problem}", file=sys.stderr)
        return EXIT_FAILED
    for change, backup in zip(pending, backups):
        done = "removed" if args.uninstall else "wrote"
        kept = f" (previous version kept in {backup})" if backup else ""
        print(f"{change.path}: {done} the {change.what}{kept}")
    if args.uninstall:
        return EXIT_OK
    failed = False
    for warning in _warnings(host, place, command):
        print(f"warning: {warning}")
    if host.after_write is not None:
        ok, line = host.after_write(place, command)
        print(f"{'hooks' if ok else 'next' if ok is None else 'warning'}: {line}")
    if not args.no_check:
        failed = not _check(host, command)
    if not failed:
        for note in host.notes:
            print(f"next: {note}")
    print(where_line())
    return EXIT_FAILED if failed else EXIT_OK


def _warnings(host: HostSetup, place: Place, command: list[str]) -> list[str]:
    found = []
    if place.project is not None and not shutil.which(command[0]):
        found.append(
            f"`{command[0]}` is not on PATH here: the project's files run it from PATH, so install om-mcp with"
            " pipx or uv (docs/install.md) on each machine"
        )
    return found + host.warnings(place)


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


def _plugin(host: HostSetup, command: list[str], args: argparse.Namespace) -> int:
    """The host's other way in (Claude Code's plugin), as its setup module lays it out."""
    from om_mcp.hosts.setup.files import ConfigProblem

    assert host.plugin is not None
    try:
        ok, lines = host.plugin(command, args.dry_run, args.uninstall)
    except ConfigProblem as problem:
        print(f"om-mcp setup: {problem}", file=sys.stderr)
        return EXIT_FAILED
    for line in lines:
        print(line)
    return EXIT_OK if ok else EXIT_FAILED


def _list(hosts: dict[str, HostSetup], place: Place, command: list[str]) -> int:
    from om_mcp.commands._output import print_table
    from om_mcp.commands.config import where_line
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
    print("\n" + where_line())
    return EXIT_OK
