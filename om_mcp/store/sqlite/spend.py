"""Model spend per UTC day and model: what the spend caps read. Every process on the
database adds its calls here, so a cap holds across all of them."""

from __future__ import annotations

import sqlite3

from om_mcp.store.rows import SpendDay


def add_spend(
    conn: sqlite3.Connection, day: str, model: str, input_tokens: int, output_tokens: int, usd: float | None
) -> None:
    conn.execute(
        "INSERT INTO om_spend (day, model, calls, input_tokens, output_tokens, usd, unpriced_calls)"
        " VALUES (?, ?, 1, ?, ?, ?, ?) ON CONFLICT (day, model) DO UPDATE SET calls = calls + 1,"
        " input_tokens = input_tokens + excluded.input_tokens, output_tokens = output_tokens + excluded.output_tokens,"
        " usd = usd + excluded.usd, unpriced_calls = unpriced_calls + excluded.unpriced_calls",
        (day, model, input_tokens, output_tokens, usd or 0.0, int(usd is None)),
    )


def spend_since(conn: sqlite3.Connection, first_day: str) -> list[SpendDay]:
    """Every (day, model) from `first_day` on, oldest first."""
    rows = conn.execute(
        "SELECT day, model, calls, input_tokens, output_tokens, usd, unpriced_calls FROM om_spend"
        " WHERE day >= ? ORDER BY day, model",
        (first_day,),
    )
    return [SpendDay(*r) for r in rows]
