"""The layers stay visible: the ordered layer contract in CONTRIBUTING.md ("## Layers"), read from
there, held against every import in the source, and no import cycles, and no SQL outside the store.

Read from the source (ast), so a violation names the file, the line and the import.
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "om_mcp"
CONTRIBUTING = ROOT / "CONTRIBUTING.md"
STDLIB = frozenset(sys.stdlib_module_names) | {"__future__"}


@dataclass(frozen=True)
class Reach:
    """What a layer may import of another: all of it, only some modules, or all but some."""

    layer: str
    only: tuple[str, ...] = ()
    not_: tuple[str, ...] = ()

    def allows(self, module: str) -> bool:
        if self.only:
            return module in self.only
        return not any(_within(module, m) for m in self.not_)


@dataclass(frozen=True)
class Layer:
    number: int
    name: str
    modules: tuple[str, ...]  # "store/" (a folder), "limits.py" (a module), "__init__.py" (the package)
    may_import: tuple[Reach, ...]
    third_party: frozenset[str]

    def holds(self, path: Path) -> int:
        """How specifically this layer claims the file (0: not at all): the longest entry wins."""
        rel = path.relative_to(PACKAGE).as_posix()
        return max((len(m) for m in self.modules if rel == m or (m.endswith("/") and rel.startswith(m))), default=0)


def contract() -> list[Layer]:
    """The table under "## Layers" in CONTRIBUTING.md, in its order."""
    text = CONTRIBUTING.read_text()
    section = text[text.index("\n## Layers\n") :]
    section = section[: section.index("\n## ", 1)]
    rows = [line for line in section.splitlines() if re.match(r"\|\s*\d+\s*\|", line)]
    layers = []
    for row in rows:
        number, name, modules, _job, may, third = (cell.strip() for cell in row.strip().strip("|").split("|"))
        layers.append(
            Layer(
                int(number),
                _plain(name),
                tuple(_plain(m) for m in modules.split(",")),
                tuple(_reaches(may)),
                frozenset(_plain(p) for p in third.split(",") if _plain(p) not in ("", "—")),
            )
        )
    return layers


def _plain(cell: str) -> str:
    return cell.replace("`", "").strip()


def _reaches(cell: str) -> list[Reach]:
    cell = _plain(cell)
    out = []
    for match in re.finditer(r"([a-z_]+)(?:\s*\((only|not) ([^)]*)\))?", cell):
        name, kind, listed = match.groups()
        modules = tuple(_plain(m) for m in (listed or "").split(",") if m.strip())
        out.append(Reach(name, only=modules if kind == "only" else (), not_=modules if kind == "not" else ()))
    return out


def _within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) for every import in the file: at the top, inside a function, or for type
    checking only (a type named across layers couples them as surely as a call); relative imports
    resolved; and those made by name at run time (`dynamic_imports`)."""
    return imports_in(path.read_text(), module_name(path), path.name == "__init__.py")


def imports_in(source: str, module: str, is_package: bool = False) -> list[tuple[int, str]]:
    """`imports` of a module's source, given its dotted name."""
    tree = ast.parse(source, module)
    package = module if is_package else module.rpartition(".")[0]
    out = dynamic_imports(tree, module)
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


IMPORTERS = {"import_module", "__import__", "face", "later"}  # the last two: om_mcp/lazy.py's faces


def dynamic_imports(tree: ast.Module, module: str) -> list[tuple[int, str]]:
    """The modules a file imports by name at run time (`importlib.import_module`, `__import__`): a
    lazy face, a registry, the CLI's commands. In a file that makes such a call, each string constant
    that names one of our modules is an import of it, and so is a name built by the call itself from a
    literal prefix (`f"om_mcp.commands.{name}"`, `f"{__name__}.{home}"`) and any of the file's constants."""
    calls = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and (getattr(node.func, "attr", None) in IMPORTERS or getattr(node.func, "id", None) in IMPORTERS)
    ]
    if not calls:
        return []
    constants = [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value.isidentifier()
        or isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and re.fullmatch(r"[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)+", node.value)
    ]
    prefixes = {
        f"{p}." if p else "" for p in (_literal_prefix(c.args[0], module) for c in calls if c.args) if p is not None
    }
    found = []
    for line, value in constants:
        for prefix in prefixes | {""}:
            name = prefix + value
            if name.startswith("om_mcp.") and _is_module(name):
                found.append((line, name))
    return found


def _literal_prefix(node: ast.expr, module: str) -> str | None:
    """The package a run-time import's name is built under ("" for a whole name held elsewhere), or None."""
    if isinstance(node, ast.Name) and node.id == "__name__":  # a lazy face's homes: relative to the module
        return module
    if not isinstance(node, ast.JoinedStr):
        return ""
    text = ""
    for part in node.values:
        if isinstance(part, ast.Constant):
            text += str(part.value)
        elif isinstance(part, ast.FormattedValue) and getattr(part.value, "id", None) == "__name__":
            text += module
        else:
            break
    return text.rstrip(".") if text.endswith(".") else None


