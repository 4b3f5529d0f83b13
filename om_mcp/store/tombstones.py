"""Tombstones: what was forgotten, kept so that nothing forgotten is stored again, never as text.

A tombstone is a keyed hash (HMAC-SHA256) under this database's own random key, made at the
first forget and kept in `om_tombstone_key` (it never leaves the database: exports leave it
out, `om-mcp migrate` copies it with the tombstones). What is kept, by kind:

- `message`: a forgotten message's thread id and message id;
- `content`: its resource id, role and *content*, the text of its text parts, folded
  (`scrub.fold`: case and Unicode normalisation) and with its whitespace collapsed, so a
  re-ingested transcript, a hook re-reading a rewritten one, an earlier export and a copy
  of the conversation under other ids all hash the same. A message with no text part (a
  tool call or result, an attachment) has the canonical form of all its parts as content.
  Pause markers have none (their text is generic);
- `part`: its resource id and each string-bearing part in a canonical form, ids left out: a
  tool call's name and arguments (JSON with sorted keys, folded), a tool result's name and
  result, reasoning, a text part of a message of several parts, a file or image's type, name
  and data (a text file's decoded). So a forgotten tool result or tool call comes back in no
  message, whatever the message around it, its id, its thread or its session. A part shorter
  than PART_MIN_CHARS has none (a forgotten "ok" must not refuse every later "ok" part);
- `phrase` (and `phrase-head`): a phrase `forget --match` took out (`store/phrases.py`), in its
  resource or in all of them: a message holding it anywhere is refused whole, as the messages
  that held it were deleted whole; any other said value gets `[forgotten]` in its place
  (`store/gate.py`);
- `thread` and `resource`: a deleted thread's or resource's id, which an import consults so
  an earlier export cannot bring back its title, working memory or observations.

Forgetting one thing (a message, an observation with its sources, a phrase) writes `message`,
`content` and `part` tombstones; deleting a thread or a resource writes `message` tombstones
for its messages and a `thread` (`resource`) one: not their content, or a forgotten "ok" would
refuse every later "ok" in the resource.

Every way in consults them in the store's own rules: the append (`messages.append`, which the
MCP tools, the hooks and `om-mcp ingest` share) and the import (`transfer.import_records`);
`Tx.insert_messages` refuses a row this check has not seen. A refused message is not stored,
is counted per resource (`om_tombstone_refusals`, shown by the status) and is reported to the
caller as forgotten.

The key sits beside the hashes, so someone holding the whole database file can test a guess
("was this exact sentence forgotten?"); no one holding less can, and nothing forgotten can
be read back from a tombstone.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections.abc import Iterable, Sequence
from typing import Any

from om_mcp.store import phrases
from om_mcp.store.access import Access
from om_mcp.store.decode import now_iso
from om_mcp.store.resends import GAP_KIND
from om_mcp.store.rows import NewMessage
from om_mcp.store.scrub import decoded_text, fold, strings
from om_mcp.store.tx import Tx

MESSAGE, CONTENT, PART, THREAD, RESOURCE = "message", "content", "part", "thread", "resource"
GAP_SUFFIX = "~gap"  # a pause marker's id is its message's id and this (engine/intake.py)
PART_MIN_CHARS = 24  # a part's canonical content shorter than this has no tombstone of its own
_IDS = frozenset({"tool_call_id", "id"})  # names of a part's ids: a copy of a session renames them


def _canonical(value: Any) -> str:
    """A part's value in one spelling: JSON (a JSON string decoded first) with sorted keys, folded,
    whitespace collapsed."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return " ".join(fold(value).split())
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return " ".join(fold(text).split())


def _part(part: dict[str, Any]) -> str:
    kind = str(part.get("type") or "")
    fields = {k: v for k, v in part.items() if k not in _IDS and k != "type" and v is not None}
    if kind in ("image", "file") and isinstance(fields.get("data"), str):
        decoded = decoded_text(fields["data"])
        if decoded is not None:
            fields["data"] = decoded
    return f"{kind}\x00{_canonical(fields)}"


