"""What a copy moves: every table of a memory, its primary key and columns, in dependency order.

The copy (store/copy.py) goes through them in this order, keyed by the primary key, so a
batch can resume after the last key the target holds.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Table:
    name: str
    key: tuple[str, ...]
    columns: tuple[str, ...]


# Dependency order (a thread after its resource, a cursor after its record); leases are not
# copied: they belong to the processes of the source.
TABLES = [
    Table("resources", ("id",), ("id", "working_memory", "created_at", "updated_at")),
    Table(
        "threads",
        ("id",),
        (
            "id",
            "resource_id",
            "title",
            "title_pinned",
            "metadata",
            "working_memory",
            "created_at",
            "updated_at",
            "message_count",
            "last_assistant_at",
            "last_assistant_id",
            "last_model",
            "previous_model",
        ),
    ),
    Table("om_tokenizers", ("id",), ("id", "name")),
    Table(
        "messages",
        ("seq",),
        (
            "seq",
            "id",
            "thread_id",
            "resource_id",
            "role",
            "body",
            "parts",
            "created_at",
            "metadata",
            "tokens",
            "part_tokens",
            "counted_by",
            "observable",
        ),
    ),
    Table(
        "om_records",
        ("key",),
        (
            "key",
            "scope",
            "resource_id",
            "thread_id",
            "generation",
            "extracted",
            "last_observed_at",
            "last_reflection_at",
            "reflection_blocked_at",
            "last_buffered_at_tokens",
            "version",
            "created_at",
            "updated_at",
            "observation_tokens",
            "edits",
        ),
    ),
    Table(
        "om_cursors",
        ("record_key", "thread_id"),
        (
            "record_key",
            "thread_id",
            "seq",
            "pending_tokens",
            "pending_messages",
            "counted_seq",
            "current_task",
            "suggested_response",
        ),
    ),
    Table(
        "om_groups",
        ("id",),
        (
            "id",
            "record_key",
            "generation",
            "position",
            "kind",
            "thread_id",
            "first_seq",
            "last_seq",
            "first_message_id",
            "last_message_id",
            "text",
            "tokens",
            "observed_at",
            "created_at",
        ),
    ),
    Table(
        "om_buffered_reflections",
        ("record_key",),
        ("record_key", "cycle_id", "generation", "covered", "input_tokens", "text", "tokens", "hints", "created_at"),
    ),
    Table(
        "om_chunks",
        ("id",),
        (
            "id",
            "record_key",
            "cycle_id",
            "thread_id",
            "first_seq",
            "last_seq",
            "message_tokens",
            "text",
            "tokens",
            "hints",
            "last_message_at",
            "created_at",
            "first_message_id",
            "last_message_id",
            "message_count",
        ),
    ),
    Table(
        "om_events",
        ("id",),
        (
            "id",
            "type",
            "cycle_id",
            "record_key",
            "resource_id",
            "thread_id",
            "anchor_message_id",
            "payload",
            "created_at",
        ),
    ),
    Table("embeddings", ("kind", "ref", "embedder"), ("kind", "ref", "resource_id", "thread_id", "embedder", "vector")),
    Table(
        "model_health",
        ("model",),
        ("model", "state", "failures", "next_attempt_at", "last_error", "last_failure_at", "config_hash"),
    ),
    Table("ingest_state", ("source",), ("source", "offset", "last_id", "fingerprint", "updated_at")),
    Table("om_redactions", ("resource_id", "rule"), ("resource_id", "rule", "count")),
    Table(
        "om_spend",
        ("day", "model"),
        ("day", "model", "calls", "input_tokens", "output_tokens", "usd", "unpriced_calls"),
    ),
]
BOOLEANS = {("threads", "title_pinned"), ("messages", "observable")}


def quoted(names: tuple[str, ...]) -> str:
    return ", ".join(f'"{n}"' for n in names)
