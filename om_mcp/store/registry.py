"""The registry of stored columns: what every column of both backends holds, in one place.

Every column of every table, on SQLite and on PostgreSQL, is classified here, and three parts of
the store read it instead of keeping lists of their own:

* **the gate** (`store/gate.py`): every value a statement writes into a column classified `SAID`
  (text a person or a model wrote) is scanned for secrets and `<private>` spans, then checked
  against the tombstones of forgotten phrases, in the one write layer every statement passes
  (`Tx`); a statement that writes such a column in a shape the gate cannot read is refused;
* **forget** (`store/forget.py`): `forget --match` looks for a phrase in every `SAID` column, and
  takes it out the way the column's `forget` says;
* **the tombstones** (`store/tombstones.py`): a phrase tombstone is checked in the resource that
  owns the row (`Table.owner`), as forget scopes its walk.

`tests/test_column_registry.py` migrates both backends from nothing, lists every column of the live schema
and fails when one is not classified here (or when one classified here no longer exists). A new
column is classified in the same change that adds its migration.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# -- what a column holds ---------------------------------------------------------------------

SAID = "said"  # text a person or a model wrote: scanned, looked in by forget, checked against tombstones
ID = "id"  # a name a client or om-mcp chose: thread, resource, message ids, record keys, cycle ids, paths
NAME = "name"  # om-mcp's own vocabulary or configuration: a role, a kind, a state, a rule, a configured model
TIME = "time"
NUMBER = "number"
FLAG = "flag"
HASH = "hash"  # a digest that cannot be read back
KEY = "key"  # the tombstones' own random key
VECTOR = "vector"  # an embedding of said text (forget deletes the embeddings of what it removes)
INDEX = "index"  # a search index's own data, built by the backends' index code from the gated text
KINDS = frozenset({SAID, ID, NAME, TIME, NUMBER, FLAG, HASH, KEY, VECTOR, INDEX})

# How a said value is read: one string; a JSON document (every string in it, keys too); working
# memory (Markdown, or a JSON object kept as text).
Form = Literal["text", "json", "memory"]
# How forget takes a phrase out of a said column:
#   message      the message goes whole (the engine plans it: `engine/forget_phrase.py`)
#   lines        the lines holding it leave the log text, in every generation (the engine plans it)
#   drop-chunks  a buffered chunk quoting it goes, with the thread's later ones (buffered again)
#   delete       the row goes (an event, a buffered reflection)
#   null         the value goes (a task, a suggested response, a model name)
#   untitle      the title goes and is no longer pinned
#   entries      the JSON entries holding it go (metadata, extracted values)
#   memory       the working-memory lines (or JSON entries) holding it go
#   excerpt      the excerpt of a model's answer goes, what the record says is kept
Forget = Literal["message", "lines", "drop-chunks", "delete", "null", "untitle", "entries", "memory", "excerpt"]
# Whose text a row is (the resource a phrase tombstone and a resource's forget look in):
#   resource  the owner column names the resource
#   record    it names an observation record (`resource:R`, or `thread:T` of a thread of R)
#   history   (scope, owner): a working memory's thread or resource
#   event     the resource, else the record, else the thread
#   server    the server's own (model health): no resource; only an all-resources forget looks in it
OwnerKind = Literal["resource", "record", "history", "event", "server"]


@dataclass(frozen=True)
class Column:
    kind: str
    form: Form | None = None
    forget: Forget | None = None


@dataclass(frozen=True)
class Table:
    columns: dict[str, Column]
    key: tuple[str, ...] = ()  # the columns that name one row (the gate's lookup of an updated row's owner)
    owner: OwnerKind | None = None
    owner_columns: tuple[str, ...] = ()
    backend: Literal["both", "sqlite", "postgres"] = "both"
    about: str = ""

    @property
    def said(self) -> dict[str, Column]:
        return {name: c for name, c in self.columns.items() if c.kind == SAID}


def said(form: Form, forget: Forget) -> Column:
    return Column(SAID, form, forget)


def _plain(kind: str) -> Column:
    return Column(kind)


ID_, N, T, NUM, F, H = (_plain(k) for k in (ID, NAME, TIME, NUMBER, FLAG, HASH))
IX = _plain(INDEX)


def _table(
    about: str,
    columns: dict[str, Column],
    *,
    key: tuple[str, ...] = (),
    owner: OwnerKind | None = None,
    owner_columns: tuple[str, ...] = (),
    backend: Literal["both", "sqlite", "postgres"] = "both",
) -> Table:
    return Table(columns, key, owner, owner_columns, backend, about)


TABLES: dict[str, Table] = {
    # -- the memory ------------------------------------------------------------------------
    "resources": _table(
        "a resource (a user, a project) and its working memory",
        {"id": ID_, "working_memory": said("memory", "memory"), "created_at": T, "updated_at": T},
        key=("id",),
        owner="resource",
        owner_columns=("id",),
    ),
    "threads": _table(
        "a thread: its title, metadata, working memory and counters",
        {
            "id": ID_,
            "resource_id": ID_,
            "title": said("text", "untitle"),
            "title_pinned": F,
            "metadata": said("json", "entries"),
            "working_memory": said("memory", "memory"),
            "created_at": T,
            "updated_at": T,
            "message_count": NUM,
            "last_assistant_at": T,
            "last_assistant_id": ID_,
            # the model an assistant message's metadata named: the client's words
            "last_model": said("text", "null"),
            "previous_model": said("text", "null"),
        },
        key=("id",),
        owner="resource",
        owner_columns=("resource_id",),
    ),
    "messages": _table(
        "the raw messages",
        {
            "seq": NUM,
            "id": ID_,
            "thread_id": ID_,
            "resource_id": ID_,
            "role": N,
            "body": said("text", "message"),
            "parts": said("json", "message"),
            "created_at": T,
            "metadata": said("json", "message"),
            "tokens": NUM,
            "part_tokens": NUM,
            "counted_by": ID_,
            "observable": F,
        },
        key=("seq",),
        owner="resource",
        owner_columns=("resource_id",),
    ),
    "om_working_memory_history": _table(
        "every value a working memory was given (`show --as-of`, `get_context(as_of)`)",
        {"id": NUM, "scope": N, "owner": ID_, "text": said("memory", "memory"), "saved_at": T},
        key=("id",),
        owner="history",
        owner_columns=("scope", "owner"),
    ),
    "om_records": _table(
        "an observation record: its generation, extracted values, counters",
        {
            "key": ID_,
            "scope": N,
            "resource_id": ID_,
            "thread_id": ID_,
            "generation": NUM,
            "extracted": said("json", "entries"),
            "last_observed_at": T,
            "last_reflection_at": T,
            "reflection_blocked_at": NUM,
            "last_buffered_at_tokens": NUM,
            "version": NUM,
            "created_at": T,
            "updated_at": T,
            "observation_tokens": NUM,
            "edits": NUM,
        },
        key=("key",),
        owner="resource",
        owner_columns=("resource_id",),
    ),
    "om_cursors": _table(
        "a record's cursor in one thread, its unobserved totals and the thread's current task",
        {
            "record_key": ID_,
            "thread_id": ID_,
            "seq": NUM,
            "pending_tokens": NUM,
            "pending_messages": NUM,
            "counted_seq": NUM,
            "current_task": said("text", "null"),
            "suggested_response": said("text", "null"),
        },
        key=("record_key", "thread_id"),
        owner="record",
        owner_columns=("record_key",),
    ),
    "om_groups": _table(
        "the observation log in every generation, the retired pile (generation -1) and the archive",
        {
            "id": ID_,
            "record_key": ID_,
            "generation": NUM,
            "position": NUM,
            "kind": N,
            "thread_id": ID_,
            "first_seq": NUM,
            "last_seq": NUM,
            "first_message_id": ID_,
            "last_message_id": ID_,
            "text": said("text", "lines"),
            "tokens": NUM,
            "observed_at": T,
            "created_at": T,
            "retired_by": NUM,
            "retired_reason": N,
            "replaced_by": H,  # the hash of the line that took a retired line's place
            # PostgreSQL keeps a group's search terms on its row (SQLite in om_groups_fts)
            "doclen": NUM,
            "tsv": IX,
        },
        key=("id",),
        owner="record",
        owner_columns=("record_key",),
    ),
    "om_chunks": _table(
        "buffered observations, not yet in the log",
        {
            "id": ID_,
            "record_key": ID_,
            "cycle_id": ID_,
            "thread_id": ID_,
            "first_seq": NUM,
            "last_seq": NUM,
            "message_tokens": NUM,
            "text": said("text", "lines"),
            "tokens": NUM,
            "hints": said("json", "drop-chunks"),
            "last_message_at": T,
            "created_at": T,
            "first_message_id": ID_,
            "last_message_id": ID_,
            "message_count": NUM,
        },
        key=("id",),
        owner="record",
        owner_columns=("record_key",),
    ),
    "om_buffered_reflections": _table(
        "a reflection computed ahead, not yet the log",
        {
            "record_key": ID_,
            "cycle_id": ID_,
            "generation": NUM,
            "covered": NUM,
            "input_tokens": NUM,
            "text": said("text", "delete"),
            "tokens": NUM,
            "hints": said("json", "delete"),
            "created_at": T,
        },
        key=("record_key",),
        owner="record",
        owner_columns=("record_key",),
    ),
    "om_events": _table(
        "what happened (cycles, forgets, redactions): payloads can quote a model's output",
        {
            "id": NUM,
            "type": N,
            "cycle_id": ID_,
            "record_key": ID_,
            "resource_id": ID_,
            "thread_id": ID_,
            "anchor_message_id": ID_,
            "payload": said("json", "delete"),
            "created_at": T,
        },
        key=("id",),
        owner="event",
        owner_columns=("resource_id", "record_key", "thread_id"),
    ),
    "model_health": _table(
        "the model breaker's state; its error can quote a model's answer",
        {
            "model": N,
            "state": N,
            "failures": NUM,
            "next_attempt_at": NUM,
            "last_error": said("text", "excerpt"),
            "last_failure_at": T,
            "config_hash": H,
        },
        key=("model",),
        owner="server",
    ),
    "embeddings": _table(
        "vectors of messages and groups, for semantic recall",
        {"kind": N, "ref": ID_, "resource_id": ID_, "thread_id": ID_, "embedder": N, "vector": _plain(VECTOR)},
    ),
    # -- bookkeeping -------------------------------------------------------------------------
    "ingest_state": _table(
        "how far a host's transcript was read",
        {"source": ID_, "offset": NUM, "last_id": ID_, "fingerprint": H, "updated_at": T},
    ),
    "om_tokenizers": _table("the tokenizers stored counts name", {"id": NUM, "name": N}),
    "om_leases": _table(
        "which process runs which cycle", {"key": ID_, "op": N, "owner": ID_, "cycle_id": ID_, "expires_at": NUM}
    ),
    "om_redactions": _table(
        "secrets kept out, per resource and rule (counts, never the text)",
        {"resource_id": ID_, "rule": N, "count": NUM},
    ),
    "om_spend": _table(
        "model spend per day and model",
        {
            "day": T,
            "model": N,
            "calls": NUM,
            "input_tokens": NUM,
            "output_tokens": NUM,
            "usd": NUM,
            "unpriced_calls": NUM,
            "abandoned_calls": NUM,
            "refused_calls": NUM,
            "refused_tokens": NUM,
            "refused_usd": NUM,
        },
    ),
    "om_spend_reservations": _table(
        "a call's estimate, reserved before the call",
        {
            "id": ID_,
            "day": T,
            "model": N,
            "input_tokens": NUM,
            "output_tokens": NUM,
            "usd": NUM,
            "expires_at": NUM,
            "created_at": T,
        },
    ),
    "om_tombstone_key": _table(
        "this database's key for its tombstones", {"id": NUM, "secret": _plain(KEY), "created_at": T}
    ),
    "om_tombstones": _table("what was forgotten, as keyed hashes", {"digest": H, "kind": N, "created_at": T}),
    "om_tombstone_refusals": _table(
        "messages the tombstones refused, per resource", {"resource_id": ID_, "refused": NUM, "last_refused_at": T}
    ),
    "om_erase_pending": _table("an erase a reader held up", {"id": NUM, "since": T, "forgets": NUM}),
    # -- OAuth (store/oauth.py): what a client registered, the owner's grants, secrets as digests ---------
    "om_oauth_clients": _table(
        "a registered client: its RFC 7591 record (a name and redirect URIs the client chose, as ids are)",
        {"client_id": ID_, "registration": ID_, "created_at": T},
    ),
    "om_oauth_grants": _table(
        "what the owner approved: one client, the resources (ids) it may use",
        {"id": ID_, "client_id": ID_, "resources": ID_, "created_at": T, "used_at": T, "revoked_at": T},
    ),
    "om_oauth_secrets": _table(
        "a consent code, an authorization code, an access or refresh token: its digest, and the flow's details"
        " (the redirect URI, the PKCE challenge, the scope)",
        {"digest": H, "kind": N, "grant_id": ID_, "detail": ID_, "expires_at": T, "used_at": T, "failures": NUM},
    ),
    # -- SQLite's own ----------------------------------------------------------------------
    "sqlite_sequence": _table("AUTOINCREMENT's counters", {"name": N, "seq": NUM}, backend="sqlite"),
    "messages_fts": _table(
        "the messages' full-text index (SQLite: contentless FTS5; PostgreSQL: tsvectors and term counts)",
        {
            "body": IX,
            "messages_fts": IX,
            "rank": IX,
            # PostgreSQL's
            "seq": NUM,
            "resource_id": ID_,
            "thread_id": ID_,
            "doclen": NUM,
            "tsv": IX,
            "tf": IX,
        },
    ),
    "messages_fts_config": _table("FTS5's settings", {"k": IX, "v": IX}, backend="sqlite"),
    "messages_fts_data": _table("FTS5's index segments", {"id": IX, "block": IX}, backend="sqlite"),
    "messages_fts_idx": _table("FTS5's segment directory", {"segid": IX, "term": IX, "pgno": IX}, backend="sqlite"),
    "messages_fts_vocab": _table("FTS5's words and counts", {"term": IX, "doc": IX, "cnt": IX}, backend="sqlite"),
    "messages_fts_scopes": _table(
        "indexed messages per resource", {"resource_id": ID_, "messages": NUM}, backend="sqlite"
    ),
    "om_groups_fts": _table(
        "the observation groups' full-text index (a copy of their text)",
        {"group_id": ID_, "record_key": ID_, "text": IX, "om_groups_fts": IX, "rank": IX},
        backend="sqlite",
    ),
    "om_groups_fts_config": _table("FTS5's settings", {"k": IX, "v": IX}, backend="sqlite"),
    "om_groups_fts_content": _table(
        "FTS5's copy of the indexed values", {"id": IX, "c0": IX, "c1": IX, "c2": IX}, backend="sqlite"
    ),
    "om_groups_fts_data": _table("FTS5's index segments", {"id": IX, "block": IX}, backend="sqlite"),
    "om_groups_fts_docsize": _table("FTS5's document sizes", {"id": IX, "sz": IX}, backend="sqlite"),
    "om_groups_fts_idx": _table("FTS5's segment directory", {"segid": IX, "term": IX, "pgno": IX}, backend="sqlite"),
    # -- PostgreSQL's own ------------------------------------------------------------------
    "search_stats": _table(
        "indexed messages and their length per resource",
        {"resource_id": ID_, "n_docs": NUM, "total_len": NUM},
        backend="postgres",
    ),
    "search_terms": _table(
        "each word's document count per resource (words of the messages)",
        {"resource_id": ID_, "lexeme": IX, "ndoc": NUM},
        backend="postgres",
    ),
    "om_meta": _table(
        "what SQLite keeps in its header: the schema version, the application, where a migration came from",
        {"key": N, "value": N},
        backend="postgres",
    ),
    "om_counters": _table("event ids handed out in commit order", {"name": N, "value": NUM}, backend="postgres"),
}

# Columns of a table that exist on one backend only (the rest of the table is on both).
ONLY: dict[tuple[str, str], Literal["sqlite", "postgres"]] = {
    ("om_groups", "doclen"): "postgres",
    ("om_groups", "tsv"): "postgres",
    **{("messages_fts", c): "sqlite" for c in ("body", "messages_fts", "rank")},
    **{("messages_fts", c): "postgres" for c in ("seq", "resource_id", "thread_id", "doclen", "tsv", "tf")},
}


def columns(backend: Literal["sqlite", "postgres"]) -> dict[str, set[str]]:
    """Every (table, column) the registry classifies on one backend."""
    out: dict[str, set[str]] = {}
    for name, table in TABLES.items():
        if table.backend not in ("both", backend):
            continue
        out[name] = {c for c in table.columns if ONLY.get((name, c), backend) == backend}
    return out


@dataclass(frozen=True)
class SaidColumn:
    table: str
    column: str
    form: Form
    forget: Forget


def said_columns() -> list[SaidColumn]:
    """Every column that holds text a person or a model wrote, in the registry's order."""
    out = []
    for name, table in TABLES.items():
        for column, entry in table.said.items():
            assert entry.form is not None and entry.forget is not None
            out.append(SaidColumn(name, column, entry.form, entry.forget))
    return out


def said_column(table: str, column: str) -> Column | None:
    found = TABLES.get(table)
    entry = found.columns.get(column) if found is not None else None
    return entry if entry is not None and entry.kind == SAID else None


def check() -> list[str]:
    """What is wrong with the registry itself (a said column without its form, an unknown kind)."""
    problems = []
    for name, table in TABLES.items():
        for column, entry in table.columns.items():
            if entry.kind not in KINDS:
                problems.append(f"{name}.{column}: unknown kind {entry.kind!r}")
            if entry.kind == SAID and (entry.form is None or entry.forget is None):
                problems.append(f"{name}.{column}: a said column needs its form and how forget treats it")
        if table.said and table.owner is None:
            problems.append(f"{name}: a table with said columns needs its owner")
        if table.said and not table.key:
            problems.append(f"{name}: a table with said columns needs its key")
    return problems
