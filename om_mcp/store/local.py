"""The SQLite file opened directly, for a process that does one short job and exits (the host hooks,
`om-mcp ingest`, `doctor`'s checks): no event loop and no pool. Code outside `store/` reaches the
SQLite backend only through these names.

`read` and `write` run work written over the store's operations (`async def work(store, ...)`, `store`
an `operations.Transaction`: the same operations, and signatures, as `Store`'s) in one transaction on
the connection, synchronously: SQLite's driver completes every operation at once, so the work's
coroutine runs to its end in one step, with no event loop (`store/tx.py: run_sync`).

`admin`, `connect` and `on_read_only_filesystem` load on first use: they bring the async database
module along, which a hook (run on every prompt) must not pay for.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, ParamSpec, TypeVar

from om_mcp.lazy import face
from om_mcp.store.gate import Gate
from om_mcp.store.operations import Work, within
from om_mcp.store.sqlite import direct
from om_mcp.store.sqlite.driver import on_connection

P = ParamSpec("P")
R = TypeVar("R")

_LATER = {
    "admin": "om_mcp.store.sqlite",
    "connect": "om_mcp.store.sqlite.database",
    "on_read_only_filesystem": "om_mcp.store.sqlite.database",
}
__all__ = ["admin", "connect", "direct", "on_read_only_filesystem", "read", "write", "write_gated"]

if TYPE_CHECKING:
    from om_mcp.store.sqlite import admin
    from om_mcp.store.sqlite.database import connect, on_read_only_filesystem


def read(conn: sqlite3.Connection, work: Work[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """`work(store, *args, **kwargs)` on one snapshot of the file."""
    return direct.read(conn, on_connection(within(work, *args, **kwargs)))


def write(conn: sqlite3.Connection, work: Work[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """`work(store, *args, **kwargs)` in one write transaction (BEGIN IMMEDIATE ... COMMIT), all or nothing,
    through the gate of the built-in privacy rules (`write_gated` for the configured ones)."""
    return direct.write(conn, on_connection(within(work, *args, **kwargs)))


def write_gated(conn: sqlite3.Connection, gate: Gate | None, work: Work[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """`write`, with what is written scanned by `gate` (`om_mcp.store.gate_for(privacy settings)`)."""
    return direct.write(conn, on_connection(within(work, *args, **kwargs), gate))


__getattr__ = face(__name__, _LATER)
