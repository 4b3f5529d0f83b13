"""`om-mcp setup cursor`: `mcp.json` and `hooks.json` under `~/.cursor` (or `<project>/.cursor`).

See `om_mcp.hosts.cursor` for the documentation this follows:
`{"mcpServers": {"om-mcp": {command, args}}}` and `{"version": 1, "hooks":
{"<event>": [{"command"}]}}` with the events the adapter reads.
"""

from __future__ import annotations

from typing import Any

from om_mcp.hosts.setup import entries
from om_mcp.hosts.setup.base import HOOK_CHECK_SESSION, HostSetup, Place, found, server_args
from om_mcp.hosts.setup.files import Change
from om_mcp.hosts.setup.launch import shell_command

EVENTS = ("sessionStart", "beforeSubmitPrompt", "afterAgentResponse", "stop", "preCompact", "sessionEnd")


def changes(place: Place, command: list[str], uninstall: bool) -> list[Change]:
    folder = (place.project or place.home) / ".cursor"
    entry = {"command": command[0], "args": server_args(command, True)}
    line = shell_command(command, "hook", "cursor") + " || true"
    handlers = {event: {"command": line} for event in EVENTS}
    return [
        entries.server_change(folder / "mcp.json", "mcpServers", entry, uninstall),
        entries.flat_hooks_change(folder / "hooks.json", handlers, uninstall, header={"version": 1}),
    ]


def hook_event(cwd: str) -> dict[str, Any]:
    return {
        "conversation_id": HOOK_CHECK_SESSION,
        "session_id": HOOK_CHECK_SESSION,
        "generation_id": "check",
        "hook_event_name": "sessionStart",
        "workspace_roots": [cwd],
        "transcript_path": None,
    }


SETUP = HostSetup(
    name="cursor",
    title="Cursor",
    changes=changes,
    detect=lambda place: found(place, "cursor", place.home / ".cursor"),
    hook_event=hook_event,
    notes=("restart Cursor; Settings -> MCP lists om-mcp, Settings -> Hooks lists the hooks",),
)
