"""Redaction counts: how many matches of each privacy rule a resource's messages lost
before they were stored. Counts only: the text they replaced was never written."""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Iterable

from om_mcp.store.rows import NewMessage


def count_redactions(conn: sqlite3.Connection, resource_id: str, stored: Iterable[NewMessage]) -> dict[str, int]:
    """Add the redactions of the messages just stored to the resource's counts (in the
    append's transaction, so a re-sent message is never counted twice); returns them."""
    counts: Counter[str] = Counter()
    for message in stored:
        counts.update(message.redactions)
    conn.executemany(
        "INSERT INTO om_redactions (resource_id, rule, count) VALUES (?, ?, ?)"
        " ON CONFLICT (resource_id, rule) DO UPDATE SET count = count + excluded.count",
        [(resource_id, rule, n) for rule, n in sorted(counts.items()) if n > 0],
    )
    return dict(sorted(counts.items()))


def redaction_counts(conn: sqlite3.Connection, resource_id: str | None = None) -> dict[str, int]:
    """Redactions per rule, for one resource or the whole database."""
    if resource_id is None:
        rows = conn.execute("SELECT rule, SUM(count) FROM om_redactions GROUP BY rule ORDER BY rule")
    else:
        rows = conn.execute("SELECT rule, count FROM om_redactions WHERE resource_id = ? ORDER BY rule", (resource_id,))
    return {rule: int(n) for rule, n in rows}
