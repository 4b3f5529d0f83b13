"""Model spend per UTC day and model: what the spend caps read. Every process on the
database adds its calls here, so a cap holds across all of them."""

from __future__ import annotations

from om_mcp.store.rows import SpendDay
from om_mcp.store.tx import Tx


async def add_spend(tx: Tx, day: str, model: str, input_tokens: int, output_tokens: int, usd: float | None) -> None:
    await tx.execute(
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


async def spend_since(tx: Tx, first_day: str) -> list[SpendDay]:
    """Every (day, model) from `first_day` on, oldest first."""
    rows = await tx.fetch(
        "SELECT day, model, calls, input_tokens, output_tokens, usd, unpriced_calls FROM om_spend"
        " WHERE day >= $1 ORDER BY day, model",
        first_day,
    )
    return [SpendDay(r[0], r[1], int(r[2]), int(r[3]), int(r[4]), float(r[5]), int(r[6])) for r in rows]
