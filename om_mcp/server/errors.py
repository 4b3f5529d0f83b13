"""Every tool error names what was wrong, in one line.

The SDK reports a bad argument as "Error executing tool X: <pydantic dump>" and a
crash as the bare "Error executing tool X"; `MemoryServer` rewrites both, and
`tool_call` turns engine errors into tool errors that name their field.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from mcp.server.mcpserver.exceptions import ToolError
from pydantic import ValidationError

from om_mcp.engine import EngineError

log = logging.getLogger(__name__)
F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


def describe_validation(error: ValidationError) -> str:
    """'field.path: message' for each problem, on one line."""
    problems = []
    for item in error.errors()[:5]:
        path = ".".join(str(p) for p in item["loc"] if not str(p).startswith(("function-", "tagged-union")))
        problems.append(f"{path or 'arguments'}: {item['msg']}")
    return "; ".join(problems)


def engine_error(error: EngineError) -> ToolError:
    text = str(error)
    prefix = f"{error.field}: " if error.field and not text.startswith(error.field) else ""
    return ToolError(prefix + text)


def tool_call(handler: F) -> F:
    """Engine errors become tool errors that name the field; nothing else is caught here."""

    @functools.wraps(handler)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return await handler(*args, **kwargs)
        except EngineError as error:
            raise engine_error(error) from None

    return wrapper  # type: ignore[return-value]
