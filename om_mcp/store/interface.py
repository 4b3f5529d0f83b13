"""`Store`: every operation the engine may ask of a database, whatever the backend.

Each operation is one transaction: it sees one consistent state, and a write
is all or nothing. Rows come back as the typed rows of `rows.py`, never driver
rows. `SQLiteStore` and `PostgresStore` both inherit this class; the engine
knows nothing else about them.

The operations and their signatures are the rules' own (`operations.py` maps
each name to its rule once); written here is only what each backend supplies
itself, and `transaction` for work composed of several operations.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal, ParamSpec, TypeVar

from om_mcp.store.gate import Gate
from om_mcp.store.operations import Operations, Work, within
from om_mcp.store.rows import GroupHit, Listener, Stats
from om_mcp.store.search import SearchPlan, TermStats, TextHit

P = ParamSpec("P")
R = TypeVar("R")


class Store(Operations):
    """A memory's database: the operations (one transaction each), and what each backend supplies."""

    backend: Literal["sqlite", "postgres"]
    location: str  # the file path, or the URL without its password
    # What every write passes (store/gate.py): the scan with these privacy settings, the tombstones.
    # None: the built-in rules. `Memory` sets it from its configuration.
    gate: Gate | None = None

    async def transaction(self, work: Work[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """`await work(transaction, *args, **kwargs)` in one write transaction: every operation the
        work awaits on `transaction` (an `operations.Transaction`) commits with the others or not at
        all. On PostgreSQL a transaction that lost a race is run again from the start, so the work
        changes nothing outside the database."""
        return await self._write(within(work, *args, **kwargs))

    async def close(self) -> None:
        raise NotImplementedError

    # -- search (each backend's own index) ------------------------------------------------------
    async def search_messages(
        self, resource_id: str, plan: SearchPlan, *, thread_id: str | None = None, limit: int = 50
    ) -> tuple[list[TextHit], TermStats]:
        raise NotImplementedError

    async def search_groups(
        self, resource_id: str, match: str, *, thread_id: str | None = None, limit: int = 20
    ) -> list[GroupHit]:
        raise NotImplementedError

    # -- looking after the database ------------------------------------------------------------
    async def stats(self) -> Stats:
        raise NotImplementedError

    async def integrity(self) -> list[str]:
        raise NotImplementedError

    async def backup(self, target: str) -> int:
        raise NotImplementedError

    async def finish_erase(self, *, started: bool = False, wait: bool = True) -> bool:
        """End a pending erase (deleted text still in the file's old pages); True when none is left."""
        raise NotImplementedError

    # -- changes seen by other processes (PostgreSQL; nothing to do on SQLite) ----------------
    async def broadcast(self, message: dict[str, Any]) -> None:
        raise NotImplementedError

    async def listen(self, callback: Listener) -> Callable[[], Awaitable[None]]:
        raise NotImplementedError
