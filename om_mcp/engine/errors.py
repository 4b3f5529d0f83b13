"""Errors the engine raises for bad requests. `field` names the input at fault."""

from __future__ import annotations

# A database that cannot take a write (read-only, full): raised by any operation, named for callers here.
from om_mcp.store.errors import StoreUnavailable  # noqa: F401


class EngineError(ValueError):
    """A request the engine refuses; nothing was changed."""

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.field = field


class InputError(EngineError):
    """The request is invalid."""


class NotFound(EngineError):
    """The thread, resource or message does not exist."""


class Unavailable(EngineError):
    """The database cannot take the write now (read-only file, full disk)."""
