"""Every use om-mcp makes of the MCP SDK's internals, in one module.

The SDK's public API covers almost all the server needs. What it does not, this module
reaches behind it for, and nothing else in om-mcp does:

* `import_server_side()`: `mcp/__init__.py` imports the whole client package (the client,
  its session group, the stdio and HTTP client transports: about 25 modules, half of the
  SDK's own import time beside the protocol types), which a server never touches. This
  installs the `mcp` package without running its `__init__`, so `mcp.server...` imports load
  the server side alone; the package's own names (`mcp.Client` and the rest) load on first
  use, by running that `__init__` then.
* `constructing()`: `MCPServer()` calls `configure_logging`, which imports `rich` (its console
  and logging handler) only to hand them to `logging.basicConfig`, which does nothing once
  logging is configured, as `om-mcp serve` has done by then.
* `add_request_handler()`: MCPServer has no handler for `logging/setLevel`,
  `resources/subscribe`, `resources/unsubscribe`, and its `subscriptions/listen` honours every
  URI; handlers are added on its low-level server (`MCPServer._lowlevel_server`, as the SDK's
  migration guide itself recommends).
* `serve_streams()`: our stdio transport hands its streams to that low-level server, as
  `MCPServer.run_stdio_async` does.
* `connection_of()`: a request's session is a per-request proxy; the connection behind it
  (`ServerSession._connection`) lasts, and its public `state` dict is where a legacy client's
  log level and subscriptions are kept.
* `live_sessions()`, `session_creation_lock()`, `discard_session()`: mcp 2.3 has no public way
  to list or end the streamable HTTP manager's legacy sessions, which fair slots need
  (`server/http/sessions.py`): its table (`_server_instances`), the lock it opens sessions
  under (`_session_creation_lock`) and the step that forgets one (`_discard_session`).

`INTERNALS` names each of these; `tests/test_sdk_contract.py` checks every one against the
installed SDK, so a release that moves one fails that test first, naming what moved and the
function here to change. Each function leaves the SDK as it is when its layout is not the one
it knows (the SDK's own behaviour then, never a crash).
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

# What om-mcp relies on beyond the SDK's public API -> the function here that relies on it.
INTERNALS = {
    "the `mcp` package loads as a namespace of submodules without its __init__": "import_server_side",
    "mcp.server.mcpserver.server.configure_logging, called by MCPServer()": "constructing",
    "MCPServer._lowlevel_server.add_request_handler(method, params_type, handler)": "add_request_handler",
    "MCPServer._lowlevel_server.run(read, write, initialization_options)": "serve_streams",
    "MCPServer._lowlevel_server.create_initialization_options()": "serve_streams",
    "ServerSession._connection, the connection whose `state` dict lasts": "connection_of",
    "StreamableHTTPSessionManager._server_instances: session id -> transport": "live_sessions",
    "StreamableHTTPSessionManager._session_creation_lock, held while a session opens": "session_creation_lock",
    "StreamableHTTPSessionManager._discard_session(session_id, transport)": "discard_session",
}


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


def _lowlevel(server: Any) -> Any:
    return server._lowlevel_server


def add_request_handler(server: Any, method: str, params_type: type, handler: Any) -> None:
    """Answer `method` on `server` (an MCPServer) with `handler(ctx, params)`, replacing the
    SDK's own handler if it has one."""
    _lowlevel(server).add_request_handler(method, params_type, handler)


async def serve_streams(server: Any, read: Any, write: Any) -> None:
    """Serve `server` over a pair of message streams until the read stream ends."""
    lowlevel = _lowlevel(server)
    await lowlevel.run(read, write, lowlevel.create_initialization_options())


def connection_of(session: Any) -> Any | None:
    """The connection behind a request's session (None if the SDK has none to show)."""
    return getattr(session, "_connection", None)


def connection_state(session: Any) -> dict[str, Any] | None:
    """The scratch dict that lasts as long as the session's connection (legacy era)."""
    return getattr(connection_of(session), "state", None)


def live_sessions(manager: Any) -> dict[str, Any]:
    """Session id -> transport of a streamable HTTP manager's open legacy sessions (the SDK's own dict)."""
    live: dict[str, Any] = manager._server_instances
    return live


def session_creation_lock(manager: Any) -> Any:
    """The lock the manager holds while it opens a session (an async context manager)."""
    return manager._session_creation_lock


async def discard_session(manager: Any, session_id: str, transport: Any) -> None:
    """Forget an ended session: its id answers 404 from now on."""
    await manager._discard_session(session_id, transport)
