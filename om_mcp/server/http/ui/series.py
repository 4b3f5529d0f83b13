"""Turn a thread's events (and messages) into the page's time series.

    series = build_series(events, message_threshold=30_000, observation_threshold=40_000,
                          messages=[(m.created_at, m.tokens) for m in thread_messages])

`events` are the engine's event dicts (type, cycle_id, payload fields at the top
level, and `created_at` when read back from the store), any order. Exact when
the events carry `windows` (see `contract`); otherwise the windows are rebuilt
from the message tokens and each cycle's token deltas.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any

from om_mcp.server.http.ui.contract import Cycle, SeriesPoint, ThreadSeries

_END_KINDS = {
    "data-om-observation-end": "observation",
    "data-om-observation-failed": "observation",
    "data-om-buffering-end": "buffering",
    "data-om-buffering-failed": "buffering",
    "data-om-activation": "activation",
}
_TIME_FIELDS = ("at", "completed_at", "activated_at", "failed_at", "created_at")


def build_series(
    events: Iterable[dict[str, Any]],
    *,
    message_threshold: int,
    observation_threshold: int,
    messages: Iterable[tuple[str, int]] = (),
) -> ThreadSeries:
    timeline: list[tuple[datetime, int, str, Any]] = []
    exact = False
    for event in events:
        at = _when(event)
        if at is None:
            continue
        if event.get("windows"):
            exact = True
        timeline.append((at, 1, "event", event))
    if not exact:
        for at_text, tokens in messages:
            at = _parse(at_text)
            if at is not None:
                timeline.append((at, 0, "message", tokens))  # a message counts before a cycle at the same instant
    timeline.sort(key=lambda item: (item[0], item[1]))
    thresholds = [message_threshold, observation_threshold]
    unobserved = observations = 0
    points: list[SeriesPoint] = []
    cycles: list[Cycle] = []
    for at, _, what, item in timeline:
        if what == "message":
            unobserved += int(item or 0)
        else:
            event = item
            windows = event.get("windows")
            if isinstance(windows, dict):
                unobserved = int(windows.get("unobserved_tokens", unobserved))
                observations = int(windows.get("observation_tokens", observations))
                thresholds = [int(windows.get("message_threshold", thresholds[0])),
                              int(windows.get("observation_threshold", thresholds[1]))]
            elif not exact:
                unobserved, observations = _apply(event, unobserved, observations)
            cycle = _cycle(event, at)
            if cycle is not None:
                cycles.append(cycle)
            elif event.get("type") != "data-om-tokens":
                continue  # starts, title updates...: no change to plot
        points.append(SeriesPoint(
            at=at.isoformat(), unobserved_tokens=max(unobserved, 0), observation_tokens=max(observations, 0),
            message_threshold=thresholds[0], observation_threshold=thresholds[1],
        ))
    return ThreadSeries(points=points, cycles=cycles)


def _apply(event: dict[str, Any], unobserved: int, observations: int) -> tuple[int, int]:
    """The windows after one event, from its token fields alone."""
    kind = event.get("type")
    reflection = event.get("operation_type") == "reflection"
    if kind == "data-om-observation-end":
        if reflection:
            return unobserved, int(event.get("observation_tokens") or 0)
        return unobserved - int(event.get("tokens_observed") or 0), observations + int(
            event.get("observation_tokens") or 0)
    if kind == "data-om-activation":
        if reflection:
            return unobserved, int(event.get("observation_tokens") or 0)
        return unobserved - int(event.get("tokens_activated") or 0), observations + int(
            event.get("observation_tokens") or 0)
    return unobserved, observations  # buffering is not active yet; failures change nothing


def _cycle(event: dict[str, Any], at: datetime) -> Cycle | None:
    kind = _END_KINDS.get(event.get("type", ""))
    if kind is None:
        return None
    if event.get("operation_type") == "reflection":
        kind = "reflection"
    usage = event.get("usage") if isinstance(event.get("usage"), dict) else {}
    failed = str(event.get("type", "")).endswith("-failed")
    return Cycle(
        at=at.isoformat(), kind=kind, ok=not failed, trigger=event.get("trigger") or event.get("triggered_by"),
        duration_ms=_int(event.get("duration_ms")), cost=_float(usage.get("cost")), model=event.get("model"),
        tokens_in=_int(_first(event, "tokens_observed", "tokens_buffered", "tokens_activated", "tokens_attempted")),
        tokens_out=_int(_first(event, "observation_tokens", "buffered_tokens")),
    )


def _first(event: dict[str, Any], *names: str) -> Any:
    return next((event[n] for n in names if event.get(n) is not None), None)


def _when(event: dict[str, Any]) -> datetime | None:
    for name in _TIME_FIELDS:
        parsed = _parse(event.get(name))
        if parsed is not None:
            return parsed
    return None


def _parse(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
