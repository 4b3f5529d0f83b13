"""The gate: the one way text reaches a column that holds what a person or a model wrote.

Which columns those are is the registry's (`store/registry.py`: kind `said`). Every statement of
the store runs through `Tx` (`store/tx.py`), and `Tx` hands every statement that writes to the
gate before its driver sees it: a value bound for a said column passes, in order,

1. **the scan** (`om_mcp/privacy/`: the detectors, `<private>` spans), read the way the registry
   says the column holds it (one string; a JSON document, every string in it and a secret-named
   key's value; working memory, Markdown or a JSON object);
2. **the phrase tombstones** (`store/phrases.py`): a phrase `forget --match` took out of the row's
   resource (the registry's `owner`), or out of every resource, becomes `[forgotten]`.

So a new operation, a new column or a new way in cannot store text around the gate: its statement
is read here, by the registry, whoever wrote it. A statement that writes a said column in a shape
the gate cannot read (not `INSERT ... (columns) VALUES/SELECT`, not `UPDATE ... SET`), or whose
row's owner it cannot find, is refused with `GateError` the first time it runs.

Messages are the one bulk write, so they are scanned once, early: the intake (`engine/intake.py`,
`hook/rows.py`) scans a message with `Gate.message` before anything is derived from it (its id, its
token counts, its search text) and its row carries the gate's `Receipt`; `Tx.insert_messages`
scans a row without one here, field by field. A message's tombstones (its id, its content, each of
its parts, a forgotten phrase anywhere in it) are the append rule's (`store/tombstones.py: keep`),
which refuses the whole message; `Tx.insert_messages` refuses a row no tombstone check has seen.

Migrations and `om-mcp migrate`'s copy write outside `Tx`: they move what is stored as it is.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from om_mcp import privacy
from om_mcp.store import phrases, registry
from om_mcp.store.keys import parse_key
from om_mcp.store.rows import NewMessage


class GateError(Exception):
    """A statement writes a said column in a way the gate cannot read: a bug in the store's rules."""


class Receipt:
    """What `Gate.message` gives a message it scanned: its row needs no second scan."""

    __slots__ = ()


_RECEIPT = Receipt()


@dataclass(frozen=True)
class Plan:
    """What a statement writes into said columns: which parameters, and whose rows."""

    table: str
    said: tuple[tuple[int, str], ...]  # (0-based parameter, column)
    owner: tuple[tuple[str, int], ...]  # (owner column, parameter) found in the statement, in priority order
    lookup: tuple[str, int] | None  # else: a key column of the row and its parameter (an UPDATE)


# -- reading a statement --------------------------------------------------------------------------

_INSERT = re.compile(r"\bINSERT\s+(?:OR\s+\w+\s+)?INTO\s+(\w+)(?:\s+AS\s+\w+)?\s*(\(?)", re.I)
_UPDATE = re.compile(r"\bUPDATE\s+(\w+)(?:\s+(?:AS\s+)?(?!SET\b)\w+)?\s+SET\b", re.I)
_PARAM = re.compile(r"\$(\d+)")
_ENDS_SET = re.compile(r"\b(?:FROM|WHERE|RETURNING)\b", re.I)
_ENDS_WHERE = re.compile(r"\b(?:RETURNING|ORDER|LIMIT)\b", re.I)


def _depths(sql: str) -> list[int]:
    """The parenthesis depth at each character (-1 inside a quoted string)."""
    out, depth, quote = [], 0, ""
    for char in sql:
        if quote:
            out.append(-1)
            if char == quote:
                quote = ""
            continue
        if char in "'\"":
            quote = char
            out.append(-1)
            continue
        if char == "(":
            out.append(depth)
            depth += 1
            continue
        if char == ")":
            depth -= 1
        out.append(depth)
    return out


def _close(sql: str, depths: list[int], opening: int) -> int:
    """The index of the parenthesis that closes the one at `opening`."""
    level = depths[opening]
    for i in range(opening + 1, len(sql)):
        if sql[i] == ")" and depths[i] == level:
            return i
    raise GateError(f"unbalanced parentheses in: {sql}")


def _split(sql: str, depths: list[int], start: int, end: int, level: int) -> list[str]:
    """The comma-separated items of sql[start:end] at parenthesis depth `level`."""
    items, begin = [], start
    for i in range(start, end):
        if sql[i] == "," and depths[i] == level:
            items.append(sql[begin:i])
            begin = i + 1
    items.append(sql[begin:end])
    return [item.strip() for item in items]


def _find(pattern: re.Pattern[str], sql: str, depths: list[int], start: int, level: int) -> int | None:
    for match in pattern.finditer(sql, start):
        if depths[match.start()] == level:
            return match.start()
    return None


