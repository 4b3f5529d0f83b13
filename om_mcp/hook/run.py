"""One hook call, end to end, failing open.

    read the event (the host's adapter, `hosts/`) -> what to do (its plan) ->
    open the recorder (`engine/recorder/`: settings, the file) -> record what is new
    (and start a worker if work is due and nobody drains) -> print the context (SessionStart)

Whatever goes wrong (bad JSON, a locked or damaged database, a missing
transcript, a bad configuration) the agent sees nothing and the session goes
on: one line goes to the hook log (`$XDG_DATA_HOME/om-mcp/hook.log`, capped at
1 MB, one old copy kept) and the exit code is 0.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from om_mcp.hosts import read_event
from om_mcp.hosts.common import HookInputError, Project, find_project, hooks_disabled
from om_mcp.trim import trim_rule

if TYPE_CHECKING:
    from om_mcp.engine.recorder import Recorded, Recorder
    from om_mcp.hosts.adapter import Host
    from om_mcp.hosts.events import HookEvent
    from om_mcp.reading import Position

LOG_MAX_BYTES = 1_000_000
DEFAULT_MAX_CHARS = 8000


@dataclass(frozen=True)
class HookOptions:
    host: str
    db: str | None = None
    config: str | None = None
    max_chars: int = DEFAULT_MAX_CHARS
    tool_output_chars: int = 2000  # a longer tool output keeps its start and end (hosts.common.trim_rule)
    worker: bool = True  # start a worker when work is due and nobody drains
    worker_idle_exit: float = 60.0


def run_hook(options: HookOptions, stdin: bytes, env: Mapping[str, str] | None = None) -> str:
    """What to print on stdout ("" for nothing). Never raises an Exception."""
    env = os.environ if env is None else env
    if hooks_disabled(env):
        return ""
    started = time.perf_counter()
    event: HookEvent | None = None
    try:
        host, event = read_event(options.host, stdin)
        return _handle(options, host, event, env)
    except Exception as error:  # noqa: BLE001 - fail open: one line in the log, nothing for the agent
        log_line(env, options.host, event, f"{type(error).__name__}: {_one_line(error)}", started)
        return ""


def _handle(options: HookOptions, host: Host, event: HookEvent, env: Mapping[str, str]) -> str:
    todo = host.plan(event.name)
    if not (todo.ingest or todo.print_context):
        return ""
    if not event.cwd:
        raise HookInputError("hook input: cwd is missing, so the project is unknown")
    # Imported here, and only what the event needs: every millisecond counts on each prompt.
    from om_mcp.engine.recorder import Recorder

    worker = options.worker_idle_exit if options.worker else None
    with Recorder.open(options.db, options.config, env, worker_idle_exit=worker) as recorder:
        done = record_event(
            recorder,
            host,
            event,
            find_project(event.cwd),
            final=todo.final,
            tool_output_chars=options.tool_output_chars,
            ingest=todo.ingest,
        )
        for problem in done.problems:
            log_line(env, options.host, event, problem)
        if not todo.print_context:
            return ""
        return host.context_output(recorder.context(event.session_id, done.resource_id, options.max_chars))


def record_event(
    recorder: Recorder,
    host: Host,
    event: HookEvent,
    project: Project,
    *,
    final: bool = True,
    tool_output_chars: int = 2000,
    ingest: bool = True,
) -> Recorded:
    """Record what is new in the event's session (the thread = the session id, in the project's resource):
    the host's reader from where the last hook of the session stopped (kept as "<host>:<session id>")."""
    from om_mcp.engine.recorder import Session
    from om_mcp.reading import Reading

    def read(saved: Position) -> Reading:
        if not ingest:
            return Reading([], saved)
        return host.read_hook(event, saved, final=final, trim=trim_rule(tool_output_chars))

    session = Session(
        event.session_id,
        project.resource_id,
        {"host": event.host, "project": str(project.root)},
        source=f"{event.host}:{event.session_id}",
    )
    return recorder.record(session, read, ends_session=event.ends_session, starting=event.name == "SessionStart")


def log_line(
    env: Mapping[str, str], host: str, event: HookEvent | None, message: str, started: float | None = None
) -> None:
    """Append one line to the hook log; a log that cannot be written is given up on silently."""
    from om_mcp.paths import data_dir

    try:
        path = data_dir(env) / "hook.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        _rotate(path)
        took = f" ({(time.perf_counter() - started) * 1000:.0f} ms)" if started is not None else ""
        what = f"{event.name} {event.session_id}" if event else "-"
        with path.open("a", encoding="utf-8") as handle:
            handle.write(f"{datetime.now(UTC).isoformat(timespec='seconds')} {host} {what}: {message}{took}\n")
    except OSError:
        pass


def _rotate(path: Path) -> None:
    try:
        if path.stat().st_size > LOG_MAX_BYTES:
            os.replace(path, path.with_name(path.name + ".1"))
    except FileNotFoundError:
        pass


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split())[:500] or type(error).__name__
