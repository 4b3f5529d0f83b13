"""The SQLite file opened directly, for a process that does one short job and exits (the host hooks,
`om-mcp ingest`, `doctor`'s checks): no event loop and no pool; the store's shared rules run on its
synchronous driver. Code outside `store/` reaches the SQLite backend only through these names.

`admin`, `connect` and `on_read_only_filesystem` load on first use: they bring the async database
module along, which a hook (run on every prompt) must not pay for.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from om_mcp.store.sqlite import direct
from om_mcp.store.sqlite.driver import on_connection, run

_LATER = {
    "admin": "om_mcp.store.sqlite",
    "connect": "om_mcp.store.sqlite.database",
    "on_read_only_filesystem": "om_mcp.store.sqlite.database",
}
__all__ = ["admin", "connect", "direct", "on_connection", "on_read_only_filesystem", "run"]

if TYPE_CHECKING:
    from om_mcp.store.sqlite import admin
    from om_mcp.store.sqlite.database import connect, on_read_only_filesystem


def __getattr__(name: str) -> Any:
    home = _LATER.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(home)
    return getattr(module, name) if hasattr(module, name) else importlib.import_module(f"{home}.{name}")