def content_of(role: str, parts: Sequence[dict[str, Any]], metadata: dict[str, Any] | None = None) -> str | None:
    """What "the same content" means for a content tombstone: the message's text parts, folded, with
    whitespace collapsed; a message with no text, the canonical form of all its parts; None for a
    pause marker."""
    if (metadata or {}).get("om_kind") == GAP_KIND:
        return None
    text = " ".join(" ".join(p.get("text") or "" for p in parts if p.get("type") == "text").split())
    if text:
        return f"{role}\x00{fold(text)}"
    rest = [_part(p) for p in parts if p.get("type") != "text"]
    return f"{role}\x00\x01" + "\x02".join(rest) if rest else None


def parts_of(parts: Sequence[dict[str, Any]]) -> list[str]:
    """The canonical form of each string-bearing part that is long enough for a tombstone of its own
    (a text part only in a message of several parts: a lone one is the message's content)."""
    out = []
    for part in parts:
        if part.get("type") == "text" and len(parts) == 1:
            continue
        said = _part(part)
        if len(said) - len(str(part.get("type") or "")) - 1 >= PART_MIN_CHARS:
            out.append(said)
    return out


def _digest(secret: str, kind: str, *fields: str) -> str:
    message = "\x00".join((kind, *fields)).encode("utf-8", "surrogatepass")
    return hmac.new(bytes.fromhex(secret), message, hashlib.sha256).hexdigest()


async def _secret(tx: Tx, *, create: bool = False) -> str | None:
    """This database's key (made on first use when `create`); None before anything was forgotten."""
    secret = await tx.fetchval("SELECT secret FROM om_tombstone_key WHERE id = 1")
    if secret is None and create:
        await tx.execute(
            "INSERT INTO om_tombstone_key (id, secret, created_at) VALUES (1, $1, $2) ON CONFLICT (id) DO NOTHING",
            secrets.token_hex(32),
            now_iso(),
        )
        secret = await tx.fetchval("SELECT secret FROM om_tombstone_key WHERE id = 1")
    return secret


async def _write(tx: Tx, items: Iterable[tuple[str, str]]) -> None:
    stamp = now_iso()
    rows = sorted(set(items))
    tx.forgotten_phrases = False  # read again by the next write that needs them (store/gate.py)
    await tx.executemany(
        "INSERT INTO om_tombstones (digest, kind, created_at) VALUES ($1, $2, $3) ON CONFLICT (digest) DO NOTHING",
        [(digest, kind, stamp) for digest, kind in rows],
    )


async def bury_messages(tx: Tx, rows: Iterable[Sequence[Any]], *, content: bool) -> None:
    """Tombstones for messages about to be deleted: rows of (thread id, resource id, message id,
    role, parts, metadata); `content`: their content's too (a forget of one thing)."""
    rows = list(rows)
    if not rows:
        return
    secret = await _secret(tx, create=True)
    assert secret is not None  # made just now if it was not there
    items = []
    for thread_id, resource_id, message_id, role, parts, metadata in rows:
        items.append((_digest(secret, MESSAGE, thread_id, message_id), MESSAGE))
        if not content:
            continue
        said = content_of(role, parts, metadata)
        if said is not None:
            items.append((_digest(secret, CONTENT, resource_id, said), CONTENT))
        items += [(_digest(secret, PART, resource_id, part), PART) for part in parts_of(parts)]
    await _write(tx, items)


async def bury_phrase(tx: Tx, phrase: str, within: Access) -> None:
    """Tombstones for a phrase forgotten within an access (each resource it grants, or every resource): no
    message holding it is stored again there, and any other text gets `[forgotten]` in its place
    (store/phrases.py)."""
    secret = await _secret(tx, create=True)
    assert secret is not None
    scopes = [phrases.EVERY] if within.every_resource else sorted(within.granted)
    await _write(tx, [row for scope in scopes for row in phrases.tombstones(secret, phrase, scope)])


async def bury_threads(tx: Tx, thread_ids: Iterable[str], resource_id: str | None = None) -> None:
    """Tombstones for deleted threads (and their resource, when it goes too), which imports consult."""
    secret = await _secret(tx, create=True)
    assert secret is not None
    items = [(_digest(secret, THREAD, t), THREAD) for t in thread_ids]
    if resource_id is not None:
        items.append((_digest(secret, RESOURCE, resource_id), RESOURCE))
    await _write(tx, items)


