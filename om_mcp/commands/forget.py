"""`om-mcp forget`: delete for good, a whole thread or resource, or one thing.

    om-mcp forget --thread T                      # a thread, as delete_thread does
    om-mcp forget --resource R                    # a resource: all its threads and its memory
    om-mcp forget --message ID --thread T         # one message
    om-mcp forget --observation ID [--with-sources]   # one observation line or group (ids: `om-mcp show`)
    om-mcp forget --match "my old address" [--resource R]   # everything holding a phrase
    om-mcp forget --finish                        # end an erase that had to wait for a reader

Everything derived goes too (search entries, vectors, buffered observations; a line from
every generation of the log; for --match, the titles, metadata, tasks, extracted values,
events, working-memory lines and model-health excerpts that quote it), the search index is
rewritten and the WAL folded in, and SQLite zeroes freed pages: afterwards the text is not in
the file's bytes. What was forgotten leaves a tombstone (a keyed hash, never the text), so no
way in stores it again (docs/forget.md). When another connection reads an older snapshot (an
export in progress), the old pages cannot leave the file yet: the command says so and exits 5
until `--finish` (or the server's background work) completes the erase.
Shows what would go and asks first on a terminal; elsewhere it needs --yes (--dry-run
shows it and changes nothing).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from om_mcp.commands.common import (
    EXIT_CODES,
    EXIT_CONFIG,
    EXIT_FAILED,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_PENDING,
    add_config_arguments,
    fail,
    prepare,
    run_memory,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--thread", metavar="T", help="forget this thread (or: the thread of --message)")
    parser.add_argument("--resource", metavar="R", help="forget this resource (or: where --match looks)")
    parser.add_argument("--message", metavar="ID", help="forget one message of --thread")
    parser.add_argument("--observation", metavar="ID", help="forget one observation line or group (ids: om-mcp show)")
    parser.add_argument("--match", metavar="TEXT", help="forget every message and observation holding TEXT")
    parser.add_argument(
        "--with-sources", action="store_true", help="--observation: forget the messages it was observed from too"
    )
    parser.add_argument(
        "--finish",
        action="store_true",
        help="finish an erase that waited for a reader (exit 5 while a reader still holds an older snapshot)",
    )
    parser.add_argument("--dry-run", action="store_true", help="show what would be forgotten; change nothing")
    parser.add_argument("--yes", action="store_true", help="do not ask (needed when not on a terminal)")
    add_config_arguments(parser, json_flag=True)
    parser.epilog = EXIT_CODES


def _check(args: argparse.Namespace) -> str | None:
    """What is wrong with the combination of flags, or None."""
    one = [name for name in ("message", "observation", "match") if getattr(args, name)]
    if args.finish:
        return None if not (one or args.thread or args.resource) else "--finish goes alone"
    if len(one) > 1:
        return "give one of --message, --observation, --match"
    if args.with_sources and one != ["observation"]:
        return "--with-sources goes with --observation"
    if one == ["message"] and not args.thread:
        return "--message needs --thread (the thread it belongs to)"
    if one == ["message"] and args.resource:
        return "--message takes --thread, not --resource"
    if not one and bool(args.thread) == bool(args.resource):
        return "give --thread T or --resource R (or --message, --observation, --match)"
    return None


def run(args: argparse.Namespace) -> int:
    problem = _check(args)
    if problem:
        return fail(problem, EXIT_CONFIG)
    config, code = prepare(args)
    if config is None:
        return code

    async def main(memory: Any) -> int:
        if args.finish:
            return await _finish(memory)
        if args.message or args.observation or args.match:
            return await _one_thing(memory, args)
        return await _whole(memory, args)

    return run_memory(config, main)


async def _whole(memory: Any, args: argparse.Namespace) -> int:
    from om_mcp.commands._output import print_json
    from om_mcp.commands._view import count

    if args.thread:
        thread = await memory.thread(args.thread)
        if thread is None:
            return fail(f"unknown thread {args.thread!r}", EXIT_NOT_FOUND)
        what = f"thread {args.thread!r} ({thread.message_count:,} messages)"
    else:
        found = [r for r in await memory.store.list_resources() if r.id == args.resource]
        if not found:
            return fail(f"unknown resource {args.resource!r}", EXIT_NOT_FOUND)
        what = f"resource {args.resource!r} ({found[0].threads} threads, {found[0].messages:,} messages)"
    if args.dry_run:
        print(f"would forget {what}")
        return EXIT_OK
    refused = _confirm(args, f"Forget {what} for good? This cannot be undone. [y/N] ")
    if refused is not None:
        return refused
    if args.thread:
        done = await memory.delete_thread(args.thread)
        report = {"thread_id": args.thread, "threads": 1, "messages": done.deleted_messages}
    else:
        threads, messages = await memory.forget_resource(args.resource)
        report = {"resource_id": args.resource, "threads": threads, "messages": messages}
    pending = await memory.store.erase_pending() is not None
    if args.json:
        print_json({**report, "erase_pending": pending})
    else:
        where = "the memory" if pending else "the database file"
        print(
            f"forgot {what.split(' (')[0]}: {count(report['threads'], 'thread')},"
            f" {count(report['messages'], 'message')}; their text is erased from {where}"
        )
    return _pending() if pending else EXIT_OK


PENDING = (
    "the erase is not complete yet: another connection (an export, a backup, a reader) holds an older snapshot"
    " of the database, so old pages of the file still hold the text. It finishes when that reader is done:"
    " run `om-mcp forget --finish` (a running server finishes it by itself)"
)


def _pending() -> int:
    print(f"om-mcp: {PENDING}", file=sys.stderr)
    return EXIT_PENDING


async def _finish(memory: Any) -> int:
    """End a pending erase: exit 0 once the file holds no forgotten text, 5 while a reader still blocks it."""
    since = await memory.store.erase_pending()
    if since is None:
        print("no erase is pending: what was forgotten is out of the database file")
        return EXIT_OK
    if await memory.store.finish_erase():
        print(f"erased: what was forgotten since {since} is out of the database file now")
        return EXIT_OK
    return _pending()


async def _one_thing(memory: Any, args: argparse.Namespace) -> int:
    from om_mcp.commands._output import print_json

    control = memory.control
    if args.message:
        thread = await memory.thread(args.thread)
        if thread is None:
            return fail(f"unknown thread {args.thread!r}", EXIT_NOT_FOUND)
        found = await memory.store.find_message(thread.resource_id, args.message, args.thread)
        if found is None:
            return fail(f"unknown message {args.message!r} in thread {args.thread!r}", EXIT_NOT_FOUND)
        question = f"Forget message {args.message!r} of thread {args.thread!r} for good? [y/N] "
        if args.dry_run:
            print(f"would forget message {args.message!r} of thread {args.thread!r}")
            return EXIT_OK

        async def act() -> Any:
            return await control.forget_message(args.thread, args.message)

    elif args.observation:
        preview = await control.forget_observation(
            args.observation, args.thread, with_sources=args.with_sources, apply=False
        )
        if args.dry_run or not args.yes:
            _show(preview, args)
        if args.dry_run:
            return EXIT_OK
        question = "Forget this for good? [y/N] "

        async def act() -> Any:
            return await control.forget_observation(args.observation, args.thread, with_sources=args.with_sources)

    else:
        preview = await control.forget_match(args.match, args.resource, apply=False)
        if args.dry_run or not args.yes:
            _show(preview, args)
        if args.dry_run:
            return EXIT_OK
        question = "Forget all of this for good? [y/N] "

        async def act() -> Any:
            return await control.forget_match(args.match, args.resource)

    refused = _confirm(args, question)
    if refused is not None:
        return refused
    done = await act()
    if args.json:
        print_json(done.model_dump(exclude={"items"}))
    else:
        print(_summary(done))
    return _pending() if done.erase_pending else EXIT_OK


def _show(preview: Any, args: argparse.Namespace) -> None:
    """What would go: the dry run's output (JSON with --json), else on stderr before the question."""
    if args.dry_run and args.json:
        from om_mcp.commands._output import print_json

        print_json(preview.model_dump())
        return
    out = sys.stdout if args.dry_run else sys.stderr
    for item in preview.items:
        where = f"{item['thread_id']} {item['message_id']} ({item['role']})" if "message_id" in item else item["id"]
        out.write(f"  {where}: {item['text']}\n")
    if preview.more:
        out.write("  ... and more messages (they go too)\n")
    out.write(f"would forget {_counts(preview)}\n")


