"""`om-mcp setup codex`: the MCP server in `config.toml` and the recording hooks in `hooks.json`.

See `om_mcp.hosts.codex` for the documentation this follows. Files:
`$CODEX_HOME` (default `~/.codex`) `/config.toml` `[mcp_servers.om-mcp]`
(command, args; as `codex mcp add` 0.171.0 writes it) and `/hooks.json`
(Claude Code's shape); with --project, `<project>/.codex/config.toml` and
`<project>/.codex/hooks.json` (Codex loads a project's layer once the
project is trusted). Hooks are on by default (`codex features list`: hooks
stable true, 0.171.0); a `[features] hooks = false` in config.toml is reported.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from om_mcp.hosts.setup import entries
from om_mcp.hosts.setup.base import HostSetup, Place, found, server_args, session_start
from om_mcp.hosts.setup.files import Change, ConfigProblem, read_text, toml_string, toml_table_change
from om_mcp.hosts.setup.launch import shell_command

TABLE = "mcp_servers.om-mcp"
EVENTS = (("SessionStart", 20), ("UserPromptSubmit", 30), ("Stop", 30), ("PreCompact", 30))


def codex_home(place: Place) -> Path:
    if place.project:
        return place.project / ".codex"
    return Path(place.env["CODEX_HOME"]) if place.env.get("CODEX_HOME") else place.home / ".codex"


def changes(place: Place, command: list[str], uninstall: bool) -> list[Change]:
    folder = codex_home(place)
    args = ", ".join(toml_string(a) for a in server_args(command, True))
    body = None if uninstall else f"command = {toml_string(command[0])}\nargs = [{args}]\n"
    line = shell_command(command, "hook", "codex") + " || true"
    groups = {event: {"hooks": [{"type": "command", "command": line, "timeout": t}]} for event, t in EVENTS}
    return [
        toml_table_change(folder / "config.toml", "MCP server", TABLE, body),
        entries.grouped_hooks_change(folder / "hooks.json", groups, uninstall),
    ]


def hooks_switched_off(place: Place) -> str | None:
    """A warning when config.toml turns hooks off (`[features] hooks = false`, or its old name)."""
    path = codex_home(place) / "config.toml"
    try:
        features = tomllib.loads(read_text(path) or "").get("features", {})
    except (tomllib.TOMLDecodeError, ConfigProblem):  # reported by the change itself
        return None
    if isinstance(features, dict) and (features.get("hooks") is False or features.get("codex_hooks") is False):
        return f"{path} has hooks switched off under [features]: sessions are not recorded until it is on"
    return None


SETUP = HostSetup(
    name="codex",
    title="Codex CLI",
    changes=changes,
    detect=lambda place: found(place, "codex", codex_home(place)),
    hook_event=lambda cwd: session_start(cwd, model="gpt-5-codex", permission_mode="default"),
    notes=("restart Codex; `codex mcp list` shows om-mcp, and `/hooks` lists the hooks",),
)
