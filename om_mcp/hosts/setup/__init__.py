"""`om-mcp setup HOST`: each host's setup knowledge (its config files, entry shapes, hook events)
in one small module here, the file editing rules in `files.py`, our entries in `entries.py`, and
where the running om-mcp is in `launch.py`. The command itself is `om_mcp.commands.setup`.

`MODULES` is the registry, beside the adapters' (`om_mcp.hosts.ADAPTERS`): a new host's setup module
is one line here."""

from __future__ import annotations

import importlib

from om_mcp.hosts.setup.base import HostSetup, Place

MODULES = ("claude_code", "claude_desktop", "cursor", "vscode", "codex", "gemini_cli", "copilot_cli")
HOSTS: dict[str, HostSetup] = {
    setup.name: setup for setup in (importlib.import_module(f"{__name__}.{m}").SETUP for m in MODULES)
}

__all__ = ["HOSTS", "HostSetup", "Place"]
