"""`om-mcp`: the entry point. `serve` (the default) runs the MCP server; the other
commands look at, move and look after a memory from the shell.

Each command lives in `om_mcp/commands/<name>.py` with `add_arguments(parser)` and
`run(args) -> int`, and is imported only when it runs, so `om-mcp --help` and the
hook answer fast. Stdout belongs to the protocol in stdio mode: logs go to stderr.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from om_mcp import __version__

# name -> one-line help; the module om_mcp.commands.<name> does the work.
COMMANDS = {
    "serve": "run the MCP server over stdio (default) or streamable HTTP",
    "setup": "connect om-mcp to an agent host (Claude Code, Cursor, VS Code, Codex, ...): server and hooks",
    "config": "where the config file is, what it sets, and set one option (config path|show|set KEY VALUE)",
    "token": "bearer tokens and OAuth grants for the HTTP server: create, list, revoke",
    "connect": "connect a remote client (claude.ai, ChatGPT, ...): the server's URL and a one-time consent code",
    "status": "the database, what it holds, model readiness, pending work, recent threads",
    "threads": "list threads with their windows and last cycle",
    "show": "one thread: its observation log, working memory and recent messages",
    "search": "search messages and observations",
    "forget": "delete a thread, a resource, a message, an observation or a phrase for good (the text leaves the file)",
    "edit": "correct one observation line (kept through reflections as stated by the user)",
    "remember": "remember one line word for word (high priority, stated by the user), with no model",
    "restore": "make an earlier generation of a thread's log active again, or bring back one retired line",
    "doctor": "check the config, the database's integrity, the search index and the model",
    "observe": "observe a thread's unobserved messages now",
    "reflect": "condense a thread's observation log now",
    "backup": "an online, consistent copy of the database",
    "export": "write the memory as versioned JSONL (to stdout or -o FILE)",
    "import": "import an om-mcp export, or Claude / ChatGPT conversations",
    "hook": "record a coding agent's session from its hooks (Claude Code, Gemini CLI, Codex, Cursor, VS Code)",
    "worker": "observe and reflect in the background until idle (started by the hooks)",
    "ingest": "add a transcript file to memory (claude-code, gemini-cli, openai-messages)",
    "migrate": "copy a memory into another database (SQLite to PostgreSQL); resumable",
}
ALIASES = {"import": "import_"}  # a command named after a Python keyword


def parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole CLI; with `command`, only that command's arguments are built (its module is the
    only one imported: `serve` starts without loading the other commands)."""
    root = argparse.ArgumentParser(prog="om-mcp", description="Long-term memory for MCP hosts.")
    root.add_argument("--version", action="version", version=f"om-mcp {__version__}")
    commands = root.add_subparsers(dest="command", metavar="COMMAND")
    for name, help_text in COMMANDS.items():
        sub = commands.add_parser(name, help=help_text, description=help_text)
        if command is None or name == command:
            _module(name).add_arguments(sub)
    return root


def _module(name: str):
    return importlib.import_module(f"om_mcp.commands.{ALIASES.get(name, name)}")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["hook"]:  # runs on every prompt: skip building the other commands' parsers
        from om_mcp.commands.hook import main as hook_main

        return hook_main(argv[1:])
    if not argv or argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version"):
        argv.insert(0, "serve")  # `om-mcp --db x` means `om-mcp serve --db x`
    args = parser(argv[0]).parse_args(argv)  # only the command that runs: the others' imports wait
    try:
        code = _module(args.command).run(args)
        sys.stdout.flush()  # here, where a closed pipe is caught, not at exit, where it is a traceback
        return code
    except KeyboardInterrupt:  # Ctrl-C: no traceback
        return 130
    except BaseException as error:
        if not _broken_pipe(error):
            raise
        return _closed_early()


def _broken_pipe(error: BaseException) -> bool:
    if isinstance(error, BrokenPipeError):
        return True
    return isinstance(error, BaseExceptionGroup) and all(_broken_pipe(e) for e in error.exceptions)


def _closed_early() -> int:
    """`om-mcp status | head`: the reader left. One line, the conventional exit code, and no second
    error when Python flushes stdout at exit."""
    import os

    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except OSError:
        pass
    print("om-mcp: the output was closed before it was all written (broken pipe)", file=sys.stderr)
    return 141  # 128 + SIGPIPE, what a shell reports for a command cut off by `head`


if __name__ == "__main__":
    raise SystemExit(main())
