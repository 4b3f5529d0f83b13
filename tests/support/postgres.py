"""PostgreSQL fixtures: one throwaway server per test session, a fresh database per test.

    from support.postgres import postgres_server, postgres_url  # noqa: F401

    def test_something(postgres_url): ...   # postgresql://postgres@127.0.0.1:PORT/om_test_...

Tests that use them are skipped, with the reason, where no server can start
(no binaries, no account to run them as). With OM_TEST_POSTGRES=require (CI
sets it) they fail instead, so a broken install cannot pass as a green run.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from om_mcp.testing.postgres_server import START_TIMEOUT, PostgresServer, PostgresUnavailable


def _unavailable(error: PostgresUnavailable) -> None:
    reason = f"PostgreSQL unavailable: {error}"
    if os.environ.get("OM_TEST_POSTGRES") == "require":
        pytest.fail(f"{reason} (OM_TEST_POSTGRES=require)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    from support.timeouts import scaled  # a plugin of conftest's: imported once it is registered

    server = PostgresServer(start_timeout=scaled(START_TIMEOUT))  # this worker's own server
    try:
        server.start()
    except PostgresUnavailable as error:
        _unavailable(error)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> Iterator[str]:
    url = postgres_server.create_database()
    try:
        yield url
    finally:
        if postgres_server.running:
            postgres_server.drop_database(urlsplit(url).path.lstrip("/"))
