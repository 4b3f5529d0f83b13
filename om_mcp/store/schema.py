"""The schema as forward-only migrations; `PRAGMA user_version` is the version.

Never edit a migration that has shipped: add a new one.
"""

MIGRATIONS: list[str] = [
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
