"""What the store raises. `field` names the request input at fault, when one is."""

from __future__ import annotations


class StoreError(Exception):
    """A request the stored data does not allow (an id clash, a thread of another resource)."""

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.field = field


class NotFound(StoreError):
    """The thread, record or message does not exist."""


class DatabaseRefused(Exception):
    """The database file cannot be used (not ours, too new, corrupt, unwritable).

    The message is one line that says what to do; start-up prints it and exits.
    """


class StoreUnavailable(Exception):
    """The database cannot take a write right now (read-only file, full disk)."""
