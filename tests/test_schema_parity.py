"""SQLite's migrations and PostgreSQL's schema give a memory the same tables, columns, keys and
NOT NULLs, once each is migrated to the latest version from nothing.

The rules are written once over both (`store/`), and `om-mcp migrate` copies the columns both
sides have (`store/copy_tables.py`): a column one side lacks would be dropped on the way without
a word. What each backend keeps for itself is named below, with why.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from om_mcp.store import open_store

pytestmark = pytest.mark.anyio

# Each backend's own: its search index (SQLite's FTS5 tables and their shadow tables; PostgreSQL's
# tsvector table and term statistics), and the bookkeeping the other does without a table
# (SQLite: AUTOINCREMENT's counters; PostgreSQL: the application id and schema version SQLite keeps
# in its header, and event ids handed out in commit order).
SQLITE_OWN = {"sqlite_sequence", "messages_fts_scopes", "messages_fts_vocab"}
SQLITE_OWN_PREFIXES = ("messages_fts", "om_groups_fts")  # an FTS5 table and its _config, _data, ... shadows
POSTGRES_OWN = {"messages_fts", "search_stats", "search_terms", "om_meta", "om_counters"}
# Columns of PostgreSQL's index kept on the group row itself (SQLite's are in om_groups_fts).
POSTGRES_OWN_COLUMNS = {("om_groups", "doclen"), ("om_groups", "tsv")}
# A SQLite column's declared type, and the PostgreSQL types that store the same values.
SAME_VALUES = {
    "TEXT": {"text"},
    "INTEGER": {"integer", "bigint", "boolean"},
    "REAL": {"double precision"},
    "BLOB": {"bytea", "USER-DEFINED"},  # an embedding: bytes, or pgvector's vector
}

Column = tuple[str, bool, bool]  # (declared type, NOT NULL, part of the primary key)


def sqlite_schema(path: Path) -> dict[str, dict[str, Column]]:
    conn = sqlite3.connect(path)
    try:
        tables = [name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        out = {}
        for table in tables:
            if table in SQLITE_OWN or table.startswith(SQLITE_OWN_PREFIXES):
                continue
            out[table] = {
                # A primary key is NOT NULL on both sides (SQLite only enforces it for INTEGER keys).
                name: (kind.upper(), bool(notnull) or pk > 0, pk > 0)
                for _, name, kind, notnull, _, pk, _ in conn.execute(f"PRAGMA table_xinfo('{table}')")
            }
        return out
    finally:
        conn.close()


async def postgres_schema(url: str) -> dict[str, dict[str, Column]]:
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        keys = {
            (r["table_name"], r["column_name"])
            for r in await conn.fetch(
                "SELECT k.table_name, k.column_name FROM information_schema.table_constraints c"
                " JOIN information_schema.key_column_usage k ON k.constraint_name = c.constraint_name"
                " AND k.table_schema = c.table_schema AND k.table_name = c.table_name"
                " WHERE c.constraint_type = 'PRIMARY KEY' AND c.table_schema = 'om'"
            )
        }
        out: dict[str, dict[str, Column]] = {}
        for r in await conn.fetch(
            "SELECT table_name, column_name, data_type, is_nullable FROM information_schema.columns"
            " WHERE table_schema = 'om' ORDER BY table_name, ordinal_position"
        ):
            table, name = r["table_name"], r["column_name"]
            if table in POSTGRES_OWN or (table, name) in POSTGRES_OWN_COLUMNS:
                continue
            out.setdefault(table, {})[name] = (r["data_type"], r["is_nullable"] == "NO", (table, name) in keys)
        return out
    finally:
        await conn.close()


async def test_both_backends_migrated_to_the_latest_version_have_the_same_tables_and_columns(tmp_path, postgres_url):
    for location in (str(tmp_path / "memory.db"), postgres_url):
        await (await open_store(location)).close()  # a new database: every migration up to the latest
    lite, pg = sqlite_schema(tmp_path / "memory.db"), await postgres_schema(postgres_url)

    assert sorted(lite) == sorted(pg)
    assert {"messages", "om_records", "om_events", "om_leases"} <= set(lite)  # the memory's tables are compared
    for table in sorted(lite):
        assert sorted(lite[table]) == sorted(pg[table]), table
        for name, (kind, notnull, key) in lite[table].items():
            pg_kind, pg_notnull, pg_key = pg[table][name]
            assert pg_kind in SAME_VALUES[kind], f"{table}.{name}: SQLite {kind}, PostgreSQL {pg_kind}"
            assert (notnull, key) == (pg_notnull, pg_key), f"{table}.{name}: NOT NULL, primary key"
