"""Database locations as they may be shown: a PostgreSQL URL without its password."""

from __future__ import annotations

import os
from urllib.parse import urlsplit, urlunsplit


def redact(url: str) -> str:
    """The URL without its password, for logs and status."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    user = f"{parts.username}@" if parts.username else ""
    return urlunsplit((parts.scheme, user + host, parts.path, parts.query, parts.fragment))


def describe(location: str) -> str:
    """The location without a password, and a SQLite path made absolute (`sqlite:///...`)."""
    if location.startswith(("postgresql://", "postgres://")):
        return redact(location)
    return "sqlite://" + os.path.abspath(location.removeprefix("sqlite://"))
