"""The layers stay visible: what each package may import, and no import cycles.

Read from the source (ast), so a violation names the file and the import.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "om_mcp"

# package -> imports it must never make (prefix match on the module name)
FORBIDDEN = {
    "om_mcp.store": ("om_mcp.engine", "om_mcp.server", "om_mcp.models", "om_mcp.commands", "mcp"),
    "om_mcp.models": ("om_mcp.engine", "om_mcp.server", "om_mcp.commands"),
    # Each backend is its driver and its own SQL; what they share lives in om_mcp.store itself.
    "om_mcp.store.postgres": ("om_mcp.store.sqlite",),
    "om_mcp.store.sqlite": ("om_mcp.store.postgres",),
    # Above the store, a backend is reached through `om_mcp.store` (the SQLite file opened directly:
    # `om_mcp.store.local`), never by its own modules.
    "om_mcp.engine": ("om_mcp.server", "om_mcp.commands", "mcp", "om_mcp.store.sqlite", "om_mcp.store.postgres"),
    "om_mcp.hook": ("om_mcp.store.sqlite", "om_mcp.store.postgres"),
    "om_mcp.hosts": ("om_mcp.store.sqlite", "om_mcp.store.postgres"),
    "om_mcp.commands": ("om_mcp.store.sqlite", "om_mcp.store.postgres"),
    # The host hook loads it on every prompt: plain `re`, nothing heavy, nothing above it.
    "om_mcp.privacy": ("om_mcp.engine", "om_mcp.server", "om_mcp.store", "om_mcp.config", "om_mcp.models", "pydantic"),
}
# The MCP adapter sees the engine through its facade only (and the process-wide logs and heap).
SERVER_MAY_IMPORT = ("om_mcp.server", "om_mcp.config", "om_mcp.logs", "om_mcp.heap")
SERVER_EXACT = ("om_mcp", "om_mcp.engine")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) for every import in the file: at the top, inside a function, or for type
    checking only (a type named across layers couples them as surely as a call); relative imports
    resolved."""
    tree = ast.parse(path.read_text(), str(path))
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # `from pkg import module` depends on the module; `from module import name` on the module
            submodules = [f"{base}.{a.name}" for a in node.names if _is_module(f"{base}.{a.name}")]
            out += [(node.lineno, m) for m in submodules] if submodules else [(node.lineno, base)]
    return out


def _is_module(name: str) -> bool:
    path = PACKAGE.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_each_layer_imports_only_what_it_may():
    problems = []
    for path in sources():
        name = module_name(path)
        for line, target in imports(path):
            for layer, banned in FORBIDDEN.items():
                if (name == layer or name.startswith(layer + ".")) and any(
                    target == b or target.startswith(b + ".") for b in banned
                ):
                    problems.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {target}")
            if name.startswith("om_mcp.server") and target.startswith("om_mcp"):
                allowed = target in SERVER_EXACT or any(
                    target == p or target.startswith(p + ".") for p in SERVER_MAY_IMPORT
                )
                if not allowed:
                    problems.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {target}")
    assert not problems, "\n".join(problems)


def test_no_import_cycles():
    """Counting imports inside functions and under TYPE_CHECKING: a cycle hidden there is still
    two modules that cannot be understood (or changed) one without the other."""
    modules = {module_name(p): p for p in sources()}
    graph = {}
    for name, path in modules.items():
        targets = {t for _, t in imports(path)}
        graph[name] = {t for t in targets if t in modules and t != name}
    cycles = _cycles(graph)
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


# The store's face for the hook and the commands: the package's names (`om_mcp.store`), the SQLite
# file opened directly (`store.local`), URLs without their passwords, the errors. The rules, their
# modules and the rows behind them stay the store's own: an append is the engine's pipeline.
STORE_FACE = ("om_mcp.store", "om_mcp.store.local", "om_mcp.store.urls", "om_mcp.store.errors")


def test_the_hook_and_the_commands_reach_the_store_only_through_its_face():
    problems = []
    for path in sources():
        name = module_name(path)
        if not name.startswith(("om_mcp.hook", "om_mcp.commands")):
            continue
        for line, target in imports(path):
            if target.startswith("om_mcp.store.") and target not in STORE_FACE:
                problems.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {target}")
    assert not problems, "\n".join(problems)