def _params(expression: str) -> list[int]:
    return [int(n) - 1 for n in _PARAM.findall(expression)]


def _assignments(text: str) -> dict[str, list[int]]:
    """column -> the parameters its value uses, for `a = expr, b = expr`."""
    depths = _depths(text)
    out: dict[str, list[int]] = {}
    for item in _split(text, depths, 0, len(text), 0):
        column, sep, expression = item.partition("=")
        if not sep:
            raise GateError(f"cannot read the assignment {item!r}")
        out.setdefault(column.strip().split(".")[-1].strip('"'), []).extend(_params(expression))
    return out


@lru_cache(maxsize=4096)
def plan(sql: str) -> Plan | None:
    """What `sql` writes into said columns (None: nothing); GateError when the gate cannot read it."""
    if "INSERT" not in sql and "UPDATE" not in sql and "insert" not in sql and "update" not in sql:
        return None
    targets = [(m, "insert") for m in _INSERT.finditer(sql)] + [(m, "update") for m in _UPDATE.finditer(sql)]
    targets = [(m, how) for m, how in targets if registry.TABLES.get(m.group(1)) and registry.TABLES[m.group(1)].said]
    if not targets:
        return None
    if len(targets) > 1:
        raise GateError(f"one statement writes several tables with said columns: {sql}")
    match, how = targets[0]
    table = match.group(1)
    depths = _depths(sql)
    if depths[match.start()] != 0:
        raise GateError(f"a write of {table} inside a subquery or a CTE: the gate reads top-level writes: {sql}")
    if how == "insert" and not match.group(2):
        raise GateError(f"an INSERT into {table} names no columns: the gate cannot tell what goes where: {sql}")
    found = _insert(sql, depths, match, table) if how == "insert" else _update(sql, depths, match, table)
    return found if found.said else None


def _insert(sql: str, depths: list[int], match: re.Match[str], table: str) -> Plan:
    opening = match.end() - 1
    closing = _close(sql, depths, opening)
    columns = [c.strip('"') for c in _split(sql, depths, opening + 1, closing, 1)]
    rest = sql[closing + 1 :].lstrip()
    offset = len(sql) - len(rest)
    values: dict[str, list[int]] = {}
    if rest[:6].upper() == "VALUES":
        position = offset + 6
        while position < len(sql) and sql[position] in " \n\t":
            position += 1
        while position < len(sql) and sql[position] == "(":
            end = _close(sql, depths, position)
            items = _split(sql, depths, position + 1, end, 1)
            if len(items) != len(columns):
                raise GateError(f"{len(columns)} columns and {len(items)} values in: {sql}")
            for column, item in zip(columns, items):
                values.setdefault(column, []).extend(_params(item))
            position = end + 1
            while position < len(sql) and sql[position] in " ,\n\t":
                position += 1
    elif rest[:6].upper() == "SELECT":
        end = _find(re.compile(r"\bFROM\b", re.I), sql, depths, offset, 0) or len(sql)
        items = _split(sql, depths, offset + 6, end, 0)
        if len(items) != len(columns):
            raise GateError(f"{len(columns)} columns and {len(items)} selected values in: {sql}")
        for column, item in zip(columns, items):
            values.setdefault(column, []).extend(_params(item))
    else:
        raise GateError(f"an INSERT the gate cannot read (neither VALUES nor SELECT): {sql}")
    conflict = re.search(r"\bDO\s+UPDATE\s+SET\b", sql[offset:], re.I)
    if conflict is not None:
        start = offset + conflict.end()
        end = _find(re.compile(r"\b(?:WHERE|RETURNING)\b", re.I), sql, depths, start, 0) or len(sql)
        for column, params in _assignments(sql[start:end]).items():
            values.setdefault(column, []).extend(params)
    return _plan(table, sql, values, {c: p for c, p in values.items() if len(p) == 1}, None)


def _update(sql: str, depths: list[int], match: re.Match[str], table: str) -> Plan:
    start = match.end()
    end = _find(_ENDS_SET, sql, depths, start, 0) or len(sql)
    values = _assignments(sql[start:end])
    where_at = _find(re.compile(r"\bWHERE\b", re.I), sql, depths, start, 0)
    equals: dict[str, int] = {}
    if where_at is not None:
        stop = _find(_ENDS_WHERE, sql, depths, where_at, 0) or len(sql)
        for found in re.finditer(r"(?<![\w.$])(?:\w+\.)?(\w+)\s*=\s*\$(\d+)", sql[where_at:stop]):
            equals.setdefault(found.group(1), int(found.group(2)) - 1)
    return _plan(table, sql, values, equals, equals)


