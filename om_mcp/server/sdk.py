"""Importing the MCP SDK for a server that is only a server.

Two things in mcp 2.3 cost a stdio server start-up time for nothing it uses:
* `mcp/__init__.py` imports the whole client package (the client, its session group,
  the stdio and HTTP client transports: about 25 modules, half of the SDK's own import
  time beside the protocol types), which a server never touches;
* `MCPServer()` calls `configure_logging`, which imports `rich` (its console and logging
  handler) only to hand them to `logging.basicConfig`, which does nothing once logging
  is configured, as `om-mcp serve` has done by then.

`import_server_side()` installs the `mcp` package without running its `__init__`, so
`mcp.server...` imports load the server side alone; the package's own names (`mcp.Client`
and the rest) load on first use, by running that `__init__` then. `constructing()` is
the context in which our server is built without the logging set-up. Both leave the SDK
as it is when its layout is not the one they know.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any


def import_server_side() -> None:
    """Before the first `mcp` import of a serving process: the package without its client."""
    if "mcp" in sys.modules:
        return
    spec = importlib.util.find_spec("mcp")
    if spec is None or spec.loader is None or not spec.submodule_search_locations:
        return
    package = importlib.util.module_from_spec(spec)
    loader = spec.loader

    def complete(name: str) -> Any:
        # Something asked for a name of the package itself: run its __init__ once, as a plain import would.
        del package.__dict__["__getattr__"]
        loader.exec_module(package)
        return getattr(package, name)

    package.__getattr__ = complete  # type: ignore[method-assign]
    sys.modules["mcp"] = package


@contextmanager
def constructing() -> Iterator[None]:
    """Build an MCPServer without the SDK's logging set-up (see the module docstring)."""
    server_module: ModuleType | None = sys.modules.get("mcp.server.mcpserver.server")
    original = getattr(server_module, "configure_logging", None)
    if server_module is None or original is None:
        yield
        return
    server_module.configure_logging = lambda *args, **kwargs: None  # type: ignore[attr-defined]
    try:
        yield
    finally:
        server_module.configure_logging = original  # type: ignore[attr-defined]
