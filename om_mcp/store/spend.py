"""Model spend per UTC day and model, and the reservations that make a cap hold: what the spend caps read.

Every process on the database adds its calls here, so a cap holds across all of them. A call is
*reserved* before it is made (`reserve`): in one transaction that every process takes in turn (a
lock on one key), the day's and the month's settled spend plus the reservations still open are
compared with the caps, and the call's estimate is written only when it fits under every one of
them. After the call the reservation is *settled* (`settle`) with what the call really used. A
reservation never settled (the process crashed, or was killed mid-call) is folded into the spend
at its estimate once its time is up, as an abandoned call.
"""

from __future__ import annotations

from om_mcp.store.decode import now_iso
from om_mcp.store.rows import Reservation, Reserved, SpendDay, SpendTotals
from om_mcp.store.tx import Tx

LOCK = "om-spend"  # the reservations' turn: every process's reserve and settle take it


async def add_spend(
    tx: Tx,
    day: str,
    model: str,
    input_tokens: int,
    output_tokens: int,
    usd: float | None,
    *,
    abandoned: bool = False,
    refused: tuple[int, float] | None = None,
) -> None:
    """One call's spend; `refused`: no call, one refusal, and its estimate (tokens, dollars), which every
    process's status reads as the reason to wait until a call fits again."""
    made = int(refused is None)
    asked_tokens, asked_usd = refused or (0, 0.0)
    await tx.execute(
        "INSERT INTO om_spend AS s (day, model, calls, input_tokens, output_tokens, usd, unpriced_calls,"
        " abandoned_calls, refused_calls, refused_tokens, refused_usd)"
        " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
        " ON CONFLICT (day, model) DO UPDATE SET calls = s.calls + excluded.calls,"
        " input_tokens = s.input_tokens + excluded.input_tokens,"
        " output_tokens = s.output_tokens + excluded.output_tokens, usd = s.usd + excluded.usd,"
        " unpriced_calls = s.unpriced_calls + excluded.unpriced_calls,"
        " abandoned_calls = s.abandoned_calls + excluded.abandoned_calls,"
        " refused_calls = s.refused_calls + excluded.refused_calls,"
        " refused_tokens = CASE WHEN excluded.refused_calls > 0 THEN excluded.refused_tokens ELSE s.refused_tokens END,"
        " refused_usd = CASE WHEN excluded.refused_calls > 0 THEN excluded.refused_usd ELSE s.refused_usd END",
        day,
        model,
        made,
        int(input_tokens),
        int(output_tokens),
        float(usd or 0.0),
        int(usd is None and made == 1),
        int(abandoned),
        1 - made,
        int(asked_tokens),
        float(asked_usd),
    )


async def spend_since(tx: Tx, first_day: str) -> list[SpendDay]:
    """Every (day, model) from `first_day` on, oldest first."""
    rows = await tx.fetch(
        "SELECT day, model, calls, input_tokens, output_tokens, usd, unpriced_calls, abandoned_calls, refused_calls,"
        " refused_tokens, refused_usd FROM om_spend WHERE day >= $1 ORDER BY day, model",
        first_day,
    )
    return [
        SpendDay(
            r[0],
            r[1],
            int(r[2]),
            int(r[3]),
            int(r[4]),
            float(r[5]),
            int(r[6]),
            int(r[7]),
            int(r[8]),
            int(r[9]),
            float(r[10]),
        )
        for r in rows
    ]


async def open_reservations(tx: Tx, first_day: str) -> list[tuple[str, str, int, float]]:
    """(day, model, tokens, usd) of the calls in flight from `first_day` on: counted against the caps."""
    rows = await tx.fetch(
        "SELECT day, model, input_tokens + output_tokens, COALESCE(usd, 0) FROM om_spend_reservations"
        " WHERE day >= $1 ORDER BY day, model",
        first_day,
    )
    return [(r[0], r[1], int(r[2]), float(r[3])) for r in rows]


async def _fold_abandoned(tx: Tx, now: float) -> None:
    """Reservations whose time is up: their call was never settled, so it counts at its estimate."""
    for rid, day, model, input_tokens, output_tokens, usd in await tx.fetch(
        "SELECT id, day, model, input_tokens, output_tokens, usd FROM om_spend_reservations"
        " WHERE expires_at < $1 ORDER BY id",
        now,
    ):
        await add_spend(tx, day, model, input_tokens, output_tokens, usd, abandoned=True)
        await tx.execute("DELETE FROM om_spend_reservations WHERE id = $1", rid)


