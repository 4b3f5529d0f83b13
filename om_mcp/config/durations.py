"""Idle-time settings: milliseconds, "30s"/"5m"/"1hr" strings, "auto" or false."""

from __future__ import annotations

import re

_UNITS = {
    "ms": 1,
    "s": 1000,
    "sec": 1000,
    "m": 60_000,
    "min": 60_000,
    "h": 3_600_000,
    "hr": 3_600_000,
    "hour": 3_600_000,
    "hours": 3_600_000,
    "d": 86_400_000,
    "day": 86_400_000,
}
_PATTERN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]+)\s*$")


def parse_idle(value: int | float | str | bool | None) -> int | str | None:
    """Return milliseconds, "auto", or None (off). Raises ValueError on nonsense."""
    if value is None or value is False:
        return None
    if value is True:
        raise ValueError("activate_after_idle: use a duration, 'auto' or false, not true")
    if isinstance(value, (int, float)):
        if value <= 0:
            raise ValueError(f"activate_after_idle must be positive, got {value}")
        return int(value)
    text = value.strip().lower()
    if text == "auto":
        return "auto"
    if text.isdigit():
        return parse_idle(int(text))
    match = _PATTERN.match(text)
    if not match or match.group(2) not in _UNITS:
        raise ValueError(f"activate_after_idle: cannot read {value!r} (try 300000, '30s', '5m', '1hr' or 'auto')")
    return parse_idle(float(match.group(1)) * _UNITS[match.group(2)])