def _is_module(name: str) -> bool:
    path = PACKAGE.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def layer_of(path: Path, layers: list[Layer]) -> Layer | None:
    claims = [(layer.holds(path), layer) for layer in layers]
    best = max(claims, key=lambda c: c[0])
    return best[1] if best[0] else None


def _module_path(module: str) -> Path:
    path = PACKAGE.parent.joinpath(*module.split("."))
    return path / "__init__.py" if (path / "__init__.py").exists() else path.with_suffix(".py")


def breaks(layers: list[Layer]) -> tuple[list[str], set[tuple[str, str]], set[tuple[str, str]]]:
    """The contract's breaks, and what the code uses of it: (layer, layer) and (layer, package)."""
    by_name = {layer.name: layer for layer in layers}
    problems: list[str] = []
    used_layers: set[tuple[str, str]] = set()
    used_packages: set[tuple[str, str]] = set()
    for path in sources():
        here = layer_of(path, layers)
        where = path.relative_to(ROOT).as_posix()
        if here is None:
            problems.append(f"{where}: in no layer of CONTRIBUTING.md's table")
            continue
        for line, target in imports(path):
            top = target.split(".")[0]
            if top != "om_mcp":
                if top in STDLIB:
                    continue
                used_packages.add((here.name, top))
                if top not in here.third_party:
                    problems.append(f"{where}:{line} imports {target}: {here.name} may not load {top}")
                continue
            there = layer_of(_module_path(target), layers)
            if there is None or there is here:
                continue
            reach = next((r for r in here.may_import if r.layer == there.name), None)
            used_layers.add((here.name, there.name))
            if reach is not None and reach.allows(target):
                continue
            why = f"{here.name} may not import {there.name}" if reach is None else f"{here.name} may not import it"
            problems.append(f"{where}:{line} imports {target}: {why}")
    for layer in layers:
        for reach in layer.may_import:
            if reach.layer not in by_name:
                problems.append(f"layer {layer.name} names {reach.layer!r}, which is no layer")
            elif by_name[reach.layer].number >= layer.number:
                problems.append(f"layer {layer.name} may import {reach.layer}, which is not below it")
    return problems, used_layers, used_packages


def test_the_layer_contract_is_an_order():
    layers = contract()
    assert [layer.number for layer in layers] == list(range(1, len(layers) + 1))
    assert len({layer.name for layer in layers}) == len(layers)
    problems, _, _ = breaks(layers)
    assert not [p for p in problems if p.startswith("layer ")], "\n".join(problems)


def test_each_layer_imports_only_what_the_contract_lets_it():
    problems, _, _ = breaks(contract())
    assert not problems, "\n".join(problems)


def test_the_contract_names_nothing_the_code_does_not_use():
    """A row that grants what no module takes says less than the truth: keep the table the graph."""
    layers = contract()
    _, used_layers, used_packages = breaks(layers)
    stale = [
        f"{layer.name} may import {reach.layer}"
        for layer in layers
        for reach in layer.may_import
        if (layer.name, reach.layer) not in used_layers
    ]
    stale += [
        f"{layer.name} may load {package}"
        for layer in layers
        for package in sorted(layer.third_party)
        if (layer.name, package) not in used_packages
    ]
    assert not stale, "\n".join(stale)


def test_the_backends_share_only_what_the_store_package_holds():
    problems = []
    for path in sources():
        name = module_name(path)
        for mine, theirs in (
            ("om_mcp.store.sqlite", "om_mcp.store.postgres"),
            ("om_mcp.store.postgres", "om_mcp.store.sqlite"),
        ):
            if _within(name, mine):
                problems += [
                    f"{path.relative_to(ROOT)}:{line} imports {t}" for line, t in imports(path) if _within(t, theirs)
                ]
    assert not problems, "\n".join(problems)


# SQL as it is written here: a statement keyword opening a string (or an f-string's first part).
SQL = re.compile(
    r"^\s*(SELECT|INSERT|UPDATE\s+\w+\s+SET|DELETE\s+FROM|PRAGMA|CREATE|ALTER|DROP|WITH\s+\w+\s+AS|BEGIN|COMMIT|ROLLBACK|VACUUM|ATTACH)\b"
)
DRIVER_CALLS = {"execute", "executemany", "executescript", "fetch", "fetchrow", "fetchval"}


def test_no_sql_outside_the_store():
    """SQL statements and driver calls live in `store/` (and `testing/`'s throwaway PostgreSQL)."""
    problems = []
    for path in sources():
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith(("store/", "testing/")):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and SQL.match(node.value):
                problems.append(f"om_mcp/{rel}:{node.lineno} SQL: {node.value.strip()[:60]!r}")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in DRIVER_CALLS:
                problems.append(f"om_mcp/{rel}:{node.lineno} calls .{node.func.attr}(): a driver's call")
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


