"""The memory engine: messages, token counts, observation, reflection, recall.

Nothing here knows about MCP or transports. `Memory` is the public facade;
the server and the CLI use only it, its results and its errors.
"""

from om_mcp.engine.errors import EngineError, InputError, NotFound, Unavailable
from om_mcp.engine.memory import Memory
from om_mcp.engine.messages import MessageIn
from om_mcp.engine.observation.cycle import CycleOutcome
from om_mcp.engine.observation.events import EventType, Hooks
from om_mcp.engine.recall import RecallOut, RecallQuery
from om_mcp.engine.results import AppendOutcome, ContextOut, DeleteOut, Status, ThreadOut, WorkingMemoryOut

__all__ = [
    "AppendOutcome", "ContextOut", "CycleOutcome", "DeleteOut", "EngineError", "EventType", "Hooks", "InputError",
    "Memory", "MessageIn", "NotFound", "RecallOut", "RecallQuery", "Status", "ThreadOut", "Unavailable",
    "WorkingMemoryOut",
]
