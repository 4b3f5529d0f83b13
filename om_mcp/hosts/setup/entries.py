"""Our entries in a host's config object: added, replaced or removed, everyone else's left as they are.

A hook handler is ours when its command runs `om-mcp ... hook` (or `python -m
om_mcp hook`), under any path: so a second setup from another install replaces
the first instead of adding a second hook, and `--uninstall` removes exactly
those. An MCP server is ours by its name (`om-mcp`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from om_mcp.hosts.setup.files import Change, ConfigProblem, json_change

SERVER_NAME = "om-mcp"
_OUR_HOOK = re.compile(r"(?:om-mcp|om_mcp)['\"]?\s+hook\b")


def is_our_hook(handler: Any) -> bool:
    command = handler.get("command") if isinstance(handler, dict) else None
    return isinstance(command, str) and bool(_OUR_HOOK.search(command))


def _table(doc: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    value = doc.setdefault(key, {})
    if not isinstance(value, dict):
        raise ConfigProblem(f"{where}: `{key}` is not an object; left untouched")
    return value


def set_server(doc: dict[str, Any], key: str, entry: dict[str, Any], where: str) -> dict[str, Any]:
    _table(doc, key, where)[SERVER_NAME] = entry
    return doc


def drop_server(doc: dict[str, Any], key: str) -> dict[str, Any]:
    servers = doc.get(key)
    if isinstance(servers, dict) and SERVER_NAME in servers:
        del servers[SERVER_NAME]
        if not servers:
            del doc[key]
    return doc


def set_grouped_hooks(doc: dict[str, Any], groups: dict[str, dict[str, Any]], where: str) -> dict[str, Any]:
    """Claude Code's shape (also Codex's, Gemini CLI's): event -> [{matcher?, hooks: [handler]}]."""
    hooks = _table(doc, "hooks", where)
    for event, group in groups.items():
        current = hooks.setdefault(event, [])
        if not isinstance(current, list):
            raise ConfigProblem(f"{where}: hooks.{event} is not a list; left untouched")
        ours = [g for g in current if isinstance(g, dict) and any(map(is_our_hook, g.get("hooks") or []))]
        if ours == [group]:
            continue
        hooks[event] = [*_without_ours_grouped(current), group]
    return doc


def drop_grouped_hooks(doc: dict[str, Any]) -> dict[str, Any]:
    hooks = doc.get("hooks")
    if not isinstance(hooks, dict):
        return doc
    for event in list(hooks):
        if isinstance(hooks[event], list):
            kept = _without_ours_grouped(hooks[event])
            if kept:
                hooks[event] = kept
            else:
                del hooks[event]
    if not hooks:
        del doc["hooks"]
    return doc


def _without_ours_grouped(groups: list[Any]) -> list[Any]:
    kept = []
    for group in groups:
        if isinstance(group, dict) and isinstance(group.get("hooks"), list):
            handlers = [h for h in group["hooks"] if not is_our_hook(h)]
            if not handlers and group["hooks"]:
                continue
            group = {**group, "hooks": handlers}
        kept.append(group)
    return kept


def set_flat_hooks(doc: dict[str, Any], handlers: dict[str, dict[str, Any]], where: str) -> dict[str, Any]:
    """Cursor's and VS Code's shape: event -> [handler]."""
    hooks = _table(doc, "hooks", where)
    for event, handler in handlers.items():
        current = hooks.setdefault(event, [])
        if not isinstance(current, list):
            raise ConfigProblem(f"{where}: hooks.{event} is not a list; left untouched")
        if [h for h in current if is_our_hook(h)] == [handler]:
            continue
        hooks[event] = [*(h for h in current if not is_our_hook(h)), handler]
    return doc


def drop_flat_hooks(doc: dict[str, Any], keep_if_empty: tuple[str, ...] = ()) -> dict[str, Any]:
    hooks = doc.get("hooks")
    if not isinstance(hooks, dict):
        return doc
    for event in list(hooks):
        if isinstance(hooks[event], list):
            kept = [h for h in hooks[event] if not is_our_hook(h)]
            if kept:
                hooks[event] = kept
            else:
                del hooks[event]
    if not hooks:
        del doc["hooks"]
        for key in keep_if_empty:  # e.g. Cursor's "version", which only our hooks needed
            doc.pop(key, None)
    return doc


# --------------------------------------------------------------------------------------
# The changes a host module asks for, in a few words
# --------------------------------------------------------------------------------------


def server_change(path: Path, key: str, entry: dict[str, Any], uninstall: bool) -> Change:
    """Our server under `key` ("mcpServers", "servers") in the JSON file at `path`, or its removal."""
    if uninstall:
        return json_change(path, "MCP server", lambda d: drop_server(d, key), dict)
    return json_change(
        path, "MCP server", lambda d: set_server(d, key, entry, str(path)), lambda: {key: {SERVER_NAME: entry}}
    )


def grouped_hooks_change(path: Path, groups: dict[str, dict[str, Any]], uninstall: bool) -> Change:
    """Our hooks in Claude Code's shape (Codex's too) in the JSON file at `path`, or their removal."""
    if uninstall:
        return json_change(path, "hooks", drop_grouped_hooks, dict)
    return json_change(
        path,
        "hooks",
        lambda d: set_grouped_hooks(d, groups, str(path)),
        lambda: {"hooks": {e: [g] for e, g in groups.items()}},
    )


def flat_hooks_change(
    path: Path, handlers: dict[str, dict[str, Any]], uninstall: bool, header: dict[str, Any] | None = None
) -> Change:
    """Our hooks in Cursor's and VS Code's shape; `header` keys (Cursor's "version") go with them."""
    header = header or {}
    if uninstall:
        return json_change(path, "hooks", lambda d: drop_flat_hooks(d, tuple(header)), dict)

    def edit(doc: dict[str, Any]) -> dict[str, Any]:
        for key, value in header.items():
            doc.setdefault(key, value)
        return set_flat_hooks(doc, handlers, str(path))

    return json_change(path, "hooks", edit, lambda: {**header, "hooks": {e: [h] for e, h in handlers.items()}})
