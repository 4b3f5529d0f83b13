"""How the look-at-your-memory commands describe things: dates, cycles, threads, the model."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from om_mcp.store import Event, ThreadState

ENDED = {
    "data-om-observation-end": "observed",
    "data-om-buffering-end": "buffered",
    "data-om-activation": "activated",
    "data-om-observation-failed": "failed",
    "data-om-buffering-failed": "buffering failed",
    "data-om-observation-skipped": "skipped",
    "data-om-buffering-skipped": "buffering skipped",
}


def when(iso: str | None) -> str:
    """'2026-03-02 09:14' in the time's own zone, or '' when unknown."""
    if not iso:
        return ""
    try:
        return datetime.fromisoformat(iso).strftime("%Y-%m-%d %H:%M")
    except ValueError:
        return iso


def count(n: int, word: str) -> str:
    """'1 thread', '2 threads', '1,204 messages'."""
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def one_line(text: str, width: int = 100) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def cycle(event: Event | None) -> dict[str, Any] | None:
    """A cycle-ending event as plain data: what, when, how long, and the error if it failed."""
    if event is None:
        return None
    p = event.payload
    what = ENDED.get(event.type, event.type.removeprefix("data-om-"))
    if p.get("operation_type") == "reflection":
        what = "reflection " + what if event.type.endswith(("failed", "skipped")) else "reflected"
    return {
        "what": what,
        "at": event.created_at,
        "ok": not event.type.endswith("failed"),
        "duration_ms": p.get("duration_ms"),
        "error": p.get("error"),
        "reason": p.get("discarded"),  # a skip's: what changed under it
    }


def cycle_text(event: Event | None) -> str:
    c = cycle(event)
    if c is None:
        return ""
    took = f" ({c['duration_ms'] / 1000:.1f} s)" if c["duration_ms"] else ""
    said = c["error"] or c["reason"]
    error = f": {one_line(said, 60)}" if said else ""
    return f"{c['what']} {when(c['at'])}{took}{error}"


def thread_row(state: ThreadState) -> dict[str, Any]:
    t = state.thread
    return {
        "thread": t.id,
        "resource": t.resource_id,
        "title": t.title,
        "messages": t.message_count,
        "unobserved_tokens": state.unobserved_tokens,
        "observation_tokens": state.observation_tokens,
        "generation": state.generation,
        "created_at": t.created_at,
        "updated_at": t.updated_at,
        "last_observed_at": state.last_observed_at,
        "last_cycle": cycle(state.last_cycle),
    }


THREAD_COLUMNS = [
    ("thread", "thread"),
    ("resource", "resource"),
    ("title", "title"),
    ("messages", "messages"),
    ("unobserved_tokens", "unobserved"),
    ("observation_tokens", "observations"),
    ("generation", "gen"),
    ("updated", "updated"),
    ("last", "last cycle"),
]


def thread_table_rows(states: list[ThreadState]) -> list[dict[str, Any]]:
    """The table's title is the one the status page shows: set, the Observer's, else the first prompt's start
    (a session a hook or `ingest` recorded has no other name)."""
    from om_mcp.engine.overview import MemoryOverview

    return [
        {
            **thread_row(s),
            "title": one_line(MemoryOverview.title(s)[0] or "", 40),
            "updated": when(s.thread.updated_at),
            "last": cycle_text(s.last_cycle),
        }
        for s in states
    ]


async def model_state(memory: Any) -> dict[str, Any]:
    """Can observation run (no network: configuration, keys present, the shared breaker)?"""
    engine = memory.observation
    router = engine.observer.router
    targets = router.targets(0) if not router.by_size else []
    health = await engine.health.get(targets[0].model) if targets and not engine.injected_client else None
    state = engine.observation_state(health, await engine.budget.state())
    return {**state.model_dump(), "observer": router.describe(), "reflector": engine.reflector.router.describe()}


def paused_line(spend: dict[str, Any]) -> str | None:
    """What a reached spend cap means, in one line (which cap, until when), or None."""
    if not spend.get("reason"):
        return None
    until = when(spend.get("resumes_at"))
    return (
        f"observation PAUSED by a spend cap (observational_memory.budget.{spend['reached']}): {spend['reason']}"
        + (f" ({until} UTC)" if until else "")
        + "; messages are kept and observed then"
    )