def _counts(result: Any) -> str:
    from om_mcp.commands._view import count

    parts = [count(result.messages, "message")]
    parts.append(count(result.lines, "observation line"))
    if result.earlier_lines:
        copies = "copy" if result.earlier_lines == 1 else "copies"
        parts.append(f"{result.earlier_lines:,} {copies} in earlier generations or buffered work")
    if result.groups:
        parts.append(f"{count(result.groups, 'group')} left empty")
    if result.derived:
        parts.append(f"{count(result.derived, 'derived value')} (titles, metadata, tasks, events, working memory)")
    return ", ".join(parts)


def _summary(done: Any) -> str:
    where = "the memory" if done.erase_pending else "the database file"
    return f"forgot {_counts(done)}; the text is erased from {where}"


def _confirm(args: argparse.Namespace, question: str) -> int | None:
    """None to go on; else the exit code (not on a terminal without --yes, or the user said no)."""
    if args.yes:
        return None
    answer = _ask(question)
    if answer is None:
        return fail("not on a terminal: add --yes to forget without asking", EXIT_CONFIG)
    if answer.strip().lower() not in ("y", "yes"):
        print("nothing forgotten", file=sys.stderr)
        return EXIT_FAILED
    return None


def _ask(question: str) -> str | None:
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        return None
    sys.stderr.write(question)
    sys.stderr.flush()
    return sys.stdin.readline()
