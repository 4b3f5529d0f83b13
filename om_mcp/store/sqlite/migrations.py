"""SQLite's side of the migrations (the list is `om_mcp.store.migrations`);
`PRAGMA user_version` is the version.

Never edit a migration that has shipped: add a new one. Versions 1 to 3 are the
SQL that shipped first; later ones may be Python steps when a table must be
rebuilt or data derived.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Callable, Sequence

from om_mcp.store.sqlite import fts

log = logging.getLogger(__name__)

SHIPPED: list[str] = [
    # 1: resources, threads, messages and their full-text index.
    """
    CREATE TABLE resources (
        id TEXT PRIMARY KEY,
        working_memory TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    );
    CREATE TABLE threads (
        id TEXT PRIMARY KEY,
        resource_id TEXT NOT NULL REFERENCES resources(id),
        title TEXT,
        title_pinned INTEGER NOT NULL DEFAULT 0,
        metadata TEXT NOT NULL DEFAULT '{}',
        working_memory TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    );
    CREATE INDEX threads_by_resource ON threads(resource_id, updated_at);
    -- seq is the one ordering and cursor for messages: monotonic, never reused.
    CREATE TABLE messages (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL,
        thread_id TEXT NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
        resource_id TEXT NOT NULL,
        role TEXT NOT NULL,
        parts TEXT NOT NULL,
        created_at TEXT NOT NULL,
        created_ts REAL NOT NULL,
        metadata TEXT NOT NULL DEFAULT '{}',
        tokens INTEGER NOT NULL,
        token_cache TEXT,
        content_hash TEXT NOT NULL,
        UNIQUE (thread_id, id)
    );
    CREATE INDEX messages_by_thread ON messages(thread_id, seq);
    CREATE INDEX messages_by_resource ON messages(resource_id, seq);
    CREATE INDEX messages_by_id ON messages(resource_id, id);
    -- rowid = messages.seq; written in the same transaction as the message.
    -- prev1/prev2 hold the two earlier messages of the thread, so a reply can
    -- be found by the words of the question it answers.
    CREATE VIRTUAL TABLE messages_fts USING fts5(
        body, prev1, prev2, tokenize = 'porter unicode61 remove_diacritics 2'
    );
    """,
    # 2: observational memory state. Cursors are message seqs, never timestamps.
    """
    CREATE TABLE om_records (
        key TEXT PRIMARY KEY,
        scope TEXT NOT NULL,
        resource_id TEXT NOT NULL,
        thread_id TEXT,
        generation INTEGER NOT NULL DEFAULT 0,
        current_task TEXT,
        suggested_response TEXT,
        extracted TEXT NOT NULL DEFAULT '{}',
        last_observed_at TEXT,
        last_reflection_at TEXT,
        reflection_blocked_at INTEGER,
        last_buffered_at_tokens INTEGER NOT NULL DEFAULT 0,
        version INTEGER NOT NULL DEFAULT 0,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    );
    CREATE INDEX om_records_by_resource ON om_records(resource_id);
    -- Everything at or below seq in that thread is observed for that record.
    CREATE TABLE om_cursors (
        record_key TEXT NOT NULL REFERENCES om_records(key) ON DELETE CASCADE,
        thread_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        PRIMARY KEY (record_key, thread_id)
    );
    -- The observation log: a generation is an ordered list of groups, each
    -- observed from (or reflected over) a range of messages. A reflection
    -- writes a new generation; earlier ones stay readable.
    CREATE TABLE om_groups (
        id TEXT PRIMARY KEY,
        record_key TEXT NOT NULL REFERENCES om_records(key) ON DELETE CASCADE,
        generation INTEGER NOT NULL,
        position INTEGER NOT NULL,
        kind TEXT NOT NULL,
        thread_id TEXT,
        first_seq INTEGER NOT NULL,
        last_seq INTEGER NOT NULL,
        first_message_id TEXT,
        last_message_id TEXT,
        text TEXT NOT NULL,
        tokens INTEGER NOT NULL,
        observed_at TEXT,
        created_at TEXT NOT NULL,
        UNIQUE (record_key, generation, position)
    );
    -- A buffered reflection: the text that will replace the first `covered`
    -- groups of `generation` when it activates.
    CREATE TABLE om_buffered_reflections (
        record_key TEXT PRIMARY KEY REFERENCES om_records(key) ON DELETE CASCADE,
        cycle_id TEXT NOT NULL,
        generation INTEGER NOT NULL,
        covered INTEGER NOT NULL,
        input_tokens INTEGER NOT NULL,
        text TEXT NOT NULL,
        tokens INTEGER NOT NULL,
        hints TEXT NOT NULL DEFAULT '{}',
        created_at TEXT NOT NULL
    );
    -- Buffered (not yet active) observations, keyed by record and seq range,
    -- never by generation, so a reflection cannot strand them.
    CREATE TABLE om_chunks (
        id TEXT PRIMARY KEY,
        record_key TEXT NOT NULL REFERENCES om_records(key) ON DELETE CASCADE,
        cycle_id TEXT NOT NULL UNIQUE,
        thread_id TEXT NOT NULL,
        first_seq INTEGER NOT NULL,
        last_seq INTEGER NOT NULL,
        message_ids TEXT NOT NULL,
        message_tokens INTEGER NOT NULL,
        observations TEXT NOT NULL,
        observation_tokens INTEGER NOT NULL,
        hints TEXT NOT NULL DEFAULT '{}',
        last_message_at TEXT,
        created_at TEXT NOT NULL
    );
    CREATE INDEX om_chunks_by_record ON om_chunks(record_key, first_seq);
    CREATE TABLE om_leases (
        key TEXT NOT NULL,
        op TEXT NOT NULL,
        owner TEXT NOT NULL,
        cycle_id TEXT,
        expires_at REAL NOT NULL,
        PRIMARY KEY (key, op)
    );
    CREATE TABLE om_events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        type TEXT NOT NULL,
        cycle_id TEXT,
        record_key TEXT,
        resource_id TEXT,
        thread_id TEXT,
        anchor_message_id TEXT,
        payload TEXT NOT NULL,
        created_at TEXT NOT NULL
    );
    CREATE INDEX om_events_by_thread ON om_events(thread_id, id);
    CREATE INDEX om_events_by_cycle ON om_events(cycle_id);
    """,
    # 3: search over observation groups, and vectors for semantic recall.
    """
    CREATE VIRTUAL TABLE om_groups_fts USING fts5(
        group_id UNINDEXED, record_key UNINDEXED, text, tokenize = 'porter unicode61 remove_diacritics 2'
    );
    CREATE TABLE embeddings (
        kind TEXT NOT NULL,
        ref TEXT NOT NULL,
        resource_id TEXT NOT NULL,
        thread_id TEXT,
        embedder TEXT NOT NULL,
        vector BLOB NOT NULL,
        PRIMARY KEY (kind, ref, embedder)
    );
    CREATE INDEX embeddings_by_resource ON embeddings(resource_id, embedder);
    """,
]


# 4: the text stored once (messages.body, a contentless index), running totals
# so a turn never scans the backlog, chunk and thread counters, model health,
# host ingest positions, and the file marked as ours.
V4_TABLES = """
CREATE TABLE messages_v4 (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL,
    thread_id TEXT NOT NULL,
    resource_id TEXT NOT NULL,
    role TEXT NOT NULL,
    -- the searchable text; parts NULL means one text part whose text is body
    body TEXT NOT NULL,
    parts TEXT,
    created_at TEXT NOT NULL,
    metadata TEXT,
    tokens INTEGER NOT NULL,
    -- per-part counts (JSON list) for messages of several parts, and who counted
    part_tokens TEXT,
    counted_by INTEGER NOT NULL DEFAULT 0,
    observable INTEGER NOT NULL DEFAULT 1,
    UNIQUE (thread_id, id)
);
CREATE TABLE om_tokenizers (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
CREATE TABLE model_health (
    model TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    failures INTEGER NOT NULL DEFAULT 0,
    next_attempt_at REAL NOT NULL DEFAULT 0,
    last_error TEXT,
    last_failure_at TEXT,
    config_hash TEXT
);
CREATE TABLE ingest_state (
    source TEXT PRIMARY KEY,
    offset INTEGER NOT NULL DEFAULT 0,
    last_id TEXT,
    fingerprint TEXT,
    updated_at TEXT NOT NULL
);
"""


def v4(conn: sqlite3.Connection) -> None:
    for statement in _statements(V4_TABLES):
        conn.execute(statement)
    bodies = dict(conn.execute("SELECT rowid, body FROM messages_fts"))
    rows = conn.execute(
        "SELECT seq, id, thread_id, resource_id, role, parts, created_at, metadata, tokens, token_cache FROM messages"
    ).fetchall()
    for seq, mid, thread_id, resource_id, role, parts, created_at, metadata, tokens, cache in rows:
        decoded = json.loads(parts)
        body = bodies.get(seq, "")
        kept = None if decoded == [{"type": "text", "text": body}] else parts
        meta = None if metadata in (None, "{}") else metadata
        counts = (json.loads(cache) or {}).get("parts") if cache else None
        observable = int(role != "system" or '"om_kind": "temporal-gap"' in (metadata or ""))
        conn.execute(
            "INSERT INTO messages_v4 (seq, id, thread_id, resource_id, role, body, parts, created_at, metadata,"
            " tokens, part_tokens, counted_by, observable) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?)",
            (
                seq,
                mid,
                thread_id,
                resource_id,
                role,
                body,
                kept,
                created_at,
                meta,
                tokens,
                json.dumps(counts) if counts and len(counts) > 1 else None,
                observable,
            ),
        )
    conn.execute("DROP TABLE messages_fts")
    conn.execute("DROP TABLE messages")
    conn.execute("ALTER TABLE messages_v4 RENAME TO messages")
    conn.execute("CREATE INDEX messages_by_thread ON messages(thread_id, seq)")
    for statement in fts.SCHEMA:
        conn.execute(statement)
    fts.rebuild(conn)

    # Threads carry their counters, so a turn reads them instead of counting.
    for column in (
        "message_count INTEGER NOT NULL DEFAULT 0",
        "last_assistant_at TEXT",
        "last_assistant_id TEXT",
        "last_model TEXT",
        "previous_model TEXT",
    ):
        conn.execute(f"ALTER TABLE threads ADD COLUMN {column}")
    conn.execute(
        "UPDATE threads SET message_count = (SELECT COUNT(*) FROM messages m WHERE m.thread_id = threads.id),"
        " last_assistant_at = (SELECT MAX(created_at) FROM messages m WHERE m.thread_id = threads.id"
        " AND m.role = 'assistant'), last_assistant_id = (SELECT m.id FROM messages m"
        " WHERE m.thread_id = threads.id AND m.role = 'assistant' ORDER BY m.seq DESC LIMIT 1)"
    )

    # Records keep the active log's size; cursors keep the unobserved tokens after them.
    conn.execute("ALTER TABLE om_records ADD COLUMN observation_tokens INTEGER NOT NULL DEFAULT 0")
    conn.execute(
        "UPDATE om_records SET observation_tokens = (SELECT COALESCE(SUM(g.tokens), 0) FROM om_groups g"
        " WHERE g.record_key = om_records.key AND g.generation = om_records.generation)"
    )
    for column in (
        "pending_tokens INTEGER NOT NULL DEFAULT 0",
        "pending_messages INTEGER NOT NULL DEFAULT 0",
        "counted_seq INTEGER NOT NULL DEFAULT 0",
    ):
        conn.execute(f"ALTER TABLE om_cursors ADD COLUMN {column}")
    # Every thread a record covers gets a cursor row, so its unobserved tail is counted once here.
    conn.execute(
        "INSERT OR IGNORE INTO om_cursors (record_key, thread_id, seq)"
        " SELECT r.key, t.id, 0 FROM om_records r JOIN threads t ON"
        " (r.scope = 'thread' AND t.id = r.thread_id) OR (r.scope = 'resource' AND t.resource_id = r.resource_id)"
    )
    conn.execute(
        "UPDATE om_cursors SET"
        " pending_tokens = (SELECT COALESCE(SUM(m.tokens), 0) FROM messages m WHERE m.thread_id = om_cursors.thread_id"
        "  AND m.seq > om_cursors.seq AND m.observable),"
        " pending_messages = (SELECT COUNT(*) FROM messages m WHERE m.thread_id = om_cursors.thread_id"
        "  AND m.seq > om_cursors.seq AND m.observable),"
        " counted_seq = (SELECT COALESCE(MAX(m.seq), 0) FROM messages m WHERE m.thread_id = om_cursors.thread_id)"
    )

    # Continuation hints belong to a thread, even when the log is shared: they live on its cursor.
    for column in ("current_task TEXT", "suggested_response TEXT"):
        conn.execute(f"ALTER TABLE om_cursors ADD COLUMN {column}")
    conn.execute(
        "UPDATE om_cursors SET current_task = (SELECT r.current_task FROM om_records r WHERE r.key = record_key),"
        " suggested_response = (SELECT r.suggested_response FROM om_records r WHERE r.key = record_key)"
        " WHERE record_key LIKE 'thread:%'"
    )
    conn.execute(
        "UPDATE om_cursors SET"
        " current_task = (SELECT json_extract(t.metadata, '$.om.current_task') FROM threads t WHERE t.id = thread_id),"
        " suggested_response = (SELECT json_extract(t.metadata, '$.om.suggested_response') FROM threads t"
        "  WHERE t.id = thread_id) WHERE record_key LIKE 'resource:%'"
    )
    conn.execute("ALTER TABLE om_records DROP COLUMN current_task")
    conn.execute("ALTER TABLE om_records DROP COLUMN suggested_response")

    # Chunks name their range by its ends and use the log's words (text, tokens).
    conn.execute("ALTER TABLE om_chunks RENAME COLUMN observations TO text")
    conn.execute("ALTER TABLE om_chunks RENAME COLUMN observation_tokens TO tokens")
    for column in (
        "first_message_id TEXT NOT NULL DEFAULT ''",
        "last_message_id TEXT NOT NULL DEFAULT ''",
        "message_count INTEGER NOT NULL DEFAULT 0",
    ):
        conn.execute(f"ALTER TABLE om_chunks ADD COLUMN {column}")
    for chunk_id, ids, hints in conn.execute("SELECT id, message_ids, hints FROM om_chunks").fetchall():
        ids, hints = json.loads(ids), json.loads(hints)
        conn.execute(
            "UPDATE om_chunks SET first_message_id = ?, last_message_id = ?, message_count = ? WHERE id = ?",
            (hints.get("first_message_id") or ids[0], hints.get("last_message_id") or ids[-1], len(ids), chunk_id),
        )
    conn.execute("ALTER TABLE om_chunks DROP COLUMN message_ids")
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")


# 5: what the user controls: a counter of the user's own changes to a log (forget, edit,
# restore), which every cycle's commit checks so model work computed before a change cannot
# bring back what it removed; the redactions made per resource and privacy rule (counts,
# never the text); and the model spend per UTC day and model, which the spend caps read.
V5 = """
ALTER TABLE om_records ADD COLUMN edits INTEGER NOT NULL DEFAULT 0;
CREATE TABLE om_redactions (
    resource_id TEXT NOT NULL,
    rule TEXT NOT NULL,
    count INTEGER NOT NULL,
    PRIMARY KEY (resource_id, rule)
);
CREATE TABLE om_spend (
    day TEXT NOT NULL,
    model TEXT NOT NULL,
    calls INTEGER NOT NULL DEFAULT 0,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    usd REAL NOT NULL DEFAULT 0,
    unpriced_calls INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (day, model)
);
"""


# 6: memory that stays right over months. A line a reflection drops, merges or supersedes,
# and a group retired into the archive, stays as a group of the retired pile (generation
# RETIRED, -1): `retired_by` the generation that retired it, `retired_reason` why, `replaced_by`
# the hash of the line that took its place. Working memory keeps its history, so the memory
# can be shown as it was on a given day; each value stored so far starts it.
MONTHS = """
ALTER TABLE om_groups ADD COLUMN retired_by INTEGER;
ALTER TABLE om_groups ADD COLUMN retired_reason TEXT;
ALTER TABLE om_groups ADD COLUMN replaced_by TEXT;
CREATE TABLE om_working_memory_history (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    scope TEXT NOT NULL,
    owner TEXT NOT NULL,
    text TEXT,
    saved_at TEXT NOT NULL
);
CREATE INDEX om_working_memory_history_by_owner ON om_working_memory_history(scope, owner, saved_at);
INSERT INTO om_working_memory_history (scope, owner, text, saved_at)
    SELECT 'resource', id, working_memory, updated_at FROM resources WHERE working_memory IS NOT NULL;
INSERT INTO om_working_memory_history (scope, owner, text, saved_at)
    SELECT 'thread', id, working_memory, updated_at FROM threads WHERE working_memory IS NOT NULL;
"""

# Forget for good, caps that cap (docs/forget.md, docs/budget.md):
# - tombstones: keyed hashes (HMAC-SHA256 with this database's own random key, made at the
#   first forget) of what was forgotten: message ids, message content, thread and resource ids.
#   Every way in consults them, so nothing forgotten is stored again; never the text itself;
# - how many messages the tombstones refused, per resource (for the status);
# - an erase that could not fold the WAL into the file yet (a reader held an older snapshot);
# - spend reservations: a call's estimate, written before the call in one step every process
#   shares, settled after it; the calls abandoned (counted at their estimate) and refused (with the
#   estimate of the last one refused, which every process's status reads until a call fits again).
TOMBSTONES_AND_RESERVATIONS = """
CREATE TABLE om_tombstone_key (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    secret TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE om_tombstones (
    digest TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE om_tombstone_refusals (
    resource_id TEXT PRIMARY KEY,
    refused INTEGER NOT NULL DEFAULT 0,
    last_refused_at TEXT
);
CREATE TABLE om_erase_pending (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    since TEXT NOT NULL,
    forgets INTEGER NOT NULL DEFAULT 1
);
CREATE TABLE om_spend_reservations (
    id TEXT PRIMARY KEY,
    day TEXT NOT NULL,
    model TEXT NOT NULL,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    usd REAL,
    expires_at REAL NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX om_spend_reservations_by_day ON om_spend_reservations(day);
ALTER TABLE om_spend ADD COLUMN abandoned_calls INTEGER NOT NULL DEFAULT 0;
ALTER TABLE om_spend ADD COLUMN refused_calls INTEGER NOT NULL DEFAULT 0;
ALTER TABLE om_spend ADD COLUMN refused_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE om_spend ADD COLUMN refused_usd REAL NOT NULL DEFAULT 0;
"""

# 8: OAuth (server/http/oauth/): registered clients, the owner's grants, and every secret of the flow
# (consent codes, authorization codes, access and refresh tokens) as its sha256 only.
OAUTH = """
CREATE TABLE om_oauth_clients (
    client_id TEXT PRIMARY KEY,
    registration TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE om_oauth_grants (
    id TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    resources TEXT NOT NULL,
    created_at REAL NOT NULL,
    used_at REAL,
    revoked_at REAL
);
CREATE TABLE om_oauth_secrets (
    digest TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    grant_id TEXT,
    detail TEXT NOT NULL,
    expires_at REAL NOT NULL,
    used_at REAL,
    failures INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX om_oauth_secrets_by_grant ON om_oauth_secrets(grant_id);
"""


def _statements(script: str) -> list[str]:
    """Split a script into statements (triggers need care with ';')."""
    statements, buffer = [], []
    for line in script.splitlines():
        buffer.append(line)
        candidate = "\n".join(buffer).strip()
        if candidate and sqlite3.complete_statement(candidate):
            statements.append(candidate)
            buffer = []
    rest = "\n".join(buffer).strip()
    if rest:
        statements.append(rest)
    return statements


def step(script: str) -> Callable[[sqlite3.Connection], None]:
    def run(conn: sqlite3.Connection) -> None:
        for statement in _statements(script):
            conn.execute(statement)

    return run


APPLICATION_ID = 0x6F6D6370  # "omcp"


def migrate(conn: sqlite3.Connection, steps: Sequence[Callable[[sqlite3.Connection], None]]) -> None:
    """Bring the schema up to date (inside the caller's write transaction): `steps[N - 1]` reaches
    version N (the list is `om_mcp.store.migrations`, which holds this module's steps)."""
    latest = len(steps)
    current = conn.execute("PRAGMA user_version").fetchone()[0]
    if current == 0 and conn.execute("PRAGMA application_id").fetchone()[0] == 0:
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    for version, run in enumerate(steps, start=1):
        if version <= current:
            continue
        run(conn)
        conn.execute(f"PRAGMA user_version = {version}")
    if current == 0:
        log.debug("database created (schema %d)", latest)
    elif current < latest:
        log.info("database upgraded from schema %d to %d", current, latest)
