"""`om-mcp setup claude-desktop`: the MCP server only (Claude Desktop has no hooks).

The file (Claude Desktop's MCP quickstart, modelcontextprotocol.io): macOS
`~/Library/Application Support/Claude/claude_desktop_config.json`, Windows
`%APPDATA%\\Claude\\claude_desktop_config.json`; on Linux, where Claude Desktop
is not an official build, `~/.config/Claude/claude_desktop_config.json`.
`{"mcpServers": {"<name>": {"command", "args", "env"}}}`. No project file.
"""

from __future__ import annotations

from pathlib import Path

from om_mcp.hosts.setup import entries
from om_mcp.hosts.setup.base import HostSetup, Place, server_args
from om_mcp.hosts.setup.files import Change


def config_file(place: Place) -> Path:
    return place.app_data("Claude") / "claude_desktop_config.json"


def changes(place: Place, command: list[str], uninstall: bool) -> list[Change]:
    entry = {"command": command[0], "args": server_args(command, False)}
    return [entries.server_change(config_file(place), "mcpServers", entry, uninstall)]


def detect(place: Place) -> str | None:
    folder = config_file(place).parent
    return f"{folder} exists" if folder.exists() else None


SETUP = HostSetup(
    name="claude-desktop",
    title="Claude Desktop",
    changes=changes,
    detect=detect,
    has_project=False,
    notes=("quit and reopen Claude Desktop; it has no hooks, so the agent stores each exchange with the tools",),
)
