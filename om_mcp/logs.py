"""Logging for a process whose stdout may belong to the protocol: stderr only,
one line per problem, and the same warning at most once a minute."""

from __future__ import annotations

import logging
import sys
import time

REPEAT_SECONDS = 60.0
_last: dict[str, tuple[float, int]] = {}


def configure(level: str = "info") -> None:
    logging.basicConfig(
        stream=sys.stderr, level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s", force=True
    )


def warn_once(logger: logging.Logger, message: str, *args: object) -> None:
    """A warning, unless the same one was logged less than a minute ago (then debug)."""
    text = message % args if args else message
    now = time.monotonic()
    last, repeats = _last.get(text, (0.0, 0))
    if now - last < REPEAT_SECONDS:
        _last[text] = (last, repeats + 1)
        logger.debug("%s", text)
        return
    _last[text] = (now, 0)
    logger.warning("%s%s", text, f" (repeated {repeats} times)" if repeats else "")


def one_line(error: BaseException | str) -> str:
    """An error as one line of at most 300 characters: what failed, never a traceback."""
    text = " ".join(str(error).split()) or type(error).__name__
    return text if len(text) <= 300 else text[:297] + "..."
