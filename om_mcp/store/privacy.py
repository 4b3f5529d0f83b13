"""Redaction counts: how many matches of each privacy rule a resource's messages lost
before they were stored. Counts only: the text they replaced was never written."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from om_mcp.store.access import Access
from om_mcp.store.rows import NewMessage
from om_mcp.store.tx import Tx


async def count_redactions(tx: Tx, resource_id: str, stored: Iterable[NewMessage]) -> dict[str, int]:
    """Add the redactions of the messages just stored to the resource's counts (in the
    append's transaction, so a re-sent message is never counted twice); returns them."""
    counts: Counter[str] = Counter()
    for message in stored:
        counts.update(message.redactions)
    rules = sorted(rule for rule, n in counts.items() if n > 0)  # rows locked in one order: no deadlock
    await tx.executemany(
        "INSERT INTO om_redactions (resource_id, rule, count) VALUES ($1, $2, $3)"
        " ON CONFLICT (resource_id, rule) DO UPDATE SET count = om_redactions.count + excluded.count",
        [(resource_id, rule, int(counts[rule])) for rule in rules],
    )
    return dict(sorted(counts.items()))


async def redaction_counts(tx: Tx, access: Access) -> dict[str, int]:
    """Redactions per rule, over the resources `access` grants (one, or the whole database)."""
    within, granted = access.sql_filter("resource_id", 1)
    rows = await tx.fetch(
        f"SELECT rule, SUM(count) FROM om_redactions WHERE {within} GROUP BY rule ORDER BY rule", *granted
    )
    return {r[0]: int(r[1]) for r in rows}
