"""Fixtures shared by the whole suite. Builders live in tests/support/."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest

from om_mcp.config import Config
from om_mcp.server import build_server


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "om.db"


@pytest.fixture
def make_config(db_path: Path) -> Callable[..., Config]:
    """A config on the test's own database; keyword arguments are config keys.
    Observation is off unless a test turns it on (these tests exercise the tool surface)."""

    def make(**options: Any) -> Config:
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
