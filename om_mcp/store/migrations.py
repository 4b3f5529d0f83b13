"""The schema's history for both backends: one list, one version number.

Version N is `MIGRATIONS[N - 1]`. A migration carries what each backend runs to
reach it: SQL, or a function when rows must be rebuilt or derived. PostgreSQL
support arrived at version 4, so its first migration creates the whole schema
of that version and the earlier ones have nothing to do there (None).

Never edit a migration that has shipped: append a new one, with both sides.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass

from om_mcp.store.postgres import schema as postgres
from om_mcp.store.postgres.schema import PostgresStep
from om_mcp.store.sqlite import migrations as sqlite


@dataclass(frozen=True)
class Migration:
    about: str
    sqlite: Callable[[sqlite3.Connection], None]
    postgres: PostgresStep


MIGRATIONS: list[Migration] = [
    Migration("resources, threads, messages and their full-text index", sqlite.step(sqlite.SHIPPED[0]), None),
    Migration("observational memory state", sqlite.step(sqlite.SHIPPED[1]), None),
    Migration("search over observation groups, vectors", sqlite.step(sqlite.SHIPPED[2]), None),
    Migration("text stored once, running totals, model health, ingest positions", sqlite.v4, postgres.v4),
    Migration("the user's changes to a log, redaction counts, model spend", sqlite.step(sqlite.V5), postgres.V5),
    Migration("retired lines and the archive, working memory history", sqlite.step(sqlite.MONTHS), postgres.MONTHS),
    Migration(
        "tombstones of what was forgotten, a pending erase, spend reservations",
        sqlite.step(sqlite.TOMBSTONES_AND_RESERVATIONS),
        postgres.TOMBSTONES_AND_RESERVATIONS,
    ),
    Migration("OAuth clients, grants and hashed secrets", sqlite.step(sqlite.OAUTH), postgres.OAUTH),
]
LATEST_VERSION = len(MIGRATIONS)
APPLICATION_ID = sqlite.APPLICATION_ID  # SQLite's PRAGMA application_id; 'om-mcp' in PostgreSQL's om_meta
