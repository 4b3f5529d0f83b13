"""One hook call, end to end, failing open.

    read the event -> what to do (plan) -> settings -> open the database ->
    catch up on the transcript -> print the context (SessionStart) ->
    start a worker if work is due and nobody drains

Whatever goes wrong (bad JSON, a locked or damaged database, a missing
transcript, a bad configuration) the agent sees nothing and the session goes
on: one line goes to the hook log (`$XDG_DATA_HOME/om-mcp/hook.log`, capped at
1 MB, one old copy kept) and the exit code is 0.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from om_mcp.hosts.common import HookInputError, find_project, hooks_disabled
from om_mcp.hosts.context import session_start_output
from om_mcp.hosts.events import HookEvent, plan, read_event

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
        event = read_event(options.host, stdin)
        return _handle(options, event, env)
    except Exception as error:  # noqa: BLE001 - fail open: one line in the log, nothing for the agent
        log_line(env, options.host, event, f"{type(error).__name__}: {_one_line(error)}", started)
        return ""


def _handle(options: HookOptions, event: HookEvent, env: Mapping[str, str]) -> str:
    todo = plan(options.host, event.name)
    if not (todo.ingest or todo.print_context):
        return ""
    if not event.cwd:
        raise HookInputError("hook input: cwd is missing, so the project is unknown")
    # Imported here, and only what the event needs: every millisecond counts on each prompt.
    from om_mcp.hook.settings import load_settings
    from om_mcp.paths import data_dir
    from om_mcp.store import Transaction, local, record_key

    settings = load_settings(options.db, options.config, env)
    project = find_project(event.cwd)
    conn = local.direct.open_database(settings.db_path)
    try:
        state, resource = None, project.resource_id
        if todo.ingest:
            if event.transcript_path and not os.path.exists(event.transcript_path) and _read_before(conn, event):
                # A transcript read before that is gone; one never written yet (a session with no turn,
                # such as the one `claude mcp list` starts and ends) is not worth a line.
                log_line(env, options.host, event, f"transcript not found: {event.transcript_path}")
            from om_mcp.engine.tokens import TokenCounter
            from om_mcp.hook.ingest import ingest

            done = ingest(
                conn,
                settings,
                TokenCounter.estimating(),
                event,
                project.resource_id,
                str(project.root),
                final=todo.final,
                tool_output_chars=options.tool_output_chars,
            )
            state, resource = done.state, done.resource_id
            for problem in done.problems:
                log_line(env, options.host, event, problem)
        else:
            thread = local.read(conn, Transaction.get_thread, event.session_id)
            resource = thread.resource_id if thread else resource
        output = ""
        if todo.print_context:
            from om_mcp.hook.context import session_context

            output = _output(event, session_context(conn, settings, event.session_id, resource, options.max_chars))
        if options.worker:
            from om_mcp.hook.background import start_worker_if_due

            try:
                start_worker_if_due(
                    conn,
                    settings,
                    event,
                    record_key(settings.scope, event.session_id, resource),  # type: ignore[arg-type]
                    state,
                    config_file=options.config or env.get("OM_MCP_CONFIG"),
                    idle_exit=options.worker_idle_exit,
                    log_file=data_dir(env) / "worker.log",
                )
            except (OSError, sqlite3.Error) as error:  # the context still goes out
                log_line(env, options.host, event, f"worker not started: {type(error).__name__}: {_one_line(error)}")
        return output
    finally:
        conn.close()


def _read_before(conn: sqlite3.Connection, event: HookEvent) -> bool:
    from om_mcp.hook.ingest import source_of
    from om_mcp.store import Transaction, local

    saved = local.read(conn, Transaction.ingest_state, source_of(event))
    return bool(saved.offset or saved.last_id)


def _output(event: HookEvent, context: str) -> str:
    """SessionStart's stdout in the host's shape (Cursor: `additional_context`; the others: Claude Code's)."""
    if event.host == "cursor":
        from om_mcp.hosts.cursor import session_start_output as cursor_output

        return cursor_output(context)
    return session_start_output(context)


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
