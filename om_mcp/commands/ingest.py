"""`om-mcp ingest FILE`: add a transcript to memory, idempotently.

Formats: each host whose transcript is a file of its own (`claude-code`: a session's .jsonl under
~/.claude/projects; `gemini-cli`: a session-*.jsonl under ~/.gemini/tmp/<project>/chats; the host
adapters in `hosts/` that recognise a file), and `openai-messages` (one {"role", "content", ...}
object per line); detected from the file when --format is not given. Messages keep their ids
(transcript uuids; derived from the line for openai-messages), so running it twice stores nothing
twice, and a session the hooks recorded already is recognised message by message.

Defaults: the thread is the session id the file names, else the file's name; the resource is the
project of the session's working directory (claude-code), of the current directory (gemini-cli),
or `default_resource_id`. The file is read a bounded piece at a time (`READ_BYTES`, in batches of
`BATCH` messages), so memory stays flat however long it is; the rows are built as the hook builds
them (the engine's recorder), counted with the real tokenizer. A line that is not JSON, or not a
message, and a message whose id is stored with other content are counted in the summary and
skipped: the rest of the file goes on. Observation follows in the background: a running server
picks the work up, or this command starts a worker as the hooks do (--no-worker: not).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from om_mcp.commands.common import EXIT_DATABASE, add_config_arguments, load

if TYPE_CHECKING:
    from om_mcp.engine.recorder import Recorded
    from om_mcp.hosts.adapter import Host

OPENAI_MESSAGES = "openai-messages"
BATCH = 500
READ_BYTES = 4 * 1024 * 1024  # of the file a read takes (a reader takes at least one whole line)
EXIT_INPUT = 1
COUNTED = ("appended", "skipped", "refused", "forgotten", "unreadable")


def formats() -> list[str]:
    """The hosts whose transcript files ingest reads (their adapters recognise one), and openai-messages."""
    from om_mcp.hosts import ADAPTERS, adapter_for

    return [name for name in ADAPTERS if _reads_files(adapter_for(name))] + [OPENAI_MESSAGES]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="the transcript file")
    parser.add_argument("--format", choices=formats(), help="the file's format (default: detected)")
    parser.add_argument("--thread", help="thread id (default: the session id, else the file name)")
    parser.add_argument("--resource", help="resource id (default: the session's project, else default_resource_id)")
    parser.add_argument(
        "--tool-output-chars",
        type=int,
        default=2000,
        help="a longer tool output is stored as its first 3/4 and last 1/4 of this many characters (default 2000)",
    )
    parser.add_argument("--no-worker", action="store_true", help="do not start a background worker to observe it")
    add_config_arguments(parser, json_flag=True)


def run(args: argparse.Namespace) -> int:
    config = load(args)
    if config is None:
        return 2
    if config.db_url is not None:
        print("om-mcp: ingest writes a SQLite file only (as the hooks do); give --db PATH", file=sys.stderr)
        return 2
    path = Path(args.file).expanduser()
    try:
        if not path.is_file():
            raise ValueError("no such file")
        fmt = args.format or detect(path)
        thread_id, resource_id = names(path, fmt)
    except (OSError, ValueError) as error:
        print(f"om-mcp: {path}: {error}", file=sys.stderr)
        return EXIT_INPUT
    thread_id = args.thread or thread_id
    resource_id = args.resource or resource_id or config.default_resource_id
    from om_mcp.privacy import HookFailed
    from om_mcp.store.errors import DatabaseRefused, StoreError

    paused = None if args.no_worker else _why_not_observed(config)
    problems: list[str] = []
    try:
        summary = store(
            config,
            fmt,
            read(path, fmt, args.tool_output_chars, problems),
            thread_id,
            resource_id,
            start_worker=not args.no_worker and paused is None,
            config_file=args.config,
        )
    except DatabaseRefused as error:
        print(f"om-mcp: {error}", file=sys.stderr)
        return EXIT_DATABASE
    except (StoreError, HookFailed, OSError) as error:
        print(f"om-mcp: {error}", file=sys.stderr)
        return EXIT_INPUT
    for problem in problems:
        print(f"om-mcp: {path}: {problem}; skipped", file=sys.stderr)
    if paused:
        summary["not_observed"] = paused
    paused = summary.get("not_observed")
    if args.json:
        from om_mcp.commands._output import print_json

        print_json(summary)
    else:
        print(
            f"{summary['appended']} new message(s), {summary['skipped']} already stored"
            + (f", {summary['refused']} kept as stored (changed since)" if summary["refused"] else "")
            + (f", {summary['forgotten']} refused (forgotten)" if summary["forgotten"] else "")
            + (f", {summary['unreadable']} unreadable line(s) skipped" if summary["unreadable"] else "")
            + f", in thread {summary['thread_id']} of resource {summary['resource_id']}"
            + (f"; observing in the background ({summary['worker']})" if summary["worker"] else "")
            + (f"; not observed now: {paused}" if paused and summary["appended"] else "")
        )
    return 0


def _why_not_observed(config: Any) -> str | None:
    """Why no background worker could observe now (no model ready, observation off), or None."""
    if not config.observational_memory.enabled:
        return "observation is off (observational_memory.enabled = false)"
    from om_mcp.engine.observation.engine import resolve_choice

    _, ready = resolve_choice(config.observational_memory, "observation")
    return None if ready.ready else ready.reason


def detect(path: Path) -> str:
    """The format of a transcript file, from its first lines: the host whose adapter recognises one."""
    from om_mcp.hosts import ADAPTERS, adapter_for

    hosts = [adapter_for(name) for name in ADAPTERS]
    with path.open(encoding="utf-8", errors="replace") as handle:
        for _, line in zip(range(20), handle):
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if not isinstance(entry, dict):
                continue
            for host in hosts:
                if host.recognises(entry):
                    return host.name
            if "role" in entry:
                return OPENAI_MESSAGES
    raise ValueError("format not recognised: give --format " + "|".join(formats()))


def names(path: Path, fmt: str) -> tuple[str, str | None]:
    """(default thread id, default resource id or None) of a file: the session and project it names."""
    if fmt == OPENAI_MESSAGES:
        return path.stem, None
    from om_mcp.hosts import adapter_for
    from om_mcp.hosts.common import find_project

    session, cwd = adapter_for(fmt).session_of(str(path))
    return session or path.stem, find_project(cwd).resource_id if cwd else None


def read(path: Path, fmt: str, tool_output_chars: int, problems: list[str]) -> Iterator[tuple[list, int]]:
    """The file's messages, a batch at a time, each with the lines skipped since the last one."""
    if fmt == OPENAI_MESSAGES:
        from om_mcp.importers.openai_messages import stream_openai_messages

        batch: list[dict[str, Any]] = []
        seen = 0
        for message in stream_openai_messages(path, problems):
            batch.append(message)
            if len(batch) == BATCH:
                yield batch, len(problems) - seen
                batch, seen = [], len(problems)
        yield batch, len(problems) - seen
        return
    from om_mcp.hosts import adapter_for
    from om_mcp.hosts.adapter import Source
    from om_mcp.reading import Position
    from om_mcp.trim import trim_rule

    host, position, trim = adapter_for(fmt), Position(), trim_rule(tool_output_chars)
    while True:
        reading = host.read(Source(str(path), max_bytes=READ_BYTES), position, final=True, trim=trim)
        problems += [p for p in reading.problems if "the rest comes next time" not in p]
        for start in range(0, max(len(reading.messages), 1), BATCH):
            yield reading.messages[start : start + BATCH], reading.unreadable if start == 0 else 0
        if not reading.more or reading.position == position:
            return
        position = reading.position


