"""Every column of both backends is classified in the one registry (`om_mcp/store/registry.py`),
which the gate, forget and the tombstones read: a new column that is not classified fails here, so
no column holding what a person or a model wrote can be missed by the scan or by forget.

Both backends are migrated from nothing and their columns listed from the live schema
(`sqlite_master` and `PRAGMA table_xinfo`; `information_schema.columns`), hidden columns included.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from om_mcp.store import open_store, registry

pytestmark = pytest.mark.anyio


def sqlite_columns(path: Path) -> dict[str, set[str]]:
    conn = sqlite3.connect(path)
    try:
        tables = [n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        return {t: {r[1] for r in conn.execute(f"PRAGMA table_xinfo('{t}')")} for t in tables}
    finally:
        conn.close()


async def postgres_columns(url: str) -> dict[str, set[str]]:
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        out: dict[str, set[str]] = {}
        for r in await conn.fetch(
            "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'om'"
        ):
            out.setdefault(r["table_name"], set()).add(r["column_name"])
        return out
    finally:
        await conn.close()


def coverage(live: dict[str, set[str]], backend: str) -> tuple[list[str], list[str]]:
    """(columns of the live schema the registry does not classify, columns it classifies that are gone)."""
    known = registry.columns(backend)  # type: ignore[arg-type]
    missing = sorted(f"{t}.{c}" for t, cols in live.items() for c in cols - known.get(t, set()))
    stale = sorted(f"{t}.{c}" for t, cols in known.items() for c in cols - live.get(t, set()))
    return missing, stale


def test_the_registry_is_consistent():
    assert registry.check() == []
    said = {(c.table, c.column) for c in registry.said_columns()}
    # what a person or a model writes is classified said (a sample that must never drift to another kind)
    assert {
        ("messages", "parts"),
        ("threads", "title"),
        ("om_working_memory_history", "text"),
        ("om_groups", "text"),
        ("om_events", "payload"),
        ("model_health", "last_error"),
    } <= said


async def test_every_column_of_sqlite_is_classified(tmp_path):
    await (await open_store(str(tmp_path / "memory.db"))).close()  # every migration, from nothing
    live = sqlite_columns(tmp_path / "memory.db")
    missing, stale = coverage(live, "sqlite")
    total = sum(len(c) for c in live.values())
    assert total > 150  # the whole schema was read, FTS5's shadow tables included
    assert missing == [], f"columns no one classified in om_mcp/store/registry.py: {missing}"
    assert stale == [], f"the registry classifies columns SQLite does not have: {stale}"


async def test_every_column_of_postgres_is_classified(postgres_url):
    await (await open_store(postgres_url)).close()
    live = await postgres_columns(postgres_url)
    missing, stale = coverage(live, "postgres")
    assert sum(len(c) for c in live.values()) > 120
    assert missing == [], f"columns no one classified in om_mcp/store/registry.py: {missing}"
    assert stale == [], f"the registry classifies columns PostgreSQL does not have: {stale}"