def _plan(
    table: str,
    sql: str,
    values: Mapping[str, list[int]],
    owners: Mapping[str, list[int] | int],
    keys: Mapping[str, int] | None,
) -> Plan:
    entry = registry.TABLES[table]
    said = tuple((p, column) for column, params in values.items() if column in entry.said for p in params)
    owner: list[tuple[str, int]] = []
    for column in entry.owner_columns:
        found = owners.get(column)
        if found is not None:
            owner.append((column, found[0] if isinstance(found, list) else found))
    needs = 2 if entry.owner == "history" else 1
    if len(owner) < needs:
        owner = []
    lookup = None
    if keys is not None and not owner:
        lookup = next(((c, keys[c]) for c in entry.key if c in keys), None)
    if said and entry.owner != "server" and not owner and lookup is None:
        raise GateError(
            f"the gate cannot tell whose text {table} gets (no {' / '.join(entry.owner_columns)} or key"
            f" {' / '.join(entry.key)} as a parameter): {sql}"
        )
    return Plan(table, said, tuple(owner), lookup)


# -- the gate -----------------------------------------------------------------------------------


class Gate:
    """The scan of this process's privacy settings, and the tombstone check, for one store."""

    def __init__(self, settings: Mapping[str, Any] | None = None):
        self.settings = dict(settings or {})
        self.redactor = privacy.redactor_for(self.settings)  # messages: with the user's hook
        self._values = privacy.redactor_for({**self.settings, "before_observation": None})

    # -- the scan, early (the engine's callers: a message before its row is made, a value it returns)

    def message(self, role: str, parts: list[dict[str, Any]], metadata: Mapping[str, Any] | None):
        """A message's parts and metadata as they may be stored, and a receipt for its row
        (raises `privacy.HookFailed` when the user's hook fails: the message is then refused)."""
        return self.redactor.message(role, parts, metadata), _RECEIPT

    def value(self, value: Any) -> tuple[Any, Counter[str]]:
        """Any value that is not a message (a title, metadata, working memory, a model's answer, an
        instruction for a model): the rules and `<private>` spans, never the message hook."""
        counts: Counter[str] = Counter()
        return self._values.value(value, counts), counts

    def text(self, value: str) -> str:
        return self._values.text(value, Counter())

    # -- the scan and the tombstones, at the write layer --------------------------------------

    def scan(self, value: Any, form: str) -> Any:
        """A said column's value (text as the driver takes it) with the rules applied."""
        if not isinstance(value, str) or not value:
            return value
        if form == "text":
            return self._values.text(value, Counter())
        parsed = _json(value, form)
        if parsed is None:
            return self._values.text(value, Counter())
        clean = self._values.value(parsed, Counter())
        return value if clean == parsed else json.dumps(clean, ensure_ascii=False, separators=(",", ":"))

    async def admit(self, tx: Any, sql: str, args: Sequence[Any]) -> Sequence[Any]:
        """The statement's parameters as they may be written (see the module docstring)."""
        found = plan(sql)
        if found is None or not found.said:
            return args
        return await self._admit(tx, found, args)

    async def admit_many(self, tx: Any, sql: str, rows: Sequence[Sequence[Any]]) -> Sequence[Sequence[Any]]:
        found = plan(sql)
        if found is None or not found.said:
            return rows
        return [await self._admit(tx, found, row) for row in rows]

    async def _admit(self, tx: Any, found: Plan, args: Sequence[Any]) -> Sequence[Any]:
        out = list(args)
        forgotten = await self.forgotten(tx)
        columns = registry.TABLES[found.table].columns
        scopes: tuple[str, ...] | None = None
        for index, column in found.said:
            if index >= len(out):
                raise GateError(f"parameter ${index + 1} of {found.table}.{column} is missing")
            form = columns[column].form or "text"
            value = self.scan(out[index], form)
            if forgotten is not None and isinstance(value, str) and value:
                if scopes is None:
                    scopes = await self._scopes(tx, found, args)
                value = _without_phrases(forgotten, value, form, scopes)
            out[index] = value
        return out

    async def text_of(self, tx: Any, table: str, column: str, owner: str | None, value: str) -> str:
        """One said value written outside a statement (the search index's copy of a group's text):
        the same scan and tombstones; `owner`: the row's owner column value."""
        form = registry.TABLES[table].columns[column].form or "text"
        value = self.scan(value, form)
        forgotten = await self.forgotten(tx)
        if forgotten is None or not value:
            return value
        entry = registry.TABLES[table]
        resource = await _resource(tx, entry.owner, (owner,)) if owner is not None else None
        return _without_phrases(forgotten, value, form, _scopes_of(resource))

    def message_row(self, row: NewMessage) -> NewMessage:
        """A message row as it may be stored: one the intake scanned passes; another is scanned here."""
        if isinstance(row.receipt, Receipt):
            return row
        counts: Counter[str] = Counter()
        parts = self._values.parts(row.parts, counts)
        metadata = self._values.value(dict(row.metadata), counts) if row.metadata else row.metadata
        body = self._values.text(row.body, counts)
        if not counts:
            return row
        merged = Counter(row.redactions)
        merged.update(counts)
        return dataclasses.replace(row, parts=parts, metadata=metadata, body=body, redactions=dict(merged))

    # -- the tombstones --------------------------------------------------------------------------

    async def forgotten(self, tx: Any) -> phrases.Phrases | None:
        """This database's forgotten phrases (read once per transaction), or None."""
        cached = getattr(tx, "forgotten_phrases", False)
        if cached is None or isinstance(cached, phrases.Phrases):
            return cached
        found = None
        secret = await tx.fetchval("SELECT secret FROM om_tombstone_key WHERE id = 1")
        if secret is not None:
            rows = await tx.fetch(
                "SELECT digest, kind FROM om_tombstones WHERE kind = $1 OR kind = $2", phrases.PHRASE, phrases.HEAD
            )
            found = phrases.Phrases.of(secret, [(r[0], r[1]) for r in rows])
        tx.forgotten_phrases = found
        return found

    async def _scopes(self, tx: Any, found: Plan, args: Sequence[Any]) -> tuple[str, ...]:
        entry = registry.TABLES[found.table]
        if entry.owner == "server":
            return _scopes_of(None)
        if found.owner:
            values = tuple(args[p] for _, p in found.owner)
            columns = tuple(c for c, _ in found.owner)
        else:
            assert found.lookup is not None
            key, param = found.lookup
            columns = entry.owner_columns
            row = await tx.fetchrow(f"SELECT {', '.join(columns)} FROM {found.table} WHERE {key} = $1", args[param])
            values = tuple(row) if row is not None else tuple(None for _ in columns)
        return _scopes_of(await _resource(tx, entry.owner, values, columns))


