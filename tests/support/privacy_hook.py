"""A `privacy.before_observation` hook for the tests: it sees each message after the built-in
rules and marks every text part, so a test can tell it ran, and ran last."""

from __future__ import annotations

from typing import Any


def mark_scrubbed(message: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {**part, "text": part["text"] + " (scrubbed)"} if part.get("type") == "text" else part
        for part in message["parts"]
    ]


def refuse(message: dict[str, Any]) -> None:
    raise RuntimeError("this hook refuses every message")
