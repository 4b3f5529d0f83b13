"""`om-mcp setup HOST`: each host's setup knowledge (its config files, entry shapes, hook events)
in one small module here, the file editing rules in `files.py`, our entries in `entries.py`, and
where the running om-mcp is in `launch.py`. The command itself is `om_mcp.commands.setup`."""

from __future__ import annotations

from om_mcp.hosts.setup import claude_code, claude_desktop, codex, cursor, gemini_cli, vscode
from om_mcp.hosts.setup.base import HostSetup, Place

HOSTS: dict[str, HostSetup] = {
    m.SETUP.name: m.SETUP for m in (claude_code, claude_desktop, cursor, vscode, codex, gemini_cli)
}

__all__ = ["HOSTS", "HostSetup", "Place"]
