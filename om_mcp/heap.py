"""Keep a serving process's long-lived heap out of Python's full collections.

A full (generation 2) collection scans every tracked object: after start-up that is
about 90k objects (the engine, the SDK, pydantic models), a 40 ms pause, and once
litellm is imported about 430k, a 250 ms pause, taken by whichever turn happens to
allocate at that moment. Those objects live as long as the process, so after each big
import they are frozen (moved to the permanent generation) and later collections scan
only what was made since. Plain reference counting still frees everything as usual.

Only a process that is ours does this (`om-mcp serve`, `om-mcp worker`): a library
user's process, or a test run, keeps its collector as it was.
"""

from __future__ import annotations

import gc

_enabled = False


def enable() -> None:
    """This process serves om-mcp and nothing else: let `settle` freeze its heap."""
    global _enabled
    _enabled = True


def settle() -> None:
    """After a big import: freeze what exists now (no collection first: that would be the pause)."""
    if _enabled:
        gc.freeze()
