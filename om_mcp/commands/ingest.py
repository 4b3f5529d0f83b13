"""`om-mcp ingest FILE`: add a transcript to memory, idempotently.

Formats: `claude-code` (a session's .jsonl under ~/.claude/projects), `gemini-cli`
(a session-*.jsonl under ~/.gemini/tmp/<project>/chats) and `openai-messages`
(one {"role", "content", ...} object per line); detected from the file when
--format is not given. Messages keep their ids (transcript uuids; derived from
the line for openai-messages), so running it twice stores nothing twice, and a
session the hooks recorded already is recognised message by message.

Defaults: the thread is the session id (claude-code, gemini-cli) or the file's
name; the resource is the project of the session's working directory
(claude-code), of the current directory (gemini-cli), or `default_resource_id`
(openai-messages). The rows are built as the hook builds them, counted with the
real tokenizer. Observation follows in the background: a running server picks
the work up, or this command starts a worker as the hooks do (--no-worker: not).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from om_mcp.commands.common import EXIT_DATABASE, add_config_arguments, load

FORMATS = ("claude-code", "gemini-cli", "openai-messages")
BATCH = 500
EXIT_INPUT = 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="the transcript file")
    parser.add_argument("--format", choices=FORMATS, help="the file's format (default: detected)")
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
        fmt = args.format or detect(path)
        messages, thread_id, resource_id = read(path, fmt, args.tool_output_chars)
    except (OSError, ValueError) as error:
        print(f"om-mcp: {path}: {error}", file=sys.stderr)
        return EXIT_INPUT
    thread_id = args.thread or thread_id
    resource_id = args.resource or resource_id or config.default_resource_id
    from om_mcp.privacy import HookFailed
    from om_mcp.store.errors import DatabaseRefused, StoreError

    paused = None if args.no_worker else _why_not_observed(config)
    try:
        summary = store(
            config,
            fmt,
            messages,
            thread_id,
            resource_id,
            start_worker=not args.no_worker and paused is None,
            config_file=args.config,
        )
    except DatabaseRefused as error:
        print(f"om-mcp: {error}", file=sys.stderr)
        return EXIT_DATABASE
    except (StoreError, HookFailed) as error:
        print(f"om-mcp: {error}", file=sys.stderr)
        return EXIT_INPUT
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
    """The format of a transcript file, from its first lines."""
    with path.open(encoding="utf-8", errors="replace") as handle:
        for _, line in zip(range(20), handle):
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if not isinstance(entry, dict):
                continue
            if "projectHash" in entry or "$set" in entry or "$rewindTo" in entry:
                return "gemini-cli"
            if "uuid" in entry or "sessionId" in entry:
                return "claude-code"
            if "role" in entry:
                return "openai-messages"
    raise ValueError("format not recognised: give --format " + "|".join(FORMATS))


def read(path: Path, fmt: str, tool_output_chars: int = 2000) -> tuple[list[dict[str, Any]], str, str | None]:
    """(messages, default thread id, default resource id or None) of a file."""
    from om_mcp.hosts.common import find_project
    from om_mcp.trim import trim_rule

    trim = trim_rule(tool_output_chars)
    if not path.is_file():
        raise ValueError("no such file")
    if fmt == "claude-code":
        from om_mcp.hosts.claude_code import ConvertOptions, TranscriptState, read_transcript, to_messages

        messages: list[dict[str, Any]] = []
        state = TranscriptState()
        while True:  # one read is bounded: a long transcript takes several
            result = read_transcript(path, state)
            messages += to_messages(result.entries, options=ConvertOptions(trim=trim), known_tools=state.pending_tools)
            state = result.state
            if not result.more:
                break
        session, cwd = _first_fields(path, "sessionId", "cwd")
        return messages, session or path.stem, find_project(cwd).resource_id if cwd else None
    if fmt == "gemini-cli":
        from om_mcp.hosts.gemini_cli import GeminiOptions
        from om_mcp.hosts.gemini_cli import read_messages as read_gemini

        messages, _ = read_gemini(path, final=True, options=GeminiOptions(trim=trim))
        session, _ = _first_fields(path, "sessionId", "-")
        return messages, session or path.stem, find_project(os.getcwd()).resource_id
    from om_mcp.importers.openai_messages import read_openai_messages

    return read_openai_messages(path), path.stem, None


def store(
    config: Any,
    fmt: str,
    messages: list[dict[str, Any]],
    thread_id: str,
    resource_id: str,
    *,
    start_worker: bool,
    config_file: str | None,
) -> dict[str, Any]:
    """Record in batches (a progress bar on a terminal) through the recorder, as a hook does; a
    message it cannot take is counted and the rest go on; then the session is marked over and a
    worker started if work is due."""
    from om_mcp.commands._output import progress
    from om_mcp.engine.recorder import Recorder, Session, settings_of
    from om_mcp.engine.tokens import get_token_counter
    from om_mcp.reading import Position, Reading

    summary: dict[str, Any] = {
        "thread_id": thread_id,
        "resource_id": resource_id,
        "appended": 0,
        "skipped": 0,
        "refused": 0,  # an id stored with other content: the stored message is kept
        "forgotten": 0,  # refused: they were forgotten (docs/forget.md)
        "worker": None,
    }
    session = Session(thread_id, resource_id, {"host": fmt, "source": "om-mcp ingest"})
    recorder = Recorder.open(
        settings=settings_of(config),
        config_file=config_file,
        counter=get_token_counter(),
        worker_idle_exit=60.0 if start_worker else None,
    )
    with recorder, progress(len(messages), f"ingesting {thread_id}") as advance:
        for start in range(0, len(messages), BATCH):
            part = messages[start : start + BATCH]
            done = recorder.record(session, lambda _: Reading(part, Position()), start_worker=False)  # noqa: B023
            _count(summary, done)
            advance(len(part))
        # A worker started under a reached spend cap would observe nothing: the summary says why instead.
        capped = recorder.spend_paused(config.observational_memory.budget) if start_worker else None
        done = recorder.record(
            session, lambda _: Reading([], Position()), ends_session=True, start_worker=bool(messages) and not capped
        )
        summary["resource_id"], summary["worker"] = done.resource_id, done.worker
        if capped:
            summary["not_observed"] = capped
    return summary


def _count(summary: dict[str, Any], done: Any) -> None:
    summary["resource_id"] = done.resource_id  # a stored thread keeps its resource
    for name in ("appended", "skipped", "refused", "forgotten"):
        summary[name] += getattr(done, name)


def _first_fields(path: Path, *names: str) -> tuple[str | None, ...]:
    """The first string value of each field among the file's first lines."""
    found: dict[str, str] = {}
    with path.open(encoding="utf-8", errors="replace") as handle:
        for _, line in zip(range(200), handle):
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict):
                for name in names:
                    if name not in found and isinstance(entry.get(name), str) and entry[name]:
                        found[name] = entry[name]
            if len(found) == len(names):
                break
    return tuple(found.get(n) for n in names)
