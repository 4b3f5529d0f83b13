"""Handing observation to the background: the recorder never calls a model.

A live om-mcp process (a server's poll loop, or `om-mcp worker`) holds the
store's "worker"/"drain" lease while it drains work appended by others. After
each record the recorder looks at the session's record (one read it already has);
when work is due and nobody holds the lease, it takes the lease on behalf of a
worker it starts detached (new session, stdio on /dev/null, never waited for):
`om-mcp worker --idle-exit 60 --lease-owner <id>`. Taking the lease in the same
transaction that checks it means two hooks never start two workers.

At a session's end its unobserved tail must still be observed, and a live
server may be shutting down with the host; so a worker is started even when
the lease is held: it drains alongside (cycles are single-flight across
processes) and exits once idle.
"""

from __future__ import annotations

import os
import sqlite3
import sys
from pathlib import Path

from om_mcp.engine.observation.thresholds import background_work_due
from om_mcp.engine.recorder.settings import RecorderSettings
from om_mcp.store import WORKER_LEASE, RecordState, Transaction, local, quiet_before

# How long the recorder holds the lease for the worker it starts, until the worker renews it.
SPAWN_LEASE_SECONDS = 30.0


def work_due(
    conn: sqlite3.Connection,
    settings: RecorderSettings,
    key: str,
    thread_id: str,
    state: RecordState | None,
    *,
    ends_session: bool,
    starting: bool,
) -> bool:
    """Is there background work for this record: by the engine's rule, or a session's tail?"""
    if not settings.observation:
        return False
    if state is None:
        state = local.read(conn, Transaction.record_state, key, thread_id)
    if background_work_due(settings.limits, state):
        return True
    if ends_session and state.thread_pending_messages:
        return True  # the session's tail
    if starting:  # an earlier session left a tail
        return bool(local.read(conn, Transaction.settled_threads, quiet_before(), key, limit=1))
    return False


def start_worker_if_due(
    conn: sqlite3.Connection,
    settings: RecorderSettings,
    key: str,
    thread_id: str,
    state: RecordState | None,
    *,
    ends_session: bool,
    starting: bool,
    config_file: str | None,
    idle_exit: float,
    log_file: Path,
) -> str | None:
    """'started' (holding the lease for it), 'alongside' (a session's end, lease held elsewhere) or None."""
    if not work_due(conn, settings, key, thread_id, state, ends_session=ends_session, starting=starting):
        return None
    owner = f"hook:{_host_name()}:{os.getpid()}:{os.urandom(4).hex()}"
    key_, op = WORKER_LEASE
    if local.write(conn, Transaction.acquire_lease, key_, op, owner, SPAWN_LEASE_SECONDS):
        spawn_worker(settings, owner, config_file, idle_exit, log_file)
        return "started"
    if ends_session:
        spawn_worker(settings, None, config_file, idle_exit, log_file)
        return "alongside"
    return None


def spawn_worker(
    settings: RecorderSettings, owner: str | None, config_file: str | None, idle_exit: float, log_file: Path
) -> None:
    """Start `om-mcp worker` detached from this process and from the host's pipes."""
    import subprocess  # only when a worker starts

    args = [
        sys.executable,
        "-m",
        "om_mcp",
        "worker",
        "--db",
        settings.db_path,
        "--idle-exit",
        f"{idle_exit:g}",
        "--log-file",
        str(log_file),
    ]
    if config_file:
        args += ["--config", config_file]
    if owner:
        args += ["--lease-owner", owner]
    options: dict = {
        "stdin": subprocess.DEVNULL,
        "stdout": subprocess.DEVNULL,
        "stderr": subprocess.DEVNULL,
        "close_fds": True,
    }
    if sys.platform == "win32":  # os.name == "nt", spelled so type checkers know the platform
        options["creationflags"] = subprocess.DETACHED_PROCESS | subprocess.CREATE_NEW_PROCESS_GROUP
    else:
        options["start_new_session"] = True  # the host's Ctrl-C and hangup do not reach it
    subprocess.Popen(args, **options)  # never waited for: it outlives this hook


def _host_name() -> str:
    # os.uname, not socket.gethostname: importing socket costs the hook a few milliseconds.
    return os.uname().nodename if hasattr(os, "uname") else os.environ.get("COMPUTERNAME", "host")
