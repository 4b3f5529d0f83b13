"""Working memory: a small Markdown note or JSON object about the user or the task."""

from om_mcp.engine.working_memory.render import UPDATE_TOOL, render_for_context
from om_mcp.engine.working_memory.update import (
    MEMORY_FIELD,
    UpdateResult,
    WorkingMemoryError,
    apply_update,
    deep_merge,
    initial_value,
    is_empty,
)

__all__ = [
    "MEMORY_FIELD",
    "UPDATE_TOOL",
    "UpdateResult",
    "WorkingMemoryError",
    "apply_update",
    "deep_merge",
    "initial_value",
    "is_empty",
    "render_for_context",
]
