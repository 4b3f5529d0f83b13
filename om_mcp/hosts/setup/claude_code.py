"""`om-mcp setup claude-code`: the MCP server and the recording hooks.

Files (Claude Code docs, settings and MCP pages; shapes as `claude mcp add`
2.1.197 writes them):
* the server: `~/.claude.json` `mcpServers` (user scope, what `claude mcp add
  --scope user` edits), or `<project>/.mcp.json` with --project;
  `{"type": "stdio", "command", "args", "env"}`;
* the hooks: `~/.claude/settings.json`, or `<project>/.claude/settings.json`;
  the events and options of `configs/claude-code-settings.json`.
`claude mcp list` then shows the server connected (it starts it).

The plugin is the other way in: its files are package data in
`om_mcp/hosts/claude_code/plugin/` (`.claude-plugin/plugin.json`, `.mcp.json`,
`hooks/hooks.json`, `hooks/om-mcp-hook`), and a clone's
`.claude-plugin/marketplace.json` points there. Claude Code copies a plugin's
whole folder into its cache (`~/.claude/plugins/cache/<marketplace>/<plugin>/
<version>/`; it honours no ignore file: measured with 2.1.197, a clone's
`.venv` and `build/` were copied when the plugin's source was the clone's
root), so the folder holds only those four files. `lay_out_plugin` writes the
same folder, beside a marketplace file, for an install without a clone.
"""

from __future__ import annotations

import json
import shutil
from importlib import resources
from pathlib import Path
from typing import Any

from om_mcp.hosts.setup import entries
from om_mcp.hosts.setup.base import HostSetup, Place, found, server_args, session_start
from om_mcp.hosts.setup.files import Change, ConfigProblem
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


PLUGIN_FILES = (".claude-plugin/plugin.json", ".mcp.json", "hooks/hooks.json", "hooks/om-mcp-hook")


def plugin_folder() -> Path:
    """The plugin as installed with om-mcp (package data)."""
    return Path(str(resources.files("om_mcp.hosts.claude_code").joinpath("plugin")))


def lay_out_plugin(folder: Path) -> list[Path]:
    """`folder` as a local marketplace holding the plugin (`folder/om-mcp/`) and nothing else; the files written."""
    source = plugin_folder()
    manifest = json.loads((source / ".claude-plugin" / "plugin.json").read_text(encoding="utf-8"))
    market = {
        "name": "om-mcp",
        "owner": manifest["author"],
        "plugins": [
            {
                "name": "om-mcp",
                "source": "./om-mcp",
                "description": manifest["description"],
                "version": manifest["version"],
            }
        ],
    }
    written = []
    try:
        if folder.exists():
            shutil.rmtree(folder)
        for name in PLUGIN_FILES:
            target = folder / "om-mcp" / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / name, target)
            if name.endswith("om-mcp-hook"):
                target.chmod(0o755)  # an install may not keep the mode; the plugin runs it with `sh` anyway
            written.append(target)
        index = folder / ".claude-plugin" / "marketplace.json"
        index.parent.mkdir(parents=True, exist_ok=True)
        index.write_text(json.dumps(market, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        written.append(index)
    except OSError as error:
        raise ConfigProblem(f"{folder}: the plugin cannot be laid out there ({error.strerror or error})") from None
    return written


def plugin(command: list[str], dry_run: bool, uninstall: bool) -> tuple[bool, list[str]]:
    """`setup claude-code --plugin`: record where om-mcp is for the plugin's launcher, and lay the plugin
    out as a local marketplace (only the plugin's own files: Claude Code copies the folder it installs
    from); or, uninstalling, remove both. (ok, the lines to print); ConfigProblem when it cannot."""
    from om_mcp.hosts.setup.launch import record_command, recorded_files
    from om_mcp.paths import data_dir

    folder = data_dir() / "claude-code-plugin"
    if dry_run:
        verb = "remove" if uninstall else "record"
        return True, [
            f"would {verb} {command[0]} for the plugin's launcher in {recorded_files()[0]}",
            f"would {'remove' if uninstall else 'lay out'} the plugin in {folder}",
        ]
    lines = []
    if uninstall:
        for path in recorded_files():
            if path.exists():
                path.unlink()
                lines.append(f"{path}: removed")
        if folder.exists():
            shutil.rmtree(folder)
            lines.append(
                f"{folder}: removed the plugin (`claude plugin uninstall om-mcp@om-mcp` removes it from Claude Code)"
            )
        return True, lines
    files = lay_out_plugin(folder)
    return True, [
        f"recorded {command[0]} for the plugin's launcher in {record_command(command)}",
        f"{folder}: laid out the plugin ({len(files)} files, {sum(p.stat().st_size for p in files):,} bytes)",
        f"next: claude plugin marketplace add {folder} && claude plugin install om-mcp@om-mcp",
        "next: restart Claude Code; `claude plugin details om-mcp@om-mcp` lists 1 MCP server and 6 hooks",
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
    plugin=plugin,
)
