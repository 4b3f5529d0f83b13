"""Record keys: the one place that spells them.

An observation record belongs to a thread (`thread:<id>`) or to a resource
(`resource:<id>`), by the configured scope.
"""

from __future__ import annotations

from om_mcp.store.rows import Scope


def record_key(scope: Scope, thread_id: str, resource_id: str) -> str:
    return f"resource:{resource_id}" if scope == "resource" else f"thread:{thread_id}"


def thread_key(thread_id: str) -> str:
    return f"thread:{thread_id}"


def resource_key(resource_id: str) -> str:
    return f"resource:{resource_id}"


def parse_key(key: str) -> tuple[Scope, str]:
    """("thread" | "resource", id) of a record key."""
    kind, _, ident = key.partition(":")
    if kind not in ("thread", "resource") or not ident:
        raise ValueError(f"not a record key: {key!r}")
    return kind, ident  # type: ignore[return-value]