async def _totals(tx: Tx, day: str, month: tuple[str, str]) -> SpendTotals:
    out = SpendTotals()
    spent = "input_tokens + output_tokens"
    for table, usd in (("om_spend", "usd"), ("om_spend_reservations", "COALESCE(usd, 0)")):
        row = await tx.fetchrow(
            f"SELECT COALESCE(SUM(CASE WHEN day = $1 THEN {spent} ELSE 0 END), 0),"
            f" COALESCE(SUM(CASE WHEN day = $1 THEN {usd} ELSE 0 END), 0),"
            f" COALESCE(SUM({spent}), 0), COALESCE(SUM({usd}), 0) FROM {table} WHERE day >= $2 AND day < $3",
            day,
            *month,
        )
        assert row is not None  # an aggregate always has a row
        out.day_tokens += int(row[0])
        out.day_usd += float(row[1])
        out.month_tokens += int(row[2])
        out.month_usd += float(row[3])
        if table == "om_spend_reservations":
            out.reserved_tokens, out.reserved_usd = int(row[0]), float(row[1])
    return out


async def reserve(tx: Tx, reservation: Reservation, caps: dict[str, float], month: tuple[str, str]) -> Reserved:
    """Hold a call's estimate against the caps (config keys: daily_tokens, monthly_usd...), all processes in
    turn: made only when settled spend, open reservations and this estimate stay within every cap. `month`:
    the first day of the reservation's month and of the next one. A refusal is counted."""
    await tx.lock_key(LOCK)
    await _fold_abandoned(tx, await tx.epoch())
    totals = await _totals(tx, reservation.day, month)
    tokens = reservation.input_tokens + reservation.output_tokens
    for cap in ("monthly_usd", "monthly_tokens", "daily_usd", "daily_tokens"):
        limit = caps.get(cap)
        asked = (reservation.usd or 0.0) if cap.endswith("usd") else tokens
        if limit is not None and totals.spent(cap) + asked > limit:
            refused = (tokens, reservation.usd or 0.0)
            await add_spend(tx, reservation.day, reservation.model, 0, 0, 0.0, refused=refused)
            return Reserved(False, totals, cap)
    # A call fits: an earlier refusal is no reason to wait any more.
    await tx.execute(
        "UPDATE om_spend SET refused_tokens = 0, refused_usd = 0 WHERE day >= $1 AND day < $2"
        " AND (refused_tokens <> 0 OR refused_usd <> 0)",
        *month,
    )
    await tx.execute(
        "INSERT INTO om_spend_reservations (id, day, model, input_tokens, output_tokens, usd, expires_at, created_at)"
        " VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        reservation.id,
        reservation.day,
        reservation.model,
        reservation.input_tokens,
        reservation.output_tokens,
        reservation.usd,
        await tx.epoch() + reservation.ttl,
        now_iso(),
    )
    return Reserved(True, totals)


async def settle(
    tx: Tx,
    reservation_id: str,
    input_tokens: int,
    output_tokens: int,
    usd: float | None,
    *,
    model: str | None = None,
    abandoned: bool = False,
    released: bool = False,
) -> bool:
    """Replace a reservation by what the call used (`abandoned`: its estimate, the call's fate unknown;
    `released`: nothing, no call was billed), on the day it was reserved for; False when it had been
    folded in as abandoned already."""
    await tx.lock_key(LOCK)
    row = await tx.fetchrow(
        "SELECT day, model, input_tokens, output_tokens, usd FROM om_spend_reservations WHERE id = $1", reservation_id
    )
    if row is None:
        return False
    day, reserved_model, reserved_in, reserved_out, reserved_usd = row
    await tx.execute("DELETE FROM om_spend_reservations WHERE id = $1", reservation_id)
    if released:
        return True
    if abandoned:
        input_tokens, output_tokens, usd = reserved_in, reserved_out, reserved_usd
    await add_spend(tx, day, model or reserved_model, input_tokens, output_tokens, usd, abandoned=abandoned)
    return True
