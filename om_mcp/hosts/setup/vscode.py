"""`om-mcp setup vscode`: the user profile's `mcp.json` and a hook file in `~/.copilot/hooks`.

See `om_mcp.hosts.vscode` for the documentation this follows. User level:
`<profile>/mcp.json` `{"servers": {"om-mcp": {"type": "stdio", command,
args}}}` (profile: `~/.config/Code/User` on Linux, `~/Library/Application
Support/Code/User` on macOS, `%APPDATA%\\Code\\User` on Windows) and
`~/.copilot/hooks/om-mcp.json`; with --project, `.vscode/mcp.json` and
`.github/hooks/om-mcp.json`. The hook file is ours alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from om_mcp.hosts.setup import entries
from om_mcp.hosts.setup.base import HOOK_CHECK_SESSION, HostSetup, Place, found, server_args
from om_mcp.hosts.setup.files import Change
from om_mcp.hosts.setup.launch import shell_command

EVENTS = (("SessionStart", 20), ("UserPromptSubmit", 30), ("Stop", 30), ("SubagentStop", 30), ("PreCompact", 30))


def files(place: Place) -> tuple[Path, Path]:
    if place.project:
        return place.project / ".vscode" / "mcp.json", place.project / ".github" / "hooks" / "om-mcp.json"
    return place.app_data("Code") / "User" / "mcp.json", place.home / ".copilot" / "hooks" / "om-mcp.json"


def changes(place: Place, command: list[str], uninstall: bool) -> list[Change]:
    servers, hooks = files(place)
    entry = {"type": "stdio", "command": command[0], "args": server_args(command, True)}
    line = shell_command(command, "hook", "vscode") + " || true"
    handlers = {event: {"type": "command", "command": line, "timeout": t} for event, t in EVENTS}
    return [
        entries.server_change(servers, "servers", entry, uninstall),
        entries.flat_hooks_change(hooks, handlers, uninstall),
    ]


def hook_event(cwd: str) -> dict[str, Any]:
    return {
        "timestamp": "2026-01-01T00:00:00.000Z",
        "cwd": cwd,
        "sessionId": HOOK_CHECK_SESSION,
        "hookEventName": "SessionStart",
        "transcript_path": None,
        "source": "new",
    }


SETUP = HostSetup(
    name="vscode",
    title="VS Code",
    changes=changes,
    detect=lambda place: found(place, "code", place.app_data("Code"), place.home / ".vscode"),
    hook_event=hook_event,
    notes=("reload VS Code; MCP: List Servers shows om-mcp (agent hooks are a Preview feature of VS Code)",),
)