def _scopes_of(resource: str | None) -> tuple[str, ...]:
    return (resource, phrases.EVERY) if resource else (phrases.EVERY,)


async def _resource(
    tx: Any, owner: str | None, values: tuple[Any, ...], columns: tuple[str, ...] | None = None
) -> str | None:
    """The resource a row belongs to, from its owner columns' values (see registry.OwnerKind)."""
    if owner == "resource":
        return values[0]
    if owner == "history":
        scope, name = values[0], values[1]
        return name if scope == "resource" else await _thread_resource(tx, name)
    if owner == "record":
        return await _record_resource(tx, values[0])
    if owner == "event":
        named = dict(zip(columns or ("resource_id", "record_key", "thread_id"), values))
        if named.get("resource_id"):
            return named["resource_id"]
        if named.get("record_key"):
            return await _record_resource(tx, named["record_key"])
        if named.get("thread_id"):
            return await _thread_resource(tx, named["thread_id"])
    return None


async def _record_resource(tx: Any, key: Any) -> str | None:
    if not isinstance(key, str):
        return None
    try:
        scope, name = parse_key(key)
    except ValueError:
        return None
    return name if scope == "resource" else await _thread_resource(tx, name)


async def _thread_resource(tx: Any, thread_id: Any) -> str | None:
    if not isinstance(thread_id, str):
        return None
    return await tx.fetchval("SELECT resource_id FROM threads WHERE id = $1", thread_id)


def _json(value: str, form: str) -> Any:
    """A JSON column's value decoded (working memory: only a JSON object); None: read it as text."""
    if form == "memory" and not value.lstrip().startswith("{"):
        return None
    try:
        parsed = json.loads(value)
    except ValueError:
        return None
    return parsed if form == "json" or isinstance(parsed, dict) else None


def _without_phrases(found: phrases.Phrases, value: str, form: str, scopes: tuple[str, ...]) -> str:
    parsed = _json(value, form) if form != "text" else None
    if parsed is None:
        return found.replace(value, scopes)[0]
    changed = False

    def walk(item: Any) -> Any:
        nonlocal changed
        if isinstance(item, str):
            clean, n = found.replace(item, scopes)
            changed = changed or bool(n)
            return clean
        if isinstance(item, dict):
            return {walk(k): walk(v) for k, v in item.items()}
        if isinstance(item, list):
            return [walk(v) for v in item]
        return item

    clean = walk(parsed)
    return json.dumps(clean, ensure_ascii=False, separators=(",", ":")) if changed else value


_GATES: dict[str, Gate] = {}


def gate_for(settings: Mapping[str, Any] | None) -> Gate:
    """The gate of plain privacy settings (config/privacy.py `settings()`), built once per settings."""
    key = json.dumps(dict(settings or {}), sort_keys=True, default=str)
    found = _GATES.get(key)
    if found is None:
        found = _GATES[key] = Gate(settings)
    return found
