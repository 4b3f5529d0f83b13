"""`Tx`: one transaction as the storage rules see it, whatever the backend.

The rules of every operation (`threads.py`, `messages.py`, `observations.py`,
`commits.py`, `coordination.py`, `transfer.py` in this package) are written once,
as `async def op(tx, ...)` over this small interface: asyncpg's four calls
(`fetch`, `fetchrow`, `fetchval`, `execute`, `executemany`), statements in
PostgreSQL's dialect, and a few methods for the statements that truly differ
(how messages get their seqs and search index, the lock-free due-work scan, JSON
paths, deleting from the search index, a lock on one key).

Each backend supplies a driver:
* PostgreSQL (`store/postgres/driver.py`) awaits asyncpg on the event loop;
* SQLite (`store/sqlite/driver.py`) runs each statement at once on its
  `sqlite3.Connection`: its methods are coroutines that never suspend, so a whole
  operation runs to completion in one `send` (`run_sync`), on the store's write
  thread or in the hook's process, with no event loop. This is httpx's
  `auth_flow` idea (one flow, a sync and an async driver) with the coroutine
  protocol as the generator: the rules read as plain async code.

SQLite's driver rewrites the few PostgreSQL spellings the rules use (numbered
`$n` placeholders, `= ANY ($n::text[])`, `GREATEST`, row locks, casts); a list
parameter reaches SQLite as JSON for that `ANY`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Sequence
from typing import Any, TypeVar

from om_mcp.store.gate import Gate, GateError, gate_for
from om_mcp.store.rows import NewMessage

T = TypeVar("T")
Row = Sequence[Any]


class Tx:
    """The statements of one transaction; see the module docstring.

    Every statement passes the gate (`store/gate.py`) before its driver runs it: a value bound for
    a column the registry classifies as said is scanned and checked against the tombstones there.
    A driver implements the underscored methods; the rules call the public ones."""

    backend: str
    gate: Gate | None = None  # the store's gate (its privacy settings); None: the built-in rules
    forgotten_phrases: Any = False  # this transaction's forgotten phrases once read (store/gate.py)

    @property
    def _gate(self) -> Gate:
        return self.gate if self.gate is not None else gate_for(None)

    def gate_of(self) -> Gate:
        """The gate this transaction's writes pass."""
        return self._gate

    async def fetch(self, sql: str, *args: Any) -> list[Row]:
        return await self._fetch(sql, *await self._gate.admit(self, sql, args))

    async def fetchrow(self, sql: str, *args: Any) -> Row | None:
        return await self._fetchrow(sql, *await self._gate.admit(self, sql, args))

    async def fetchval(self, sql: str, *args: Any) -> Any:
        return await self._fetchval(sql, *await self._gate.admit(self, sql, args))

    async def execute(self, sql: str, *args: Any) -> int:
        """Run a statement; the number of rows it changed."""
        return await self._execute(sql, *await self._gate.admit(self, sql, args))

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        await self._executemany(sql, await self._gate.admit_many(self, sql, rows))

    async def insert_messages(
        self, thread_id: str, resource_id: str, counted_by: int, fresh: list[NewMessage]
    ) -> list[int]:
        """Insert and index new messages, in order; their seqs. Each row was scanned (by the intake,
        else here) and seen by the tombstone check of the append rule (`tombstones.keep`)."""
        unchecked = [m.id for m in fresh if not m.checked]
        if unchecked:
            raise GateError(f"messages {unchecked[:3]} were not checked against the tombstones (tombstones.keep)")
        rows = [self._gate.message_row(m) for m in fresh]
        return await self._insert_messages(thread_id, resource_id, counted_by, rows)

    async def index_groups(self, key: str, groups: list[tuple[str, str]]) -> None:
        """Make new observation groups, (id, text), searchable: their text as the gate stored it."""
        gated = [(gid, await self._gate.text_of(self, "om_groups", "text", key, text)) for gid, text in groups]
        await self._index_groups(key, gated)

    # -- what each driver implements --------------------------------------------------------------

    async def _fetch(self, sql: str, *args: Any) -> list[Row]:
        raise NotImplementedError

    async def _fetchrow(self, sql: str, *args: Any) -> Row | None:
        raise NotImplementedError

    async def _fetchval(self, sql: str, *args: Any) -> Any:
        raise NotImplementedError

    async def _execute(self, sql: str, *args: Any) -> int:
        raise NotImplementedError

    async def _executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        raise NotImplementedError

    async def _insert_messages(
        self, thread_id: str, resource_id: str, counted_by: int, fresh: list[NewMessage]
    ) -> list[int]:
        raise NotImplementedError

    async def _index_groups(self, key: str, groups: list[tuple[str, str]]) -> None:
        raise NotImplementedError

    async def scan(self, sql: str, *args: Any, until: Callable[[Row], bool]) -> None:
        """Read rows one at a time until `until(row)` says enough: a bounded read of a long range
        (a window found newest first) costs what it reads, not the whole range."""
        await self._scan(sql, *await self._gate.admit(self, sql, args), until=until)

    async def _scan(self, sql: str, *args: Any, until: Callable[[Row], bool]) -> None:
        raise NotImplementedError

    # -- what truly differs between the backends --------------------------------------------------

    async def epoch(self) -> float:
        """Now, in seconds since the epoch, by the clock every process on the database shares."""
        raise NotImplementedError

    async def lock_key(self, key: str) -> None:
        """Hold `key` until the transaction ends, so writers that look before they write queue on it."""
        raise NotImplementedError

    async def forget_index(self, thread_ids: list[str], group_ids: list[str]) -> None:
        """Take deleted threads' messages and deleted groups out of the search index."""
        raise NotImplementedError

    async def unindex_messages(self, thread_id: str, seqs: list[int]) -> list[int]:
        """Take messages about to be deleted out of the search index; the seqs of other messages
        of the thread whose entries went with them, for `reindex_messages` once the rows are gone."""
        raise NotImplementedError

    async def reindex_messages(self, thread_id: str, seqs: list[int]) -> None:
        """Index again the messages `unindex_messages` took out with the deleted ones."""
        raise NotImplementedError

    async def purge(self, resource_id: str | None = None) -> None:
        """After a deletion (of a whole resource: `resource_id`): the deleted words leave the database."""
        raise NotImplementedError

    async def next_event_ids(self, count: int) -> int | None:
        """The first of `count` event ids handed out in commit order; None: the table numbers them."""
        raise NotImplementedError

    async def due_rows(self, min_pending: int, min_observation_tokens: int) -> list[Row]:
        """(key, resource id, busiest thread, pending tokens) of records that may need a cycle."""
        raise NotImplementedError

    def json_field(self, column: str, name: str) -> str:
        """SQL for the text of a JSON object column's top-level field."""
        raise NotImplementedError

    async def rank_vectors(
        self, where: str, args: list[Any], query: list[float], limit: int | None
    ) -> list[Row] | None:
        """(kind, ref, cosine) of the embeddings `where` picks, nearest `query` first, ranked in the
        database; None where the database cannot (the rules compare them in Python)."""
        raise NotImplementedError

    def vector(self, values: list[float]) -> Any:
        """A vector as the `embeddings.vector` column takes it."""
        raise NotImplementedError

    # Does `contains` fold the column as store/scrub.py's `fold` does (then its needle is the folded
    # phrase itself), or lower ASCII only (then the needle is `scrub.preselect`'s ASCII run)?
    folds_exactly: bool = False

    def contains(self, column: str, text: str) -> str:
        """SQL preselecting rows whose `column` holds `text` (SQL: a placeholder holding a needle made
        by `scrub.preselect`, already folded); the rules check each row again with `scrub.fold`."""
        raise NotImplementedError

    def json_elements(self, column: str) -> str:
        """SQL for a table of a JSON array column's elements, each as `value`."""
        raise NotImplementedError

    async def stream(self, consume: Callable[[Iterator[T]], Any], items: AsyncIterator[T]) -> Any:
        """`consume(iterator)` over `items` (a synchronous consumer, such as a file writer), streamed."""
        raise NotImplementedError


def run_sync(operation: Coroutine[Any, Any, T]) -> T:
    """Run an operation whose every await completes at once (SQLite's driver) to its result."""
    try:
        operation.send(None)
    except StopIteration as done:
        return done.value
    operation.close()
    raise RuntimeError("a store operation waited on something other than its SQLite connection")


def iterate_sync(items: AsyncIterator[T]) -> Iterator[T]:
    """An async iterator that never suspends (over SQLite's driver), as a plain iterator."""
    while True:
        try:
            yield run_sync(items.__anext__())  # type: ignore[arg-type]
        except StopAsyncIteration:
            return
