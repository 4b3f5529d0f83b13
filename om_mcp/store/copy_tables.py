"""What a copy moves: every table of a memory and its primary key, in dependency order.

The copy (store/copy.py) goes through them in this order, keyed by the primary key, so a
batch can resume after the last key the target holds. The columns are the ones both
databases have, read from their schemas at the copy (`columns`): a new column is copied
without being named here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Table:
    name: str
    key: tuple[str, ...]
    columns: tuple[str, ...] = ()  # filled in from both schemas when the copy starts

    def at(self, row: tuple, column: str) -> object:
        return row[self.columns.index(column)]


# Dependency order (a thread after its resource, a cursor after its record); leases are not
# copied: they belong to the processes of the source.
TABLES = [
    Table("resources", ("id",)),
    Table("threads", ("id",)),
    Table("om_tokenizers", ("id",)),
    Table("messages", ("seq",)),
    Table("om_records", ("key",)),
    Table("om_cursors", ("record_key", "thread_id")),
    Table("om_groups", ("id",)),
    Table("om_buffered_reflections", ("record_key",)),
    Table("om_chunks", ("id",)),
    Table("om_events", ("id",)),
    Table("embeddings", ("kind", "ref", "embedder")),
    Table("model_health", ("model",)),
    Table("ingest_state", ("source",)),
    Table("om_redactions", ("resource_id", "rule")),
    Table("om_spend", ("day", "model")),
    Table("om_working_memory_history", ("id",)),
    # The key goes with its tombstones: without it they could not be checked. Reservations
    # and a pending erase belong to the source's processes and file, as leases do.
    Table("om_tombstone_key", ("id",)),
    Table("om_tombstones", ("digest",)),
    Table("om_tombstone_refusals", ("resource_id",)),
    # Connected clients keep working on the copy: their grants and the digests of their tokens.
    Table("om_oauth_clients", ("client_id",)),
    Table("om_oauth_grants", ("id",)),
    Table("om_oauth_secrets", ("digest",)),
]
BOOLEANS = {("threads", "title_pinned"), ("messages", "observable")}
# Columns of one backend's own index, rebuilt in the target's form (PostgreSQL's group lengths).
DERIVED = {("om_groups", "doclen")}
# PostgreSQL: a table's columns, generated ones left out (their values follow from the others).
POSTGRES_COLUMNS = (
    "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema()"
    " AND table_name = $1 AND is_generated = 'NEVER' ORDER BY ordinal_position"
)


def quoted(names: tuple[str, ...]) -> str:
    return ", ".join(f'"{n}"' for n in names)


def shared_columns(table: Table, source: list[str], target: list[str]) -> Table:
    """The table with the columns both databases have, in the source's order."""
    return Table(table.name, table.key, tuple(c for c in source if c in target and (table.name, c) not in DERIVED))
