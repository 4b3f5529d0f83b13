"""`om-mcp setup codex`: the MCP server in `config.toml` and the recording hooks in `hooks.json`.

See `om_mcp.hosts.codex` for the documentation this follows. Files:
`$CODEX_HOME` (default `~/.codex`) `/config.toml` `[mcp_servers.om-mcp]`
(command, args; as `codex mcp add` 0.171.0 writes it) and `/hooks.json`
(Claude Code's shape); with --project, `<project>/.codex/config.toml` and
`<project>/.codex/hooks.json` (Codex loads a project's layer once the
project is trusted). Hooks are on by default (`codex features list`: hooks
stable true, 0.171.0); a `[features] hooks = false` in config.toml is reported.
Codex runs a hook only once the user trusts it: setup asks Codex to trust the
ones it wrote, and `--uninstall` takes that trust back (`codex_trust.py`).
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from om_mcp.hosts.setup import codex_trust, entries
from om_mcp.hosts.setup.base import HostSetup, Place, found, server_args, session_start
from om_mcp.hosts.setup.files import Change, ConfigProblem, read_text, toml_string, toml_table_change
from om_mcp.hosts.setup.launch import shell_command

TABLE = "mcp_servers.om-mcp"
EVENTS = (("SessionStart", 20), ("UserPromptSubmit", 30), ("Stop", 30), ("PreCompact", 30))


def codex_home(place: Place) -> Path:
    if place.project:
        return place.project / ".codex"
    return Path(place.env["CODEX_HOME"]) if place.env.get("CODEX_HOME") else place.home / ".codex"


def hook_line(command: list[str]) -> str:
    return shell_command(command, "hook", "codex") + " || true"


def changes(place: Place, command: list[str], uninstall: bool) -> list[Change]:
    folder = codex_home(place)
    args = ", ".join(toml_string(a) for a in server_args(command, True))
    body = None if uninstall else f"command = {toml_string(command[0])}\nargs = [{args}]\n"
    line = hook_line(command)
    groups = {event: {"hooks": [{"type": "command", "command": line, "timeout": t}]} for event, t in EVENTS}
    return [
        toml_table_change(folder / "config.toml", "MCP server", TABLE, body),
        entries.grouped_hooks_change(folder / "hooks.json", groups, uninstall),
    ]


def hooks_switched_off(place: Place) -> list[str]:
    """A warning when config.toml turns hooks off (`[features] hooks = false`, or its old name)."""
    path = codex_home(place) / "config.toml"
    try:
        features = tomllib.loads(read_text(path) or "").get("features", {})
    except (tomllib.TOMLDecodeError, ConfigProblem):  # reported by the change itself
        return []
    if isinstance(features, dict) and (features.get("hooks") is False or features.get("codex_hooks") is False):
        return [f"{path} has hooks switched off under [features]: sessions are not recorded until it is on"]
    return []


def trust_hooks(place: Place, command: list[str]) -> tuple[bool | None, str]:
    """After setup wrote the hooks: have Codex trust them. (True: trusted; None: left to the user, said how;
    False: Codex was asked and they are still not trusted.)"""
    if place.project is not None:
        return None, (
            "Codex runs a project's hooks once the project is trusted, and each person trusts them once:"
            f" in the project, {codex_trust.HOW_TO_TRUST}"
        )
    codex = place.which("codex")
    if not codex:
        return None, f"Codex runs these hooks only once you trust them: {codex_trust.HOW_TO_TRUST}"
    hooks_file = codex_home(place) / "hooks.json"
    try:
        listed = codex_trust.trust(codex, place.home, _env(place), hooks_file, hook_line(command))
    except codex_trust.CodexUnavailable as error:
        return None, f"{error}; Codex runs the hooks only once you trust them: {codex_trust.HOW_TO_TRUST}"
    if not listed:
        return False, f"Codex does not list the hooks in {hooks_file} (are hooks switched off?)"
    waiting = [h for h in listed if h.trust != codex_trust.TRUSTED]
    if waiting:
        return False, f"Codex still does not trust {len(waiting)} of them: {codex_trust.HOW_TO_TRUST}"
    return True, f"Codex trusts the {len(listed)} hooks (trusted for you as /hooks would; review them there)"


def forget_trust(place: Place, command: list[str]) -> str | None:
    """Before `--uninstall` removes the hooks: the trust Codex keeps for them goes too. What was done, if anything."""
    codex = place.which("codex")
    if place.project is not None or not codex:
        return None
    try:
        hooks_file = codex_home(place) / "hooks.json"
        removed = codex_trust.forget(codex, place.home, _env(place), hooks_file, hook_line(command))
    except codex_trust.CodexUnavailable as error:
        return f"could not remove Codex's trust in the hooks: {error}"
    return f"{codex_home(place) / 'config.toml'}: removed Codex's trust in {removed} hooks" if removed else None


def hook_trust(place: Place) -> tuple[bool | None, str] | None:
    """For `om-mcp doctor`: does Codex trust the om-mcp hooks in the user's hooks.json? None when there are none."""
    hooks_file = codex_home(place) / "hooks.json"
    try:
        doc = json.loads(read_text(hooks_file) or "{}")
    except (ValueError, ConfigProblem):
        return None
    lines = {h["command"] for h in _handlers(doc) if entries.is_our_hook(h)}
    if not lines:
        return None
    codex = place.which("codex")
    if not codex:
        return None, f"{hooks_file} holds om-mcp's hooks; codex is not on PATH, so their trust cannot be checked"
    try:
        listed = codex_trust.list_hooks(codex, place.home, _env(place))
    except codex_trust.CodexUnavailable as error:
        return None, str(error)
    mine = [h for line in sorted(lines) for h in codex_trust.ours(listed, hooks_file, line)]
    waiting = [h for h in mine if h.trust != codex_trust.TRUSTED]
    if waiting:
        events = ", ".join(sorted({h.event for h in waiting}))
        return False, (
            f"Codex skips {len(waiting)} of om-mcp's hooks until they are trusted ({events}): run"
            f" `om-mcp setup codex` again, or {codex_trust.HOW_TO_TRUST}"
        )
    return True, f"Codex trusts om-mcp's {len(mine)} hooks in {hooks_file}"


def _handlers(doc: object) -> list[dict]:
    hooks = doc.get("hooks") if isinstance(doc, dict) else None
    groups = [g for v in (hooks or {}).values() if isinstance(v, list) for g in v] if isinstance(hooks, dict) else []
    return [h for g in groups if isinstance(g, dict) for h in g.get("hooks") or [] if isinstance(h, dict)]


def _env(place: Place) -> dict[str, str]:
    return codex_trust.codex_env({**place.env, "HOME": str(place.home)})


SETUP = HostSetup(
    name="codex",
    title="Codex CLI",
    changes=changes,
    detect=lambda place: found(place, "codex", codex_home(place)),
    hook_event=lambda cwd: session_start(cwd, model="gpt-5-codex", permission_mode="default"),
    notes=("restart Codex; `codex mcp list` shows om-mcp, and `/hooks` lists the hooks",),
    after_write=trust_hooks,
    after_write_preview="Codex would be asked to trust the hooks written (codex app-server)",
    before_uninstall=forget_trust,
    warnings=hooks_switched_off,
    doctor=hook_trust,
)