def test_the_concept_table_names_files_that_exist():
    """CONTRIBUTING's "where each concept lives" stays true: every file or folder it names is there
    (a short name is read beside the row's previous path, as a person reads it)."""
    text = CONTRIBUTING.read_text()
    section = text[text.index("\n## Where each concept lives\n") :]
    section = section[: section.index("\n## ", 1)]
    missing = []
    for row in section.splitlines():
        near = PACKAGE
        for token in re.findall(r"`([^`]+)`", row.partition("|")[2].partition("|")[2]):
            if "<" in token or " " in token or not ("/" in token or token.endswith(".py")):
                continue
            head, brace, rest = token.partition("{")
            names, _, tail = rest.partition("}")
            for path in [head + name + tail for name in names.split(",")] if brace else [token]:
                bases = [ROOT] if path.startswith(("om_mcp/", "tests/", "benchmarks/", "docs/")) else [PACKAGE]
                bases += [near, *near.parents]
                found = next((base / path for base in bases if (base / path).exists()), None)
                if found is None:
                    missing.append(f"{path} (in: {row[:60]}...)")
                else:
                    near = found if found.is_dir() else found.parent
    assert not missing, "\n".join(missing)


# `Memory`'s parts that are the engine's insides: the server asks Memory for what they do.
ENGINE_INSIDES = frozenset({"observation", "worker", "store", "retrieval", "working_memory"})


def _facade() -> frozenset[str]:
    """What `Memory` offers: its methods and properties, and the parts `__init__` keeps, less its insides."""
    tree = ast.parse((PACKAGE / "engine" / "memory.py").read_text())
    memory = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Memory")
    names = {n.name for n in memory.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    for node in ast.walk(memory):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            if isinstance(node.ctx, ast.Store):
                names.add(node.attr)
    return frozenset(n for n in names if not n.startswith("_")) - ENGINE_INSIDES


def _is_memory(node: ast.expr) -> bool:
    return (isinstance(node, ast.Name) and node.id in ("memory", "opened")) or (
        isinstance(node, ast.Attribute) and node.attr == "memory"
    )


def test_the_server_reaches_the_engine_only_through_its_facade():
    facade = _facade()
    assert {"append_messages", "get_context", "events", "overview", "start_upkeep", "sampler"} <= facade
    problems = []
    for path in sources():
        if not module_name(path).startswith("om_mcp.server"):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Attribute) and _is_memory(node.value) and node.attr not in facade:
                problems.append(f"{path.relative_to(ROOT)}:{node.lineno} reaches Memory.{node.attr}")
    assert not problems, "\n".join(problems)


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


def test_an_import_made_by_name_at_run_time_counts_too():
    """`importlib.import_module` of a module the file names is an import like any other: the contract
    and the cycle check see it (a lazy face once hid a testing module's reach into the store)."""
    call = "import importlib\ndef load(n):\n    return importlib.import_module({})\n"
    named = call.format('"om_mcp.server.app"')
    assert (3, "om_mcp.server.app") in imports_in(named, "om_mcp.engine.planted")
    built = 'PARTS = ("tools",)\n' + call.format('f"om_mcp.server.{n}"')
    assert (1, "om_mcp.server.tools") in imports_in(built, "om_mcp.engine.planted")
    relative = 'HOMES = {"Memory": "memory"}\n' + call.format('f"{__name__}.{HOMES[n]}"')
    assert (1, "om_mcp.engine.memory") in imports_in(relative, "om_mcp.engine", is_package=True)
    assert imports_in(call.format("user_path"), "om_mcp.engine.x") == [(1, "importlib")]  # a user's hook: none of ours
    faced = (
        'from om_mcp.lazy import face\n__getattr__ = face(__name__, {"Memory": "memory", "Access": "om_mcp.store"})\n'
    )
    assert {(2, "om_mcp.engine.memory"), (2, "om_mcp.store")} <= set(
        imports_in(faced, "om_mcp.engine", is_package=True)
    )
    rules = 'from om_mcp.lazy import later\nforget = later("om_mcp.store.forget")\n'
    assert (2, "om_mcp.store.forget") in imports_in(rules, "om_mcp.store.operations")


def test_names_load_on_first_use_through_the_one_lazy_face():
    """A module whose names load on first use gets its `__getattr__` from `om_mcp/lazy.py` (`face`, or
    `later` for rules called by name), not a hand-written one: one place that imports by name, caches
    what it loaded and that the layer contract reads (issue 36)."""
    written = []
    for path in sources():
        tree = ast.parse(path.read_text(), str(path))
        written += [
            f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"
            for scope in [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef))]
            for node in ast.iter_child_nodes(scope)
            if isinstance(node, ast.FunctionDef) and node.name == "__getattr__" and path.name != "lazy.py"
        ]
    assert not written, f"hand-written lazy faces (use om_mcp.lazy.face): {written}"
