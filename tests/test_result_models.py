"""One family of result models: the status page's contract reuses the engine's shapes.

The MCP tools serialise `engine/results.py`; the page serialises `server/http/ui/contract.py`. A row
both show (a window, the hints, a thread, the log's groups and lines) is defined once, in the
engine, and the page adds its own fields by subclassing, so a field added to the row reaches both.
These tests enumerate both modules' models: a twin, by the same name or under another, fails them.
"""

from __future__ import annotations

import inspect
from types import ModuleType

from pydantic import BaseModel

from om_mcp.engine import results
from om_mcp.server.http.ui import contract


def _models(module: ModuleType) -> dict[str, type[BaseModel]]:
    return {
        name: value
        for name, value in vars(module).items()
        if inspect.isclass(value) and issubclass(value, BaseModel) and value is not BaseModel
    }


def _own(module: ModuleType) -> dict[str, type[BaseModel]]:
    """The models a module defines itself (not those it imports)."""
    return {name: m for name, m in _models(module).items() if m.__module__ == module.__name__}


def _shape(model: type[BaseModel]) -> dict[str, object]:
    return {name: field.annotation for name, field in model.model_fields.items()}


def test_the_contract_names_an_engine_shape_only_by_reusing_it():
    engine = _own(results)
    same_name = {name: m for name, m in _models(contract).items() if name in engine}
    assert same_name, "the contract reuses no engine shape: this test would hold nothing"
    twins = [name for name, m in same_name.items() if not issubclass(m, engine[name])]
    assert not twins, f"contract.py defines its own {twins}: import them from om_mcp.engine (extend to add fields)"


def test_no_contract_model_copies_an_engine_shape_under_another_name():
    """A page model that declares every field of an engine model (same names, same types) is that
    row again: it must subclass the engine's, not copy it."""
    copies = [
        f"{name} copies {shape_name}"
        for name, model in _own(contract).items()
        for shape_name, shape in _own(results).items()
        if len(shape.model_fields) >= 2
        and _shape(shape).items() <= _shape(model).items()
        and not issubclass(model, shape)
    ]
    assert not copies, f"{copies}: subclass the engine's model and add the page's fields"
