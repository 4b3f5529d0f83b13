"""Errors the engine raises for bad requests. `field` names the input at fault."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TypeVar

from om_mcp.store.errors import NotFound as StoreNotFound

# StoreUnavailable, a database that cannot take a write (read-only, full): raised by any operation,
# named for callers here.
from om_mcp.store.errors import StoreError, StoreUnavailable

T = TypeVar("T")


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


async def translated(call: Awaitable[T]) -> T:
    """Store errors as the engine's own, naming the field."""
    try:
        return await call
    except StoreNotFound as error:
        raise NotFound(str(error), field=error.field) from None
    except StoreError as error:
        raise InputError(str(error), field=error.field) from None
    except StoreUnavailable as error:
        raise Unavailable(str(error)) from None