async def keep(tx: Tx, resource_id: str, thread_id: str, messages: list[NewMessage]) -> tuple[list[NewMessage], int]:
    """The messages no tombstone refuses, and how many were refused (counted for the resource).
    One read when nothing was ever forgotten. A pause marker goes with its refused message."""
    for m in messages:
        m.checked = True  # Tx.insert_messages stores no row this check has not seen
    if not messages:
        return messages, 0
    secret = await _secret(tx)
    if secret is None:
        return messages, 0
    wanted: dict[str, list[int]] = {}
    for index, m in enumerate(messages):
        wanted.setdefault(_digest(secret, MESSAGE, thread_id, m.id), []).append(index)
        said = content_of(m.role, m.parts, m.metadata)
        if said is not None:
            wanted.setdefault(_digest(secret, CONTENT, resource_id, said), []).append(index)
        for part in parts_of(m.parts):
            wanted.setdefault(_digest(secret, PART, resource_id, part), []).append(index)
    found = await tx.fetch("SELECT digest FROM om_tombstones WHERE digest = ANY ($1::text[])", sorted(wanted))
    refused = {index for (digest,) in found for index in wanted[digest]}
    forgotten = await tx.gate_of().forgotten(tx)
    if forgotten is not None:  # a phrase forgotten here, anywhere in the message
        scopes = (resource_id, phrases.EVERY)
        for index, m in enumerate(messages):
            if index not in refused and _holds_phrase(forgotten, m, scopes):
                refused.add(index)
    if not refused:
        return messages, 0
    gone = {messages[i].id for i in refused}
    kept = [
        m
        for i, m in enumerate(messages)
        if i not in refused and not (m.id.endswith(GAP_SUFFIX) and m.id[: -len(GAP_SUFFIX)] in gone)
    ]
    count = len(messages) - len(kept)
    await count_refused(tx, resource_id, count)
    return kept, count


def _holds_phrase(forgotten: phrases.Phrases, m: NewMessage, scopes: tuple[str, ...]) -> bool:
    values: list[Any] = [m.parts, m.metadata] if m.metadata else [m.parts]
    return any(forgotten.holds(text, scopes) for value in values for text in strings(value))


async def buried(tx: Tx, kind: str, value: str) -> bool:
    """Was this thread (`THREAD`) or resource (`RESOURCE`) deleted?"""
    secret = await _secret(tx)
    if secret is None:
        return False
    return bool(await tx.fetchval("SELECT 1 FROM om_tombstones WHERE digest = $1", _digest(secret, kind, value)))


async def count_refused(tx: Tx, resource_id: str, count: int) -> None:
    """Add messages the tombstones kept out to the resource's count."""
    if count:
        await tx.execute(
            "INSERT INTO om_tombstone_refusals AS r (resource_id, refused, last_refused_at) VALUES ($1, $2, $3)"
            " ON CONFLICT (resource_id) DO UPDATE SET refused = r.refused + excluded.refused,"
            " last_refused_at = excluded.last_refused_at",
            resource_id,
            count,
            now_iso(),
        )


async def summary(tx: Tx, access: Access) -> dict[str, Any]:
    """Tombstones kept (by kind, for the whole database: only to every resource's access) and messages
    they refused (in the resources `access` grants): what the status shows."""
    kinds: dict[str, int] = {}
    if access.every_resource:
        kinds = {
            r[0]: int(r[1])
            for r in await tx.fetch(
                "SELECT kind, COUNT(*) FROM om_tombstones WHERE kind <> $1 GROUP BY kind", phrases.HEAD
            )
        }
    within, granted = access.sql_filter("resource_id", 1)
    row = await tx.fetchrow(
        f"SELECT COALESCE(SUM(refused), 0), MAX(last_refused_at) FROM om_tombstone_refusals WHERE {within}", *granted
    )
    refused, last = (int(row[0]), row[1]) if row is not None else (0, None)
    return {"tombstones": dict(sorted(kinds.items())), "refused": refused, "last_refused_at": last}
