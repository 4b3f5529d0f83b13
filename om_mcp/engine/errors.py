"""Errors the engine raises for bad requests. `field` names the input at fault."""

from __future__ import annotations

from om_mcp.store import NotFound, StoreError


class InputError(StoreError):
    """The request is invalid; nothing was changed."""


__all__ = ["InputError", "NotFound", "StoreError"]
