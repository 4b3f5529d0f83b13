"""A pool of asyncpg connections, and the one way operations run on it.

Every store operation is a plain async function of a connection that runs
whole in one transaction: writes in READ COMMITTED with row locks taken where
the SQLite version relied on its single writer, reads in one REPEATABLE READ
snapshot (SQLite's read transaction). A transaction that loses a deadlock or a
serialization race is retried whole; those are the only errors retried.

Each replica holds its own pool; nothing here is shared between processes but
the database itself. No advisory locks: a killed process leaves nothing held
(its transactions roll back when its connections close; its leases expire).
"""

from __future__ import annotations

import logging
import random
import re
from collections.abc import Awaitable, Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

import anyio

from om_mcp.store.errors import DatabaseRefused, StoreError, StoreUnavailable
from om_mcp.store.postgres.schema import SCHEMA
from om_mcp.store.urls import redact

log = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")
Op = Callable[Concatenate[Any, P], Awaitable[R]]

RETRIES = 8
RETRIED_STATES = {"40P01", "40001"}  # deadlock detected, serialization failure
POOL_MIN, POOL_MAX = 1, 10
SETTINGS = {
    "search_path": f"{SCHEMA}, public",
    "application_name": "om-mcp",
    # Backstops: a hung process cannot sit on row locks, a lost lock race does not wait forever.
    "idle_in_transaction_session_timeout": "60000",
    "lock_timeout": "30000",
}


def is_url(location: str) -> bool:
    return re.match(r"^postgres(ql)?://", location) is not None


def _driver():
    try:
        import asyncpg
    except ImportError:
        raise DatabaseRefused(
            "db_url is a PostgreSQL URL but the driver is not installed: pip install 'om-mcp[postgres]'"
        ) from None
    return asyncpg


class PgDatabase:
    def __init__(self, pool: Any, url: str):
        self.pool = pool
        self.url = url

    @classmethod
    async def open(cls, url: str, *, min_size: int = POOL_MIN, max_size: int = POOL_MAX) -> PgDatabase:
        asyncpg = _driver()
        try:
            pool = await asyncpg.create_pool(url, min_size=min_size, max_size=max_size, server_settings=SETTINGS)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as error:
            raise DatabaseRefused(f"cannot connect to {redact(url)}: {_one_line(error)}; check db_url") from None
        return cls(pool, url)

    async def write(self, op: Op[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        return await self._run(None, op, *args, **kwargs)

    async def read(self, op: Op[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        return await self._run("repeatable_read", op, *args, **kwargs)

    async def raw(self, op: Op[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Run `op` on a pooled connection with no transaction around it."""
        asyncpg = _driver()
        try:
            async with self.pool.acquire() as conn:
                return await op(conn, *args, **kwargs)
        except (OSError, asyncpg.PostgresConnectionError, asyncpg.InterfaceError) as error:
            raise _unavailable(error) from error

    async def _run(self, isolation: str | None, op: Op[P, R], *args: Any, **kwargs: Any) -> R:
        asyncpg = _driver()
        delay = 0.005
        for attempt in range(RETRIES):
            try:
                # Shielded: a cancelled caller must not leave a transaction half-sent on a pooled connection.
                with anyio.CancelScope(shield=True):
                    async with self.pool.acquire() as conn:
                        options = {"isolation": isolation, "readonly": True} if isolation else {}
                        async with conn.transaction(**options):
                            return await op(conn, *args, **kwargs)
            except asyncpg.PostgresError as error:
                if error.sqlstate not in RETRIED_STATES or attempt == RETRIES - 1:
                    raise _translated(error) from error
                log.debug("transaction %s lost a race (%s), retrying", getattr(op, "__name__", op), error.sqlstate)
                await anyio.sleep(delay * (1 + random.random()))
                delay = min(delay * 2, 0.2)
            except (OSError, asyncpg.PostgresConnectionError, asyncpg.InterfaceError) as error:
                raise _unavailable(error) from error
        raise AssertionError("unreachable")

    async def close(self) -> None:
        try:
            with anyio.fail_after(10):
                await self.pool.close()
        except TimeoutError:
            self.pool.terminate()


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__


def _unavailable(error: BaseException) -> StoreUnavailable:
    return StoreUnavailable(f"the PostgreSQL server cannot be reached ({_one_line(error)}); nothing was written")


def _translated(error: Any) -> Exception:
    """Errors the user can act on, said plainly; the rest pass through."""
    state = getattr(error, "sqlstate", "")
    if state in ("53100", "53200"):  # disk full, out of memory
        return StoreUnavailable(
            f"the PostgreSQL server cannot take the write ({_one_line(error)}); nothing was written"
        )
    if state == "22021":  # a NUL character: PostgreSQL text cannot hold one (message text can: see messages.py)
        return StoreError(
            "the text contains a NUL character (\\x00), which PostgreSQL cannot store: remove it; nothing was written"
        )
    if state == "25006":  # read-only transaction (a standby, or default_transaction_read_only)
        return StoreUnavailable("the PostgreSQL server is read-only (a standby?): point db_url at the primary")
    return error
