"""Turn a record's messages and cycle-ending events into the page's time series.

    series = build_series(events, message_threshold=30_000, observation_threshold=40_000,
                          messages=[(seq, created_at, tokens), ...])

No event is written per append: the unobserved line rises with each stored
message (its date, its stored token count), and every cycle-ending event resets
both lines to the `windows` the store recorded in the cycle's own commit
(`unobserved_tokens`, `observation_tokens`, the thresholds, and `seq`, the newest
message those numbers include). Messages are placed by seq against the events,
so a message appended after a cycle counts after it even when its date is
older (imported history); its time is clamped between its neighbours so the
line runs forward. Events without `windows` (older databases) are placed by
time and applied as token deltas.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from om_mcp.server.http.ui.contract import Cycle, SeriesPoint, ThreadSeries

_END_KINDS = {
    "data-om-observation-end": "observation",
    "data-om-observation-failed": "observation",
    "data-om-buffering-end": "buffering",
    "data-om-buffering-failed": "buffering",
    "data-om-observation-skipped": "observation",
    "data-om-buffering-skipped": "buffering",
    "data-om-activation": "activation",
}
_TIME_FIELDS = ("at", "completed_at", "activated_at", "failed_at", "skipped_at", "created_at")
MAX_POINTS = 2000  # message-only points beyond this are thinned; every cycle keeps its point


class _Lines:
    def __init__(self, message_threshold: int, observation_threshold: int) -> None:
        self.unobserved = self.observations = 0
        self.thresholds = [message_threshold, observation_threshold]
        self.shared: int | None = None
        self.last: datetime | None = None
        self.points: list[tuple[SeriesPoint, bool]] = []  # (point, made by a cycle)

    def at(self, when: datetime, cap: datetime | None = None) -> datetime:
        if cap is not None and when > cap:
            when = cap
        if self.last is not None and when < self.last:
            when = self.last
        self.last = when
        return when

    def point(self, when: datetime, cycle: bool) -> None:
        threshold = self.thresholds[0]
        if self.shared is not None:
            threshold = max(self.shared - self.observations, threshold)
        self.points.append(
            (
                SeriesPoint(
                    at=when.isoformat(),
                    unobserved_tokens=max(self.unobserved, 0),
                    observation_tokens=max(self.observations, 0),
                    message_threshold=threshold,
                    observation_threshold=self.thresholds[1],
                ),
                cycle,
            )
        )


def build_series(
    events: Iterable[dict[str, Any]],
    *,
    message_threshold: int,
    observation_threshold: int,
    messages: Iterable[Sequence[Any]] = (),
    max_points: int = MAX_POINTS,
) -> ThreadSeries:
    """`messages`: (seq, created_at, tokens), or (created_at, tokens) in order; `events`: event
    dicts (payload fields at the top level, `id` and `created_at` when read back), any order."""
    queue = []
    for index, item in enumerate(messages):
        seq, at_text, tokens = item if len(item) == 3 else (index + 1, *item)
        at = _parse(at_text)
        if at is not None:
            queue.append((seq, at, int(tokens or 0)))
    queue.sort(key=lambda m: m[0])
    timed = [(e, _when(e)) for e in events]
    ordered = sorted(
        ((e, at) for e, at in timed if at is not None),
        key=lambda pair: (pair[0].get("id") is None, pair[0].get("id") or 0, pair[1]),
    )
    lines = _Lines(message_threshold, observation_threshold)
    cycles: list[Cycle] = []
    next_message = 0
    for event, at in ordered:
        windows = event.get("windows") if isinstance(event.get("windows"), dict) else None
        if windows is None and _END_KINDS.get(event.get("type", "")) is None:
            continue  # a start, a title update...: nothing to plot
        upto = windows.get("seq") if windows else None
        while next_message < len(queue) and (
            queue[next_message][0] <= upto if upto is not None else queue[next_message][1] <= at
        ):
            _, when, tokens = queue[next_message]
            lines.unobserved += tokens
            lines.point(lines.at(when, cap=at), cycle=False)
            next_message += 1
        if windows:
            lines.unobserved = int(windows.get("unobserved_tokens", lines.unobserved))
            lines.observations = int(windows.get("observation_tokens", lines.observations))
            lines.thresholds = [
                int(windows.get("message_threshold", lines.thresholds[0])),
                int(windows.get("observation_threshold", lines.thresholds[1])),
            ]
            lines.shared = windows.get("shared_budget")
        else:
            lines.unobserved, lines.observations = _apply(event, lines.unobserved, lines.observations)
        cycle = _cycle(event, lines.at(at))
        if cycle is not None:
            cycles.append(cycle)
        lines.point(lines.last, cycle=True)  # type: ignore[arg-type]
    for _, when, tokens in queue[next_message:]:
        lines.unobserved += tokens
        lines.point(lines.at(when), cycle=False)
    return ThreadSeries(points=_thin(lines.points, max_points), cycles=cycles)


def _thin(points: list[tuple[SeriesPoint, bool]], limit: int) -> list[SeriesPoint]:
    """Every cycle's point, and every n-th message point (always the one just before a cycle)."""
    if len(points) <= limit:
        return [p for p, _ in points]
    step = -(-len(points) // limit)
    kept = []
    for index, (point, cycle) in enumerate(points):
        before_cycle = index + 1 < len(points) and points[index + 1][1]
        if cycle or before_cycle or index % step == 0 or index == len(points) - 1:
            kept.append(point)
    return kept


def _apply(event: dict[str, Any], unobserved: int, observations: int) -> tuple[int, int]:
    """The windows after one event, from its token fields alone."""
    kind = event.get("type")
    reflection = event.get("operation_type") == "reflection"
    if kind == "data-om-observation-end":
        if reflection:
            return unobserved, int(event.get("observation_tokens") or 0)
        return unobserved - int(event.get("tokens_observed") or 0), observations + int(
            event.get("observation_tokens") or 0
        )
    if kind == "data-om-activation":
        if reflection:
            return unobserved, int(event.get("observation_tokens") or 0)
        return unobserved - int(event.get("tokens_activated") or 0), observations + int(
            event.get("observation_tokens") or 0
        )
    return unobserved, observations  # buffering is not active yet; failures change nothing


def _cycle(event: dict[str, Any], at: datetime) -> Cycle | None:
    kind = _END_KINDS.get(event.get("type", ""))
    if kind is None or event.get("retrying"):
        return None
    if event.get("operation_type") == "reflection":
        kind = "reflection"
    usage = found if isinstance(found := event.get("usage"), dict) else {}
    failed = str(event.get("type", "")).endswith("-failed")
    return Cycle(
        at=at.isoformat(),
        kind=kind,
        ok=not failed,
        trigger=event.get("trigger") or event.get("triggered_by"),
        duration_ms=_int(event.get("duration_ms")),
        cost=_float(usage.get("cost")),
        model=event.get("model"),
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
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
