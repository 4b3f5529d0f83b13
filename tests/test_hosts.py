"""Hosts are adapters: which host is speaking is decided in its adapter and nowhere else.

Each host is one adapter module (`hosts/adapter.py`'s `Host`, listed in `hosts.ADAPTERS`) and one
setup module (listed in `hosts.setup.HOSTS`). No other module compares a host's name: not the hook,
not a command, not the shared host code. Read from the source (ast), so a comparison names its file
and line; the detector is shown to find the comparisons it was written for.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from om_mcp.hosts import ADAPTERS, adapter_for
from om_mcp.hosts.adapter import Host
from om_mcp.hosts.setup import HOSTS as SETUPS

PACKAGE = Path(__file__).resolve().parents[1] / "om_mcp"
NAMES = frozenset(ADAPTERS) | frozenset(SETUPS)


def adapter_files() -> set[Path]:
    """The adapters' and the setup modules' own files (an adapter that is a package: all of it)."""
    files = set()
    for module in ADAPTERS.values():
        path = Path(importlib.import_module(module).__file__ or "")
        files |= set(path.parent.rglob("*.py")) if path.parent.name != "hosts" else {path}
    for setup in SETUPS.values():
        path = Path(importlib.import_module(setup.changes.__module__).__file__ or "")
        files.add(path)
    return files


def host_constants(tree: ast.Module, known: set[str] = frozenset()) -> set[str]:  # type: ignore[assignment]
    """Module-level names bound to a host's name, or to a group of them (`CODEX = "codex"`,
    `LINE_HOSTS = (CODEX, "vscode")`), `known` being such names from elsewhere."""
    found: set[str] = set(known)
    for node in tree.body:
        if isinstance(node, ast.Assign) and _names_a_host(node.value, found):
            found |= {target.id for target in node.targets if isinstance(target, ast.Name)}
    return found


def _names_a_host(node: ast.expr, constants: set[str]) -> bool:
    if isinstance(node, ast.Constant):
        return node.value in NAMES
    if isinstance(node, ast.Name | ast.Attribute):
        return (node.id if isinstance(node, ast.Name) else node.attr) in constants
    if isinstance(node, ast.Tuple | ast.List | ast.Set):  # a group of hosts, not words among which one is a
        return bool(node.elts) and all(_names_a_host(e, constants) for e in node.elts)  # host's ("cursor")
    return False


def host_comparisons(source: str, constants: set[str] = frozenset()) -> list[int]:  # type: ignore[assignment]
    """Lines that decide by a host's name: `==`/`!=`/`in` against one, a `match` case on one, a lookup
    in a dict keyed by them."""
    tree = ast.parse(source)
    constants = set(constants) | host_constants(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and any(
            _names_a_host(side, constants) for side in [node.left, *node.comparators]
        ):
            found.append(node.lineno)
        elif isinstance(node, ast.MatchValue) and _names_a_host(node.value, constants):
            found.append(node.lineno)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and isinstance(node.func.value, ast.Dict)
            and any(k is not None and _names_a_host(k, constants) for k in node.func.value.keys)
        ):
            found.append(node.lineno)
        elif (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Dict)
            and any(k is not None and _names_a_host(k, constants) for k in node.value.keys)
        ):
            found.append(node.lineno)
    return found


def test_no_module_outside_the_adapters_compares_a_host_name() -> None:
    allowed = adapter_files()
    everywhere: set[str] = set()
    for _ in range(2):  # names bound to names of the first pass (`LINE_HOSTS = (CODEX, CURSOR)`) in the second
        for path in PACKAGE.rglob("*.py"):
            everywhere |= host_constants(ast.parse(path.read_text()), everywhere)
    problems = [
        f"{path.relative_to(PACKAGE.parent)}:{line}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path not in allowed
        for line in host_comparisons(path.read_text(), everywhere)
    ]
    assert problems == [], "decided by a host's name outside its adapter: " + ", ".join(problems)


@pytest.mark.parametrize(
    "planted",
    [
        'if event.host == "cursor":\n    pass',
        'ok = host.name != "codex"',
        'LINE_HOSTS = ("codex", "vscode")\nok = event.host in LINE_HOSTS',
        'CURSOR = "cursor"\nok = CURSOR == event.host',
        'match name:\n    case "gemini-cli":\n        pass',
        'events = {"codex": 1, "cursor": 2}.get(host)',
        'events = {"codex": 1}[host]',
    ],
)
def test_the_guard_finds_a_planted_host_comparison(planted: str) -> None:
    assert host_comparisons(planted) != []
    assert host_comparisons(planted.replace("host", "role").replace("name", "kind")) != []  # it is the value
    assert host_comparisons('ok = event.name == "SessionStart"') == []  # an event's name is no host's
    assert host_comparisons('ok = key not in ("thread_id", "cursor", "page")') == []  # a word, among others


def test_each_host_is_one_adapter_and_one_setup_module() -> None:
    """The two registries name the same hosts (Claude Desktop has no hooks: setup only), and each adapter
    is a `Host` that knows its own name."""
    assert set(ADAPTERS) <= set(SETUPS)
    for name in ADAPTERS:
        host = adapter_for(name)
        assert isinstance(host, Host) and host.name == name and host.title
        assert SETUPS[name].hook_event is not None  # a host with hooks is set up with them
    assert {name for name, setup in SETUPS.items() if setup.hook_event is not None} == set(ADAPTERS)
