"""`om-mcp setup copilot-cli`: the MCP server in `mcp-config.json` and the recording hooks in `settings.json`.

See `om_mcp.hosts.copilot_cli` for the documentation this follows. Files, under `$COPILOT_HOME`
(default `~/.copilot`): `mcp-config.json` `{"mcpServers": {"om-mcp": {"type": "local", command,
args, "tools": ["*"]}}}` (as `copilot mcp add` 1.0.102 writes it), and the `hooks` of
`settings.json` (Copilot CLI's own settings; VS Code reads the hook files in `~/.copilot/hooks`,
not this). User level only: a repository's `.github/hooks` are VS Code's too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from om_mcp.hosts.setup import entries
from om_mcp.hosts.setup.base import HostSetup, Place, found, server_args, session_start
from om_mcp.hosts.setup.files import Change
from om_mcp.hosts.setup.launch import shell_command

EVENTS = (
    ("SessionStart", 20),
    ("UserPromptSubmit", 30),
    ("Stop", 30),
    ("SubagentStop", 30),
    ("PreCompact", 30),
    ("SessionEnd", 15),
)


def copilot_home(place: Place) -> Path:
    return Path(place.env["COPILOT_HOME"]) if place.env.get("COPILOT_HOME") else place.home / ".copilot"


def changes(place: Place, command: list[str], uninstall: bool) -> list[Change]:
    folder = copilot_home(place)
    entry = {"type": "local", "command": command[0], "args": server_args(command, True), "tools": ["*"]}
    line = shell_command(command, "hook", "copilot-cli") + " || true"
    handlers = {event: {"type": "command", "command": line, "timeout": t} for event, t in EVENTS}
    return [
        entries.server_change(folder / "mcp-config.json", "mcpServers", entry, uninstall),
        entries.flat_hooks_change(folder / "settings.json", handlers, uninstall),
    ]


def hook_event(cwd: str) -> dict[str, Any]:
    return session_start(cwd, timestamp="2026-01-01T00:00:00.000Z", source="new")


SETUP = HostSetup(
    name="copilot-cli",
    title="GitHub Copilot CLI",
    changes=changes,
    detect=lambda place: found(place, "copilot", copilot_home(place)),
    hook_event=hook_event,
    has_project=False,
    notes=("restart Copilot CLI; `copilot mcp list` shows om-mcp, and each session is recorded",),
)
