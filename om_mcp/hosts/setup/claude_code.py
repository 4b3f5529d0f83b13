"""`om-mcp setup claude-code`: the MCP server and the recording hooks.

Files (Claude Code docs, settings and MCP pages; shapes as `claude mcp add`
2.1.197 writes them):
* the server: `~/.claude.json` `mcpServers` (user scope, what `claude mcp add
  --scope user` edits), or `<project>/.mcp.json` with --project;
  `{"type": "stdio", "command", "args", "env"}`;
* the hooks: `~/.claude/settings.json`, or `<project>/.claude/settings.json`;
  the events and options of `configs/claude-code-settings.json`.
`claude mcp list` then shows the server connected (it starts it).
"""

from __future__ import annotations

from typing import Any

from om_mcp.hosts.setup import entries
from om_mcp.hosts.setup.base import HostSetup, Place, found, server_args, session_start
from om_mcp.hosts.setup.files import Change
from om_mcp.hosts.setup.launch import shell_command

# (event, matcher, timeout in seconds, async): as the plugin's hooks/hooks.json.
EVENTS = (
    ("SessionStart", "startup|resume|clear|compact", 20, False),
    ("UserPromptSubmit", None, 30, True),
    ("Stop", None, 30, False),
    ("SubagentStop", None, 30, True),
    ("PreCompact", None, 30, False),
    ("SessionEnd", None, 15, False),
)


def hook_groups(command: list[str], host: str = "claude-code") -> dict[str, dict[str, Any]]:
    line = shell_command(command, "hook", host) + " || true"
    groups = {}
    for event, matcher, timeout, run_async in EVENTS:
        handler: dict[str, Any] = {"type": "command", "command": line, "timeout": timeout}
        if run_async:
            handler["async"] = True
        groups[event] = {**({"matcher": matcher} if matcher else {}), "hooks": [handler]}
    return groups


def changes(place: Place, command: list[str], uninstall: bool) -> list[Change]:
    root = place.project
    entry = {"type": "stdio", "command": command[0], "args": server_args(command, True), "env": {}}
    return [
        entries.server_change(
            root / ".mcp.json" if root else place.home / ".claude.json", "mcpServers", entry, uninstall
        ),
        entries.grouped_hooks_change(
            (root or place.home) / ".claude" / "settings.json", hook_groups(command), uninstall
        ),
    ]


SETUP = HostSetup(
    name="claude-code",
    title="Claude Code",
    changes=changes,
    detect=lambda place: found(place, "claude", place.home / ".claude"),
    hook_event=session_start,
    notes=(
        "restart Claude Code; `claude mcp list` shows om-mcp connected, and each session is recorded",
        "with the om-mcp plugin installed too, the same hooks run twice (harmless, but use one of the two)",
    ),
)
