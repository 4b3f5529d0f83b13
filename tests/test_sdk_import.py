"""`om-mcp serve` loads the SDK's server side only, and builds its server without the SDK's
logging set-up; whatever asks for the rest of the SDK still gets it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run(code: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    return out.stdout.split()


@pytest.mark.slow
def test_the_server_side_loads_without_the_client_package_and_the_rest_on_demand():
    code = (
        "import sys; from om_mcp.server import sdk; sdk.import_server_side();"
        " import mcp.server.mcpserver; from om_mcp.server import build_server;"
        " print('mcp.client' in sys.modules);"
        " from mcp import Client, StdioServerParameters; print('mcp.client' in sys.modules, Client.__name__)"
    )
    assert run(code) == ["False", "True", "Client"]


@pytest.mark.slow
def test_serve_builds_its_server_without_importing_rich():
    code = (
        "import sys, logging; logging.basicConfig(); from om_mcp.server import sdk; sdk.import_server_side();"
        " from om_mcp.config import Config; from om_mcp.server import build_server;"
        " import mcp.server.mcpserver.server as s; before = s.configure_logging;"
        " exec('with sdk.constructing(): server = build_server(Config())');"
        " import anyio; print('rich' in sys.modules, s.configure_logging is before, len(anyio.run(server.list_tools)))"
    )
    assert run(code) == ["False", "True", "9"]
