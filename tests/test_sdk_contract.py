"""The MCP SDK's internals om-mcp relies on (`om_mcp/server/sdk.py`'s `INTERNALS`), each held
against the installed SDK. An upgrade that moves one fails here first, with a message naming the
internal, what changed, and the function in `server/sdk.py` to adapt; the behaviour built on them is
tested elsewhere (tests/test_sdk_import.py, test_transports.py, test_tools.py)."""

from __future__ import annotations

import inspect
import subprocess
import sys
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path

import pytest
from mcp import Client
from mcp.server.mcpserver import Context, MCPServer

from om_mcp.server import sdk

ROOT = Path(__file__).resolve().parents[1]
MCP = version("mcp")
CHECKS: dict[str, Callable[[], str | None]] = {}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def check(internal: str) -> Callable[[Callable[[], str | None]], Callable[[], str | None]]:
    def register(function: Callable[[], str | None]) -> Callable[[], str | None]:
        CHECKS[internal] = function
        return function

    return register


def broken(internal: str, problem: str) -> str:
    return (
        f"mcp {MCP}: {internal}: {problem}; om_mcp/server/sdk.py {sdk.INTERNALS[internal]}() relies on it"
        " (adapt it there, or keep the pin in pyproject.toml below this release)"
    )


@check("the `mcp` package loads as a namespace of submodules without its __init__")
def _namespace() -> str | None:
    code = (
        "import sys; from om_mcp.server import sdk; sdk.import_server_side();"
        " import mcp.server.mcpserver, mcp.server.lowlevel;"
        " print(sorted(m for m in sys.modules if m.startswith('mcp.client')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        return f"the server side does not import without the package's __init__: {done.stderr.strip()[-300:]}"
    if done.stdout.strip() != "[]":
        return f"the server side imports the client package anyway: {done.stdout.strip()}"
    return None


@check("mcp.server.mcpserver.server.configure_logging, called by MCPServer()")
def _configure_logging() -> str | None:
    import mcp.server.mcpserver.server as module

    if not callable(getattr(module, "configure_logging", None)):
        return "the module has no configure_logging"
    calls = []
    original = module.configure_logging
    module.configure_logging = lambda *args, **kwargs: calls.append(args)  # type: ignore[attr-defined]
    try:
        MCPServer("contract")
    finally:
        module.configure_logging = original  # type: ignore[attr-defined]
    return None if calls else "MCPServer() no longer calls it (constructing() would be a no-op: keep or delete it)"


def _lowlevel() -> object | None:
    return getattr(MCPServer("contract"), "_lowlevel_server", None)


@check("MCPServer._lowlevel_server.add_request_handler(method, params_type, handler)")
def _add_request_handler() -> str | None:
    lowlevel = _lowlevel()
    if lowlevel is None:
        return "MCPServer has no _lowlevel_server"
    method = getattr(lowlevel, "add_request_handler", None)
    if method is None:
        return f"{type(lowlevel).__name__} has no add_request_handler"
    names = list(inspect.signature(method).parameters)
    return None if names[:3] == ["method", "params_type", "handler"] else f"its parameters are now {names}"


@check("MCPServer._lowlevel_server.run(read, write, initialization_options)")
def _run() -> str | None:
    lowlevel = _lowlevel()
    if lowlevel is None or not inspect.iscoroutinefunction(getattr(lowlevel, "run", None)):
        return "the low-level server has no async run()"
    names = list(inspect.signature(lowlevel.run).parameters)  # type: ignore[attr-defined]
    expected = ["read_stream", "write_stream", "initialization_options"]
    return None if names[:3] == expected else f"its parameters are now {names}"


@check("MCPServer._lowlevel_server.create_initialization_options()")
def _initialization_options() -> str | None:
    lowlevel = _lowlevel()
    create = getattr(lowlevel, "create_initialization_options", None)
    if create is None:
        return "the low-level server has no create_initialization_options"
    options = create()
    return None if getattr(options, "server_name", None) == "contract" else f"it returned {options!r}"


@check("ServerSession._connection, the connection whose `state` dict lasts")
def _connection() -> str | None:
    import anyio

    server = MCPServer("contract")
    seen: list[object] = []

    @server.tool()
    async def touch(ctx: Context) -> str:
        state = sdk.connection_state(ctx.session)
        seen.append(state)
        if isinstance(state, dict):
            state["count"] = state.get("count", 0) + 1
        return "ok"

    async def two_requests() -> None:
        async with Client(server, mode="legacy") as client:
            await client.call_tool("touch", {})
            await client.call_tool("touch", {})

    anyio.run(two_requests)
    if not all(isinstance(s, dict) for s in seen):
        return f"a legacy request's session shows no connection state dict ({seen!r})"
    if seen[0] is not seen[1] or seen[0].get("count") != 2:  # type: ignore[union-attr]
        return "the state is not the same dict across two requests of one connection"
    return None


def _manager() -> object:
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    return StreamableHTTPSessionManager(app=_lowlevel())  # type: ignore[arg-type]


@check("StreamableHTTPSessionManager._server_instances: session id -> transport")
def _server_instances() -> str | None:
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    if not isinstance(getattr(_manager(), "_server_instances", None), dict):
        return "the manager keeps no _server_instances dict"
    if "self._server_instances[" not in inspect.getsource(StreamableHTTPSessionManager):
        return "the manager no longer records a new session's transport there"
    return None


@check("StreamableHTTPSessionManager._session_creation_lock, held while a session opens")
def _session_creation_lock() -> str | None:
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    lock = getattr(_manager(), "_session_creation_lock", None)
    if not (hasattr(lock, "__aenter__") and hasattr(lock, "__aexit__")):
        return f"the manager's _session_creation_lock is {lock!r}, not an async lock"
    if "self._session_creation_lock" not in inspect.getsource(StreamableHTTPSessionManager._handle_stateful_request):
        return "the manager no longer opens sessions under it"
    return None


@check("StreamableHTTPSessionManager._discard_session(session_id, transport)")
def _discard_session() -> str | None:
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    method = getattr(StreamableHTTPSessionManager, "_discard_session", None)
    if method is None or not inspect.iscoroutinefunction(method):
        return "the manager has no async _discard_session"
    names = list(inspect.signature(method).parameters)
    return None if len(names) >= 3 else f"its parameters are now {names}"


def test_every_internal_relied_on_has_a_check():
    assert set(CHECKS) == set(sdk.INTERNALS)
    assert set(sdk.INTERNALS.values()) <= {name for name in dir(sdk) if callable(getattr(sdk, name))}


@pytest.mark.parametrize("internal", sorted(sdk.INTERNALS))
def test_the_installed_sdk_still_has(internal: str):
    problem = CHECKS[internal]()
    assert problem is None, broken(internal, problem)


def test_the_pin_is_the_minor_series_the_contract_was_checked_on():
    """pyproject.toml allows the SDK's minor series only: a new minor may move what is checked here."""
    pyproject = (ROOT / "pyproject.toml").read_text()
    major, minor = MCP.split(".")[:2]
    assert f'"mcp>={major}.{minor}.0,<{major}.{int(minor) + 1}"' in pyproject
