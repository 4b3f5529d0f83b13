"""The memory engine: messages, token counts, observation, reflection, recall.

Nothing here knows about MCP or transports. `Memory` is the public facade;
the server and the CLI use only it, its results and its errors.

The names below load on first use, so a lean process (the host hook) can import
one pure module of the engine (`om_mcp.engine.tokens`, `om_mcp.engine.text`)
without paying for pydantic, the models and the observation cycles.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "EngineError": "om_mcp.engine.errors", "InputError": "om_mcp.engine.errors",
    "NotFound": "om_mcp.engine.errors", "Unavailable": "om_mcp.engine.errors",
    "Memory": "om_mcp.engine.memory", "MessageIn": "om_mcp.engine.messages",
    "CycleOutcome": "om_mcp.engine.observation.cycle",
    "EventType": "om_mcp.engine.observation.events", "Hooks": "om_mcp.engine.observation.events",
    "RecallOut": "om_mcp.engine.recall", "RecallQuery": "om_mcp.engine.recall",
    **{name: "om_mcp.engine.results" for name in (
        "AppendOutcome", "ContextOut", "DeleteOut", "Status", "ThreadOut", "WorkingMemoryOut")},
}

if TYPE_CHECKING:
    from om_mcp.engine.errors import EngineError, InputError, NotFound, Unavailable
    from om_mcp.engine.memory import Memory
    from om_mcp.engine.messages import MessageIn
    from om_mcp.engine.observation.cycle import CycleOutcome
    from om_mcp.engine.observation.events import EventType, Hooks
    from om_mcp.engine.recall import RecallOut, RecallQuery
    from om_mcp.engine.results import AppendOutcome, ContextOut, DeleteOut, Status, ThreadOut, WorkingMemoryOut


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'om_mcp.engine' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = sorted(_EXPORTS)