def store(
    config: Any,
    fmt: str,
    batches: Iterator[tuple[list, int]],
    thread_id: str,
    resource_id: str,
    *,
    start_worker: bool,
    config_file: str | None,
) -> dict[str, Any]:
    """Record each batch through the engine's recorder, as a hook does (a progress count on a terminal);
    a message it cannot take is counted and the rest go on; then the session is marked over and a
    worker started if work is due."""
    from om_mcp.commands._output import progress
    from om_mcp.engine.recorder import Recorder, Session, settings_of
    from om_mcp.engine.tokens import get_token_counter
    from om_mcp.reading import Position, Reading

    summary: dict[str, Any] = {
        "thread_id": thread_id,
        "resource_id": resource_id,
        **dict.fromkeys(COUNTED, 0),  # refused: an id stored with other content (the stored one kept);
        "worker": None,  # forgotten: refused as forgotten (docs/forget.md); unreadable: lines skipped
    }
    session = Session(thread_id, resource_id, {"host": fmt, "source": "om-mcp ingest"})
    recorder = Recorder.open(
        settings=settings_of(config),
        config_file=config_file,
        counter=get_token_counter(),
        worker_idle_exit=60.0 if start_worker else None,
    )
    any_read = False
    with recorder, progress(None, f"ingesting {thread_id}") as advance:
        for batch, unreadable in batches:
            summary["unreadable"] += unreadable
            if not batch:
                continue
            any_read = True
            _count(summary, recorder.record(session, lambda _: Reading(batch, Position()), start_worker=False))  # noqa: B023
            advance(len(batch))
        # A worker started under a reached spend cap would observe nothing: the summary says why instead.
        capped = recorder.spend_paused(config.observational_memory.budget) if start_worker else None
        if any_read:  # the session is over: its tail is due for observation
            done = recorder.record(
                session, lambda _: Reading([], Position()), ends_session=True, start_worker=not capped
            )
            summary["resource_id"], summary["worker"] = done.resource_id, done.worker
        if capped:
            summary["not_observed"] = capped
    return summary


def _count(summary: dict[str, Any], done: Recorded) -> None:
    summary["resource_id"] = done.resource_id  # a stored thread keeps its resource
    for name in ("appended", "skipped", "refused", "forgotten"):
        summary[name] += getattr(done, name)


def _reads_files(host: Host) -> bool:
    """Does the adapter recognise a transcript file of its own (`Host.recognises` overridden)?"""
    from om_mcp.hosts.adapter import Host

    return type(host).recognises is not Host.recognises
