"""The memory engine: messages, token counts, observation, reflection, recall.

Nothing here knows about MCP or transports. `Memory` is the public facade; the
server and the CLI use only it, its results and its errors. Names load on first
use, so importing a light part (errors, the recall query) does not import the
whole engine.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from om_mcp.lazy import face

_HOMES = {
    "Access": "om_mcp.store",  # the caller's resources: a store type, named for every layer above
    "EVERY_RESOURCE": "om_mcp.store",
    "NO_RESOURCE": "om_mcp.store",
    "AppendOutcome": "results",
    "ContextOut": "results",
    "DeleteOut": "results",
    "Hints": "results",
    "ObservationGroup": "results",
    "ObservationLine": "results",
    "Status": "results",
    "ThreadOut": "results",
    "ThreadRow": "results",
    "Window": "results",
    "WorkingMemoryOut": "results",
    "observation_group": "results",
    "CycleOutcome": "observation.cycle",
    "EventType": "observation.events",
    "Hooks": "observation.events",
    "EngineError": "errors",
    "InputError": "errors",
    "NotFound": "errors",
    "Unavailable": "errors",
    "StoreUnavailable": "errors",
    "Memory": "memory",
    "ConsentRefused": "grants",
    "Grants": "grants",
    "Issued": "grants",
    "ThreadState": "overview",
    "MessageRead": "overview",
    "MessageIn": "om_mcp.messages",  # the shape every way in speaks, below the engine
    "RecallOut": "recall.query",
    "RecallQuery": "recall.query",
    "message_threshold": "observation.thresholds",
    "observation_lines": "observation.lines",
    "is_user_stated": "observation.lines",
    "line_parts": "observation.lines",
    "tenant_spend": "results",
}
# Spelled out (not sorted(_HOMES)) so linters and type checkers see the re-exports.
__all__ = [
    "EVERY_RESOURCE",
    "NO_RESOURCE",
    "Access",
    "AppendOutcome",
    "ConsentRefused",
    "ContextOut",
    "CycleOutcome",
    "DeleteOut",
    "EngineError",
    "EventType",
    "Grants",
    "Hints",
    "Hooks",
    "InputError",
    "Issued",
    "Memory",
    "MessageIn",
    "MessageRead",
    "NotFound",
    "ObservationGroup",
    "ObservationLine",
    "RecallOut",
    "RecallQuery",
    "Status",
    "StoreUnavailable",
    "ThreadOut",
    "ThreadRow",
    "ThreadState",
    "Unavailable",
    "Window",
    "WorkingMemoryOut",
    "is_user_stated",
    "line_parts",
    "message_threshold",
    "observation_group",
    "observation_lines",
    "tenant_spend",
]

if TYPE_CHECKING:
    from om_mcp.engine.errors import EngineError, InputError, NotFound, StoreUnavailable, Unavailable
    from om_mcp.engine.grants import ConsentRefused, Grants, Issued
    from om_mcp.engine.memory import Memory
    from om_mcp.engine.observation.cycle import CycleOutcome
    from om_mcp.engine.observation.events import EventType, Hooks
    from om_mcp.engine.observation.lines import is_user_stated, line_parts, observation_lines
    from om_mcp.engine.observation.thresholds import message_threshold
    from om_mcp.engine.overview import MessageRead, ThreadState
    from om_mcp.engine.recall.query import RecallOut, RecallQuery
    from om_mcp.engine.results import (
        AppendOutcome,
        ContextOut,
        DeleteOut,
        Hints,
        ObservationGroup,
        ObservationLine,
        Status,
        ThreadOut,
        ThreadRow,
        Window,
        WorkingMemoryOut,
        observation_group,
        tenant_spend,
    )
    from om_mcp.messages import MessageIn
    from om_mcp.store import EVERY_RESOURCE, NO_RESOURCE, Access

__getattr__ = face(__name__, _HOMES)
