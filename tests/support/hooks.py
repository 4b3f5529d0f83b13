"""Running the host hook as Claude Code does, against a throwaway project, home and database;
and scripted Observers (HTTP server, `claude` CLI) that note each "Decision: ..." they are shown."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

from om_mcp.engine.recorder import Recorded, Recorder, RecorderSettings
from om_mcp.engine.tokens import TokenCounter
from om_mcp.hook.run import record_event
from om_mcp.hosts import adapter_for
from om_mcp.hosts.common import Project
from om_mcp.hosts.events import HookEvent
from om_mcp.store.sessions import WORKER_LEASE
from om_mcp.testing.fake_server import request_text
from support.processes import PYTHON, clean_env
from support.timeouts import scaled

DECISION = re.compile(r"Decision: ([^.\n\"\\]+)")
SESSION_ID = "cc9270be-2e3e-4e60-aa7f-4af09db5ee17"


def hook_ingest(
    conn: sqlite3.Connection,
    settings: RecorderSettings,
    counter: TokenCounter,
    event: HookEvent,
    resource_id: str,
    root: str,
    **options: bool | int,
) -> Recorded:
    """What `om-mcp hook` records for `event`, in the project `root`, in this process (no worker started)."""
    recorder = Recorder(conn, settings, counter, worker_idle_exit=None)
    host = adapter_for(event.host)
    return record_event(recorder, host, event, Project(Path(root), resource_id, True), **options)  # type: ignore[arg-type]


def source_of(event: HookEvent) -> str:
    """Where the hook keeps how far it read the event's session."""
    return f"{event.host}:{event.session_id}"


class Box:
    """A project folder, a home, a database, and the hook run against them."""

    def __init__(self, tmp_path: Path, **env: str):
        self.tmp = tmp_path
        self.project = tmp_path / "project"
        (self.project / ".git").mkdir(parents=True)
        (self.project / "src").mkdir()
        self.db = tmp_path / "memory.db"
        # A model without its key unless a test names one: a worker a hook starts can never reach a real
        # model (this machine may have a logged-in `claude` on PATH, which "auto" would use).
        env.setdefault("OM_MODEL", "openai/gpt-4o-mini")
        self.env = clean_env(tmp_path, OM_DB_PATH=str(self.db), XDG_CACHE_HOME=str(tmp_path / "cache"), **env)
        self.log = Path(self.env["XDG_DATA_HOME"]) / "om-mcp" / "hook.log"
        self.worker_log = self.log.with_name("worker.log")

    def hook(self, event: dict | str, *args: str, host: str = "claude-code") -> subprocess.CompletedProcess:
        data = event if isinstance(event, str) else json.dumps(event)
        return subprocess.run(
            [PYTHON, "-m", "om_mcp", "hook", host, *args],
            input=data.encode(),
            capture_output=True,
            env=self.env,
            timeout=scaled(60),
        )

    def event(self, name: str, transcript: Path | None, session: str = SESSION_ID, **extra: str) -> dict:
        return {
            "session_id": session,
            "transcript_path": str(transcript) if transcript else None,
            "cwd": str(self.project / "src"),
            "hook_event_name": name,
            **extra,
        }

    def query(self, sql: str, *params: object) -> list[tuple]:
        conn = sqlite3.connect(self.db)
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()

    def log_lines(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []

    def wait_for_worker(self, timeout: float = 120.0) -> None:
        """Until the worker the hook started has released the lease and exited."""
        deadline = time.monotonic() + scaled(timeout)
        while time.monotonic() < deadline:
            if not self.query("SELECT owner FROM om_leases WHERE key = ? AND op = ?", *WORKER_LEASE):
                pid = self.worker_pid()
                if pid is None or not _alive(pid):
                    return
            time.sleep(0.2)
        pid = self.worker_pid()
        if pid is not None and _alive(pid):
            os.kill(pid, signal.SIGTERM)  # the worker this test started, by its id
        raise AssertionError(
            "the worker did not finish:\n"
            + (self.worker_log.read_text() if self.worker_log.exists() else "(no worker log)")
        )

    def wait_for_worker_log(self, text: str, timeout: float = 120.0) -> str:
        deadline = time.monotonic() + scaled(timeout)
        while time.monotonic() < deadline:
            log = self.worker_log.read_text() if self.worker_log.exists() else ""
            if text in log:
                return log
            time.sleep(0.2)
        raise AssertionError(f"{text!r} never appeared in the worker log")

    def worker_pid(self) -> int | None:
        if not self.worker_log.exists():
            return None
        found = re.findall(r"om-mcp worker (\d+): started", self.worker_log.read_text())
        return int(found[-1]) if found else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by init) counts as gone.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return True


def decisions_observer(request: dict) -> str:
    """An Observer that writes down each "Decision: ..." of the conversation it is shown."""
    text = request_text(request)
    if "<conversation>" not in text:
        return "<observations>\nDate: Mar 2, 2026\n* 🟡 (09:00) reflected\n</observations>"
    conversation = text.split("<conversation>", 1)[1]
    lines = [
        f"* 🔴 (09:{n:02d}) User decided: {d.strip()}"
        for n, d in enumerate(dict.fromkeys(DECISION.findall(conversation)))
    ] or ["* 🟡 (09:00) small talk"]
    return (
        "<observations>\nDate: Mar 2, 2026\n" + "\n".join(lines) + "\n</observations>\n"
        "<current-task>wire the hook into CI</current-task>"
    )


FAKE_CLAUDE = """#!{python}
import json, re, sys
if sys.argv[1:3] == ["auth", "status"]:  # as Claude Code 2.1.197 answers when logged in
    print(json.dumps({{"loggedIn": True, "authMethod": "claude.ai", "apiProvider": "firstParty"}}))
    sys.exit(0)
prompt = sys.stdin.read()
decisions = list(dict.fromkeys(re.findall(r"Decision: ([^.\\n\\"\\\\]+)", prompt.split("<conversation>", 1)[-1])))
lines = [f"* 🔴 (09:{{n:02d}}) User decided: {{d.strip()}}" for n, d in enumerate(decisions)] or ["* 🟡 (09:00) ok"]
text = ("<observations>\\nDate: Mar 2, 2026\\n" + "\\n".join(lines) + "\\n</observations>\\n"
        "<current-task>wire the hook into CI</current-task>")
print(json.dumps({{"type": "result", "subtype": "success", "is_error": False, "result": text,
                  "usage": {{"input_tokens": 100, "output_tokens": 20}}, "total_cost_usd": 0}}))
"""
