"""Shared fixtures and helpers for the server, transport and multi-process tests.

Test files that define their own `anyio_backend` fixture override this one.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Callable

import pytest
from mcp import Client

from om_mcp.config import Config
from om_mcp.server import build_server

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "om.db"


@pytest.fixture
def make_config(db_path: Path) -> Callable[..., Config]:
    """A config on the test's own database; keyword arguments are config keys."""

    def make(**options: Any) -> Config:
        # Observation calls a model; these tests exercise the tool surface only,
        # so they keep it off (and off the network) unless a test turns it on.
        data = {"db_path": str(db_path), "observational_memory": {"enabled": False}}
        data.update(options)
        return Config.model_validate(data)

    return make


@pytest.fixture
def make_server(make_config):
    def make(**options: Any):
        return build_server(make_config(**options))

    return make


@pytest.fixture
def server(make_server):
    return make_server()


def connect(server, mode: str = "auto") -> Client:
    """An in-process client: the 2026-07-28 era by default, the 2025-11-25 handshake in legacy."""
    if mode == "legacy":
        return Client(server, mode="legacy")  # raise_exceptions would raise inside the server task
    return Client(server, raise_exceptions=True)


async def ok(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """Call a tool that must succeed; returns its structured output."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, f"{tool} failed: {result.content[0].text if result.content else result}"
    assert result.structured_content is not None
    return result.structured_content


async def fail(client: Client, tool: str, **arguments: Any) -> str:
    """Call a tool that must fail; returns the error text."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, f"{tool} unexpectedly succeeded: {result.structured_content}"
    return result.content[0].text


def clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """An environment for a child server: tmp HOME/XDG_DATA_HOME, no OM_ variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OM_")}
    home = tmp_path / "home"
    data = tmp_path / "xdg-data"
    home.mkdir(exist_ok=True)
    data.mkdir(exist_ok=True)
    env.update(
        HOME=str(home),
        XDG_DATA_HOME=str(data),
        PYTHONUNBUFFERED="1",
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        LITELLM_OFFLINE_MODE="true",
    )
    env.update(extra)
    return env
