"""Rows for any table the registry (`om_mcp/store/registry.py`) classifies: what the tests that
enumerate its said columns write (through the store's write layer, as any operation would)."""

from __future__ import annotations

import json
from typing import Any

from om_mcp.store import Transaction, registry

RESOURCE = "r"


def of_type(kind: str, n: int) -> Any:
    """A value of a column's declared type (SQLite's or PostgreSQL's name for it)."""
    kind = kind.lower()
    if "int" in kind:
        return n
    if "bool" in kind:
        return False
    if "real" in kind or "double" in kind:
        return 1.0
    return f"v{n}"


async def columns(store: Any, table: str) -> list[tuple[str, str, bool]]:
    """(name, type, needs a value) of each column of `table` on the live schema."""

    async def read(t: Transaction) -> list[tuple[str, str, bool]]:
        if store.backend == "sqlite":
            rows = await t.tx.fetch(f"SELECT name, type, \"notnull\", dflt_value, pk FROM pragma_table_info('{table}')")
            rowid = [r[4] and r[1].upper() == "INTEGER" for r in rows]  # numbered by SQLite
            return [(r[0], r[1], bool(r[2]) and r[3] is None and not auto) for r, auto in zip(rows, rowid)]
        rows = await t.tx.fetch(
            "SELECT column_name, data_type, is_nullable = 'NO' AND column_default IS NULL AND is_identity = 'NO'"
            " AND is_generated = 'NEVER' FROM information_schema.columns WHERE table_schema = 'om' AND table_name = $1",
            table,
        )
        return [(r[0], r[1], bool(r[2])) for r in rows]

    return await store.transaction(read)


async def row(store: Any, table: str, n: int, resource: str = RESOURCE) -> dict[str, Any]:
    """Values for a new row of `table` that belongs to `resource` (its owner columns say so), its key
    given even where the database would number it, every other NOT NULL column a value of its type."""
    entry = registry.TABLES[table]
    owner = {"resource_id": resource, "record_key": f"resource:{resource}", "scope": "resource", "owner": resource}
    if table == "resources":
        owner["id"] = resource
    if table == "om_records":
        owner["key"] = f"resource:{resource}"
    values: dict[str, Any] = {}
    for name, kind, needed in await columns(store, table):
        if name in owner:
            values[name] = owner[name]
        elif needed or name in entry.key:
            values[name] = of_type(kind, 1000 + n if name in entry.key else n)
    return values


def said_value(form: str, text: str) -> str:
    """`text` as a said column of that form holds it (JSON with a secret-named key too)."""
    if form == "json":
        return json.dumps({"note": text, "password": "hunter2hunter2"})
    return f"# Notes\n- {text}"


async def insert(store: Any, table: str, values: dict[str, Any]) -> None:
    async def write(t: Transaction) -> None:
        marks = ", ".join(f"${i}" for i in range(1, len(values) + 1))
        await t.tx.execute(f"INSERT INTO {table} ({', '.join(values)}) VALUES ({marks})", *values.values())

    await store.transaction(write)


async def read(store: Any, table: str, column: str, key: dict[str, Any]) -> Any:
    async def get(t: Transaction) -> Any:
        where = " AND ".join(f"{k} = ${i + 1}" for i, k in enumerate(key))
        return await t.tx.fetchval(f"SELECT {column} FROM {table} WHERE {where}", *key.values())

    return await store.transaction(get)
