"""Model spend per UTC day and model on PostgreSQL (see sqlite/spend.py)."""

from __future__ import annotations

from typing import Any

from om_mcp.store.rows import SpendDay


async def add_spend(conn: Any, day: str, model: str, input_tokens: int, output_tokens: int, usd: float | None) -> None:
    await conn.execute(
        "INSERT INTO om_spend AS s (day, model, calls, input_tokens, output_tokens, usd, unpriced_calls)"
        " VALUES ($1, $2, 1, $3, $4, $5, $6) ON CONFLICT (day, model) DO UPDATE SET calls = s.calls + 1,"
        " input_tokens = s.input_tokens + excluded.input_tokens,"
        " output_tokens = s.output_tokens + excluded.output_tokens, usd = s.usd + excluded.usd,"
        " unpriced_calls = s.unpriced_calls + excluded.unpriced_calls",
        day,
        model,
        int(input_tokens),
        int(output_tokens),
        float(usd or 0.0),
        int(usd is None),
    )


async def spend_since(conn: Any, first_day: str) -> list[SpendDay]:
    rows = await conn.fetch(
        "SELECT day, model, calls, input_tokens, output_tokens, usd, unpriced_calls FROM om_spend"
        " WHERE day >= $1 ORDER BY day, model",
        first_day,
    )
    return [SpendDay(r[0], r[1], int(r[2]), int(r[3]), int(r[4]), float(r[5]), int(r[6])) for r in rows]
