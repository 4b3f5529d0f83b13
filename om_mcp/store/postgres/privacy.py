"""Redaction counts on PostgreSQL (see sqlite/privacy.py)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from om_mcp.store.rows import NewMessage


async def count_redactions(conn: Any, resource_id: str, stored: Iterable[NewMessage]) -> dict[str, int]:
    counts: Counter[str] = Counter()
    for message in stored:
        counts.update(message.redactions)
    rules = sorted(rule for rule, n in counts.items() if n > 0)  # rows locked in one order: no deadlock
    await conn.executemany(
        "INSERT INTO om_redactions (resource_id, rule, count) VALUES ($1, $2, $3)"
        " ON CONFLICT (resource_id, rule) DO UPDATE SET count = om_redactions.count + excluded.count",
        [(resource_id, rule, int(counts[rule])) for rule in rules],
    )
    return dict(sorted(counts.items()))


async def redaction_counts(conn: Any, resource_id: str | None = None) -> dict[str, int]:
    if resource_id is None:
        rows = await conn.fetch("SELECT rule, SUM(count) FROM om_redactions GROUP BY rule ORDER BY rule")
    else:
        rows = await conn.fetch(
            "SELECT rule, count FROM om_redactions WHERE resource_id = $1 ORDER BY rule", resource_id
        )
    return {r[0]: int(r[1]) for r in rows}
