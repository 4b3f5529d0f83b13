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
    CREATE VIRTUAL TABLE messages_fts USING fts5(
        body, dates, tokenize = 'porter unicode61 remove_diacritics 2'
    );
    """,
]
