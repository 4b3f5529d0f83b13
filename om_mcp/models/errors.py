"""What a model call can fail with, and whether trying again may help.

Failures are of three kinds, and the engine treats each differently:
- transient (timeouts, connection errors, 408/425/429/5xx): back off across
  turns, then try again;
- permanent (auth, not found, bad request, context too long): never retried;
  the model stays paused until its configuration changes or an operator resumes it;
- unavailable: no call was made (the model is paused or backing off, or has no key).

An answer with nothing usable in it (a refusal, a content filter, an empty text, a
format ignored) is a failure too (`UnusableAnswer`): the call cost as much as a good
one, so it backs off like a transient error, and a model that keeps doing it is paused.
"""

from __future__ import annotations

from typing import Any


class ModelError(Exception):
    """A model call failed.

    Raised by a client for one failed attempt, and by the router when every
    attempt of a cycle failed (then `last_error` is the last attempt's error).
    """

    def __init__(
        self,
        message: str,
        *,
        last_error: str | None = None,
        transient: bool = False,
        status_code: int | None = None,
        model: str | None = None,
        attempts: int = 0,
        timed_out: bool = False,
        reached: bool = False,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.last_error = last_error if last_error is not None else message
        self.transient = transient
        self.status_code = status_code
        self.model = model
        self.attempts = attempts
        # The call was cut on our side: the provider may have done (and billed) the work all the same.
        self.timed_out = timed_out
        # The request reached the model's side, which answered with this error (an HTTP status, the
        # claude CLI's API error, a client that declined a sampling request): a request made, nothing used.
        self.reached = reached


class TransientModelError(ModelError):
    """A failure worth retrying; scripted clients raise it to simulate flaky providers."""

    def __init__(self, message: str = "transient model failure", **kwargs: Any) -> None:
        kwargs.setdefault("transient", True)
        super().__init__(message, **kwargs)


class UnusableAnswer(ModelError):
    """The model answered, but with nothing the caller can use. The message says what
    was wrong and quotes a short, neutralised excerpt of what it said."""

    def __init__(self, message: str, **kwargs: Any) -> None:
        kwargs.setdefault("transient", True)
        super().__init__(message, **kwargs)


class ModelSelectionError(ModelError):
    """No model fits the request (input above the largest by-size threshold).

    Raised before any model call; the engine treats it like a tripwire: the cycle stops and a failed event
    is recorded.
    """


class ModelUnavailable(ModelError):
    """No call was made: every model of the choice is paused, backing off, or not set up."""

    def __init__(self, message: str, *, retry_at: float | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.retry_at = retry_at


class CapReached(ModelUnavailable):
    """No call was made: its estimated cost would pass a spend cap (the engine's meter refused it)."""


TRANSIENT_STATUS = frozenset({408, 425, 429})


def is_transient_status(status: int | None) -> bool:
    return status is not None and (status in TRANSIENT_STATUS or 500 <= status <= 599)


def is_transient(exc: BaseException) -> bool:
    """Whether retrying after `exc` may help; unknown errors are not retried."""
    if isinstance(exc, ModelError):
        return exc.transient
    if isinstance(exc, (TimeoutError, ConnectionError)):
        return True
    status = getattr(exc, "status_code", None)
    return isinstance(status, int) and is_transient_status(status)
