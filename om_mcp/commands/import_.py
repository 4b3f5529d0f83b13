"""`om-mcp import FILE`: bring a memory or a conversation history in.

FILE is detected: an om-mcp export (JSONL, from `om-mcp export`) is restored as it
was, in one transaction, resources and all; Claude's or ChatGPT's data export
(`conversations.json`, or the `.zip` they send) becomes one thread per
conversation under `--resource` (default: the configured default resource), with
its title and real dates. Importing the same file again adds nothing.
Conversations are observed later by a running server, or now with `--observe`.

An export is read as a stream, one conversation at a time: one that cannot be
imported whole (over `--max-conversation-mb` of JSON, not valid JSON, not shaped
as the app writes them) is skipped and named by title and id, a message over the
size limit is cut, and the rest import. Exit 1 when something was skipped (run
again with a larger limit: only what is missing is added); 2 only for bad arguments.
"""

from __future__ import annotations

import argparse
import json
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
    parser.add_argument("file", metavar="FILE", help="memory.jsonl, conversations.json or the export .zip")
    parser.add_argument("--resource", metavar="R", help="who the conversations belong to (Claude / ChatGPT exports)")
    parser.add_argument(
        "--format",
        choices=["auto", "om-mcp", "claude", "chatgpt"],
        default="auto",
        help="what FILE is (default: detected)",
    )
    parser.add_argument(
        "--max-conversation-mb",
        type=float,
        default=MAX_CONVERSATION_MB,
        metavar="MB",
        help=f"read a conversation whole up to this many MB of JSON; larger ones are skipped and named"
        f" (default {MAX_CONVERSATION_MB:g}; memory use grows with it)",
    )
    parser.add_argument(
        "--observe",
        action="store_true",
        help="observe the imported conversations now (calls the model) instead of in the background",
    )
    add_config_arguments(parser, json_flag=True)
    parser.epilog = EXIT_CODES


MAX_CONVERSATION_MB = 16.0
PROBLEM_LINES = 20  # conversations named on stderr; --json lists them all


def run(args: argparse.Namespace) -> int:
    from om_mcp.importers import ExportError, detect_source
    from om_mcp.importers.jsonl_format import ExportFormatError

    path = Path(args.file).expanduser()
    if not path.is_file():
        return fail(f"no file at {path}", EXIT_NOT_FOUND)
    if not args.max_conversation_mb > 0:
        return fail("--max-conversation-mb must be more than 0", EXIT_CONFIG)
    try:
        kind = args.format if args.format != "auto" else "om-mcp" if _is_ours(path) else detect_source(path)
    except ExportError as error:
        return fail(str(error), EXIT_FAILED)
    if kind == "om-mcp" and args.resource:
        return fail("--resource is for Claude / ChatGPT exports: an om-mcp export keeps its own resources", EXIT_CONFIG)
    # Appending only stores: the cycles run afterwards (--observe) or in a server's background.
    config, code = prepare(args, {"observational_memory.enabled": False}, must_exist=False)
    if config is None:
        return code

    report: dict[str, Any] = {}
    threads: list[str] = []
    done = [0]  # conversations handled, for a file that breaks half-way

    async def main(memory: Any) -> int:
        from om_mcp.commands._output import print_json
        from om_mcp.store import StoreError

        try:
            if kind == "om-mcp":
                result = await _ours(memory, path)
            else:
                limit = int(args.max_conversation_mb * 1_000_000)
                result, imported = await _conversations(memory, path, kind, args.resource, limit, done)
                threads.extend(imported)
        except (ExportFormatError, ExportError, StoreError) as error:
            if kind == "om-mcp":
                return fail(f"{error} (nothing was imported)", EXIT_FAILED)
            return fail(
                f"{error}; the {done[0]:,} conversations before it were imported (run again once the file is whole)"
            )
        report.update(file=str(path), format=kind, added=dict(result.added), skipped=dict(result.skipped))
        if kind != "om-mcp":
            report["problems"] = result.problems
        if args.json and not (args.observe and threads):
            print_json(report)
        elif not args.json:
            print(_summary(report))
        _name_problems(result.problems)
        left_out = any(p["what"] != "trimmed" for p in result.problems)
        return EXIT_FAILED if left_out else EXIT_OK

    code = run_memory(config, main)
    if code == EXIT_OK and args.observe and threads:
        return _observe_now(args, threads, report)
    return code


