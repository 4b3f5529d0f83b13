"""One rule for where om-mcp keeps its files (`om_mcp/paths.py`), and every module that needs a
folder asks it: the server's database, the hook's log and settings, the launcher `om-mcp setup`
records, a desktop app's config folder, the `claude` login cache."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from om_mcp import paths
from om_mcp.config import Config
from om_mcp.engine.recorder import load_settings
from om_mcp.hosts.setup import Place
from om_mcp.hosts.setup.launch import record_command

PACKAGE = Path(paths.__file__).parent
DOC = PACKAGE.parent / "docs" / "files.md"


@pytest.mark.parametrize(("kind", "default"), [("DATA", ".local/share"), ("CONFIG", ".config"), ("CACHE", ".cache")])
def test_a_variable_wins_an_empty_one_counts_as_unset_and_home_comes_from_the_environment(
    tmp_path, monkeypatch, kind, default
):
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(tmp_path / "user"))  # what Path.home() reads
    assert paths.xdg_home(kind, {"HOME": str(home), f"XDG_{kind}_HOME": str(tmp_path / "x")}) == tmp_path / "x"
    assert paths.xdg_home(kind, {"HOME": str(home), f"XDG_{kind}_HOME": ""}) == home / default
    assert paths.xdg_home(kind, {}) == tmp_path / "user" / default
    assert paths.xdg_home(kind, {"HOME": str(home)}, home_dir=tmp_path / "place") == tmp_path / "place" / default


def test_every_module_that_needs_a_folder_follows_the_one_rule(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path / "home")}  # no XDG variable: each default under this HOME
    data, config = tmp_path / "home" / ".local" / "share" / "om-mcp", tmp_path / "home" / ".config" / "om-mcp"
    assert Config().resolved_db_path(env) == data / "memory.db"  # type: ignore[call-arg]
    assert paths.data_dir(env) == data  # the hook's and the worker's logs
    assert load_settings(env=env).db_path == str(data / "memory.db")  # what the hook records into
    assert list((tmp_path / "home" / ".cache" / "om-mcp").glob("hook-settings-*.json"))  # its cache
    assert record_command(["om-mcp"], env) == config / "om-mcp-command"
    place = Place(home=tmp_path / "home", platform="linux", env=env)
    assert place.app_data("Claude") == tmp_path / "home" / ".config" / "Claude"


def test_no_other_module_reads_an_xdg_variable() -> None:
    """Docstrings may name the variables; only paths.py reads them."""
    readers = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "paths.py" and path.parent == PACKAGE:
            continue
        tree = ast.parse(path.read_text(), str(path))
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                if "XDG_" in node.value:
                    readers.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    assert not readers, readers


def test_the_page_gives_each_folder_as_the_rule_resolves_it(tmp_path: Path) -> None:
    rows = {line.split("|")[1].strip(): line for line in DOC.read_text().splitlines() if line.startswith("| ")}
    home = tmp_path / "home"
    for kind, folder in (("DATA", paths.data_dir), ("CONFIG", paths.config_dir), ("CACHE", paths.cache_dir)):
        row = rows[kind.lower()]
        default = "~/" + str(folder({"HOME": str(home)}).relative_to(home))
        assert f"`$XDG_{kind}_HOME/om-mcp`, else `{default}`" in row, row
        assert folder({f"XDG_{kind}_HOME": str(tmp_path / "x")}) == tmp_path / "x" / "om-mcp"
