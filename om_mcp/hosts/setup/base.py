"""What a host's setup module provides, and where it runs."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from om_mcp.hosts.setup.files import Change
from om_mcp.paths import xdg_home

HOOK_CHECK_SESSION = "om-mcp-setup-check"


@dataclass(frozen=True)
class Place:
    """Where setup writes: the user's home (and environment), or one project's root with --project."""

    home: Path
    project: Path | None = None
    platform: str = sys.platform
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    which: Callable[[str], str | None] = shutil.which

    def app_data(self, app: str) -> Path:
        """A desktop app's per-user folder: macOS Application Support, Windows %APPDATA%, else XDG config."""
        if self.platform == "darwin":
            return self.home / "Library" / "Application Support" / app
        if self.platform == "win32":
            return Path(self.env.get("APPDATA") or self.home / "AppData" / "Roaming") / app
        return xdg_home("CONFIG", self.env, self.home) / app


@dataclass(frozen=True)
class HostSetup:
    """One host's setup knowledge; what a host needs beyond its files is an optional step here, which
    `om-mcp setup` (and `doctor`) runs for whichever host has it."""

    name: str  # `om-mcp setup NAME`
    title: str
    changes: Callable[[Place, list[str], bool], list[Change]]  # (where, the om-mcp command, uninstall)
    detect: Callable[[Place], str | None]  # why we think it is installed here, or None
    hook_event: Callable[[str], dict[str, Any]] | None = None  # a SessionStart payload for cwd; None: no hooks
    has_project: bool = True
    notes: tuple[str, ...] = ()  # said after a successful setup
    # After the files are written: a step the host needs (Codex: trust the hooks), and its line as a dry run
    # says it. The step answers (done: True, left to the user: None, failed: False; the line to print).
    after_write: Callable[[Place, list[str]], tuple[bool | None, str]] | None = None
    after_write_preview: str | None = None
    before_uninstall: Callable[[Place, list[str]], str | None] | None = None  # undo that step; what was done
    warnings: Callable[[Place], list[str]] = lambda place: []  # what keeps the setup from working here
    # `om-mcp doctor`: is what setup wrote in effect (None: nothing of ours to check)? (ok, None: warn; the line)
    doctor: Callable[[Place], tuple[bool | None, str] | None] | None = None
    # `--plugin`: the host's other way in (Claude Code's plugin): (command, dry run, uninstall) -> (ok, lines)
    plugin: Callable[[list[str], bool, bool], tuple[bool, list[str]]] | None = None


def found(place: Place, command: str, *folders: Path) -> str | None:
    """'claude on PATH' or '~/.claude exists', else None."""
    path = place.which(command)
    if path:
        return f"{command} at {path}"
    for folder in folders:
        if folder.exists():
            return f"{folder} exists"
    return None


def server_args(command: list[str], hooks: bool) -> list[str]:
    return [*command[1:], "serve", *(["--hooks"] if hooks else [])]


def session_start(cwd: str, **extra: Any) -> dict[str, Any]:
    """A SessionStart payload in Claude Code's shape (Gemini CLI and Codex add their own fields)."""
    return {
        "session_id": HOOK_CHECK_SESSION,
        "transcript_path": None,
        "cwd": cwd,
        "hook_event_name": "SessionStart",
        "source": "startup",
        **extra,
    }