def _is_ours(path: Path) -> bool:
    with path.open("rb") as handle:
        first = handle.readline(1_000_000).strip()
    try:
        return json.loads(first).get("type") == "om-mcp-export"
    except (ValueError, AttributeError, RecursionError):
        return False


async def _ours(memory: Any, path: Path):
    from om_mcp.commands._output import progress

    with path.open("rb") as source, progress(path.stat().st_size, "importing") as advance:
        return await memory.import_from(source, advance)


async def _conversations(memory: Any, path: Path, kind: str, resource: str | None, limit: int, done: list[int]):
    """Import a Claude or ChatGPT export; the bar follows the bytes of the file read."""
    from om_mcp.commands._output import progress
    from om_mcp.importers import iter_export

    with progress(path.stat().st_size, "importing conversations") as advance:
        read = [0]

        def at(position: int) -> None:
            if position > read[0]:
                advance(position - read[0])
                read[0] = position

        def handled(_thread: Any) -> None:
            done[0] += 1

        threads = iter_export(path, kind, max_chars=limit, progress=at)
        return await memory.import_conversations(threads, resource, handled)


def _name_problems(problems: list[dict[str, Any]]) -> None:
    """One line on stderr per conversation left out or cut, by title and id."""
    import sys

    for problem in problems[:PROBLEM_LINES]:
        title = json.dumps(problem["title"], ensure_ascii=False) if problem["title"] else "(no title)"
        where = problem["thread"] or f"conversation {problem.get('index', '?')} of the file"
        print(f"om-mcp: {problem['what']}: {title} ({where}): {problem['why']}", file=sys.stderr)
    if len(problems) > PROBLEM_LINES:
        print(f"om-mcp: ... and {len(problems) - PROBLEM_LINES} more (--json lists them all)", file=sys.stderr)


def _summary(report: dict[str, Any]) -> str:
    from om_mcp.commands._view import count

    def words(counts: dict[str, int]) -> str:
        return ", ".join(count(n, kind.replace("_", " ")) for kind, n in counts.items() if n) or "nothing"

    there = {k: n for k, n in report["skipped"].items() if k in ("message", "thread")}
    other = {k: n for k, n in report["skipped"].items() if k not in there}
    text = f"imported {words(report['added'])} from {report['file']} ({report['format']})"
    if there:
        text += f"; already there: {words(there)}"
    if other:
        text += f"; left out: {words(other)}"
    return text


def _observe_now(args: argparse.Namespace, threads: list[str], report: dict[str, Any]) -> int:
    """Observe each imported thread with the configuration as it is (observation on)."""
    from om_mcp.commands.common import load

    config = load(args)
    if config is None:
        return EXIT_CONFIG

    async def main(memory: Any) -> int:
        from om_mcp.commands._output import print_json, progress

        if not config.observational_memory.enabled:
            return fail("--observe: observation is off in the configuration", EXIT_CONFIG)
        ready, why = await memory.observation.model_available("observation", manual=True)
        if not ready:
            return fail(f"imported, but cannot observe now: {why}", EXIT_FAILED)
        failed, observed = [], 0
        with progress(len(threads), "observing") as advance:
            for thread_id in threads:
                outcome = await memory.observe(thread_id)
                observed += outcome.tokens_in
                if outcome.error:
                    failed.append(f"{thread_id}: {outcome.error}")
                advance(1)
        report["observed_tokens"], report["observe_failures"] = observed, failed
        if args.json:
            print_json(report)
        else:
            print(
                f"observed {observed:,} tokens in {len(threads)} threads"
                + (f"; {len(failed)} failed, first: {failed[0]}" if failed else "")
            )
        return EXIT_FAILED if failed else EXIT_OK

    return run_memory(config, main)
