"""Fixtures shared by the whole suite. Builders live in tests/support/."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.configuration import set_hypothesis_home_dir
from support.backends import on_postgres, postgres_template, store_location  # noqa: F401
from support.postgres import postgres_server, postgres_url  # noqa: F401

from om_mcp.config import Config
from om_mcp.server import build_server

# The per-test time limit scaled by the machine's speed, and the run shared out on workers by default.
pytest_plugins = ["support.timeouts", "support.parallel"]

# Hypothesis keeps no example database, and its other files (a cache of constants) go to this process's own
# temporary folder: not into the checkout, not shared with another worker. No health check fails a test for
# generating data slowly on a loaded machine.
settings.register_profile("om-mcp", database=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("om-mcp")
_hypothesis_home = tempfile.mkdtemp(prefix="om-hypothesis-")
set_hypothesis_home_dir(_hypothesis_home)
atexit.register(shutil.rmtree, _hypothesis_home, True)

# A config file in the developer's home is no test's input: load_config() in this process finds no default
# file (children get their own HOME from support.processes.clean_env).
_config_home = tempfile.mkdtemp(prefix="om-config-")
os.environ["XDG_CONFIG_HOME"] = _config_home
atexit.register(shutil.rmtree, _config_home, True)

# The test PostgreSQL listens on loopback without TLS: skip asyncpg's TLS probe, whose
# unawaited future, when a connection is cut during it, surfaced as an error in a later test.
os.environ.setdefault("PGSSLMODE", "disable")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "om.db"


@pytest.fixture
def make_config(db_path: Path, request: pytest.FixtureRequest) -> Callable[..., Config]:
    """A config on the test's own database (a file, or the PostgreSQL database of a test run on
    both backends); keyword arguments are config keys. Observation is off unless a test turns it
    on (these tests exercise the tool surface)."""

    def make(**options: Any) -> Config:
        where = {"db_url": request.getfixturevalue("store_location")} if on_postgres() else {"db_path": str(db_path)}
        data = {**where, "observational_memory": {"enabled": False}}
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
