"""`om-mcp setup gemini-cli`: the MCP server and the recording hooks, in one settings file.

`~/.gemini/settings.json` (or `<project>/.gemini/settings.json`):
`mcpServers.om-mcp {command, args}` as `gemini mcp add` 0.61.0 writes it, and
`hooks` in Gemini CLI's shape (google-gemini/gemini-cli docs/hooks: event ->
[{hooks: [{type, name, command, timeout (ms)}]}]), the events of
`configs/gemini-cli-settings.json`.
"""

from __future__ import annotations

from typing import Any

from om_mcp.hosts.setup import entries
from om_mcp.hosts.setup.base import HostSetup, Place, found, server_args, session_start
from om_mcp.hosts.setup.files import Change, json_change
from om_mcp.hosts.setup.launch import shell_command

EVENTS = (
    ("SessionStart", "om-mcp-context", 20000),
    ("BeforeAgent", "om-mcp-record", 30000),  # the prompt, stored before the turn (hosts.prompts)
    ("AfterAgent", "om-mcp-record", 30000),
    ("PreCompress", "om-mcp-record", 30000),
    ("SessionEnd", "om-mcp-record", 15000),
)


def changes(place: Place, command: list[str], uninstall: bool) -> list[Change]:
    path = (place.project or place.home) / ".gemini" / "settings.json"
    if uninstall:
        return [
            json_change(
                path,
                "MCP server and hooks",
                lambda d: entries.drop_grouped_hooks(entries.drop_server(d, "mcpServers")),
                dict,
            )
        ]
    entry = {"command": command[0], "args": server_args(command, True)}
    line = shell_command(command, "hook", "gemini-cli") + " || true"
    groups = {
        event: {"hooks": [{"type": "command", "name": name, "command": line, "timeout": timeout}]}
        for event, name, timeout in EVENTS
    }

    def edit(doc: dict[str, Any]) -> dict[str, Any]:
        return entries.set_grouped_hooks(entries.set_server(doc, "mcpServers", entry, str(path)), groups, str(path))

    return [
        json_change(
            path,
            "MCP server and hooks",
            edit,
            lambda: {"mcpServers": {entries.SERVER_NAME: entry}, "hooks": {e: [g] for e, g in groups.items()}},
        )
    ]


SETUP = HostSetup(
    name="gemini-cli",
    title="Gemini CLI",
    changes=changes,
    detect=lambda place: found(place, "gemini", place.home / ".gemini"),
    hook_event=lambda cwd: session_start(cwd, timestamp="2026-01-01T00:00:00Z"),
    notes=("restart Gemini CLI; `gemini mcp list` shows om-mcp",),
)
