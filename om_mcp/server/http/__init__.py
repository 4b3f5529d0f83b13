"""Streamable HTTP that can face a network: bearer tokens bound to resources,
Host/Origin checks, owned and capped sessions, a rate limit per caller; and the
status page (`ui/`).

Names load on first use, so the tool layer's `from om_mcp.server.http.auth import ...`
does not pull the HTTP app into a stdio server.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {
    "build_http_app": "app",
    "access_of": "auth",
    "caller_access": "auth",
    "bind_refusal": "run",
    "run_http": "run",
    "serve_http": "run",
}
__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
