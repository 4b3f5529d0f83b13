"""Host integrations: one adapter per agent host (`adapter.py` says what an adapter is), and the
setup knowledge for each (`hosts/setup/`, the other registry). The adapters read what a host
records (its hook input, its transcript) as om-mcp messages and write what a hook prints back;
the engine's recorder (`engine/recorder/`) stores them.

A new host is an adapter module (its `HOST`), a setup module (its `SETUP`), and one line in
each registry: `ADAPTERS` below and `hosts/setup/__init__.py`'s list. Adapters load on first
use, so a hook pays for its own host only.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from om_mcp.hosts.adapter import Host
    from om_mcp.hosts.events import HookEvent

# `om-mcp hook NAME` -> the module whose `HOST` is that host's adapter.
ADAPTERS = {
    "claude-code": "om_mcp.hosts.claude_code.adapter",
    "gemini-cli": "om_mcp.hosts.gemini_cli",
    "codex": "om_mcp.hosts.codex",
    "cursor": "om_mcp.hosts.cursor",
    "vscode": "om_mcp.hosts.vscode",
    "copilot-cli": "om_mcp.hosts.copilot_cli",
}


def adapter_for(name: str) -> Host:
    """The adapter of the host named `name`; HookInputError naming the hosts when there is none."""
    module = ADAPTERS.get(name)
    if module is None:
        from om_mcp.hosts.common import HookInputError

        raise HookInputError(f"unknown host {name!r}: use one of {', '.join(ADAPTERS)}")
    return importlib.import_module(module).HOST  # type: ignore[no-any-return]


def read_event(name: str, data: str | bytes | Mapping[str, Any]) -> tuple[Host, HookEvent]:
    """The event `om-mcp hook NAME` was given, and the adapter it belongs to: another host's payload may
    reach this host's command (VS Code and Cursor run Claude Code's hooks too), and is read as theirs."""
    from om_mcp.hosts.events import decode

    host = adapter_for(name)
    event = host.read_event(decode(data))
    return (host if event.host == host.name else adapter_for(event.host)), event
