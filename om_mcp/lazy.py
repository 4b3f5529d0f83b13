"""Names that load on first use: the one way a module keeps an import off the paths that do not need it
(the hook runs on every prompt, `om-mcp status` answers at a shell prompt, a stdio server answers
`initialize` before the observation engine loads).

* `face(__name__, homes)` is a module's `__getattr__` (PEP 562): each name of `homes` is imported from its
  home module the first time it is asked for, then kept on the module, so every later read is a plain one.
* `later(module)` stands for a module whose functions are only called: each function is looked up, and
  its module imported, when it is first called (the store's rules, mapped to operations at class time).

Type checkers see the names through an `if TYPE_CHECKING:` import beside the face.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def face(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """The `__getattr__` of the module `package`. A home is a whole name (`om_mcp.store`) or one relative
    to `package` (`memory` for `om_mcp.engine.memory`); the name is the home's attribute of that name, or
    else its submodule of that name (`store.local.admin`)."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(home if home.startswith("om_mcp.") else f"{package}.{home}")
        value = getattr(module, name) if hasattr(module, name) else importlib.import_module(f"{module.__name__}.{name}")
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__


class later:  # noqa: N801 - it reads as the module it stands for
    """A module imported when one of its functions is first called."""

    def __init__(self, module: str):
        self._module = module

    def __getattr__(self, name: str) -> Callable[..., Any]:
        module = self._module

        def call(*args: Any, **kwargs: Any) -> Any:
            return getattr(importlib.import_module(module), name)(*args, **kwargs)

        call.__name__ = call.__qualname__ = name
        return call
