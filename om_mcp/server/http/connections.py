"""Connections facing a network: deadlines for what a client sends, and calm at the open-file limit.

uvicorn's h11 protocol keeps a connection that never finishes its request head for as
long as the client likes (one byte, then nothing: a file descriptor held forever), and
the event loop's accept loop, at the descriptor limit, logs a traceback for every
attempt of every pending connection (thousands a second). Here:

* `guarded_protocol` closes a connection that has not sent a whole request head within
  `header_timeout_seconds` of opening (or of the first byte of its next request), and
  one whose request body stops arriving for `idle_timeout_seconds`; between requests
  uvicorn's keep-alive timeout (set to the same idle time) applies. A response being
  streamed to the client (SSE) waits on no client bytes and has no deadline here. Each
  connection holds a slot of the server's `Slots` (`slots.py`: fair shares, idle ones
  closed first, then ones whose body trickles in below `min_body_bytes_per_second`); one
  that finds no slot answers its first request 503 and is closed.
* `calm_accept_failures` answers the loop's "out of system resource" reports: it sheds
  the pending connection (a spare descriptor makes room to accept and close it, so the
  client hears a reset instead of hanging in the backlog) and logs one line a minute
  saying how many were refused and what the limit is.
* `RepeatFilter` keeps uvicorn's per-request warnings ("Exceeded concurrency limit.",
  "Invalid HTTP request received.") to one line a minute each.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from om_mcp.server.http.slots import Slots

log = logging.getLogger(__name__)

REPORT_SECONDS = 60.0
BODY_GRACE_SECONDS = 1.0  # a body's rate is judged after this long: one packet late is no trickle
ACCEPT_FAILURE = "socket.accept() out of system resource"


class GuardedH11(H11Protocol):
    """uvicorn's h11 protocol with deadlines on what the client must send."""

    header_seconds = 10.0
    idle_seconds = 30.0
    min_body_rate = 1000  # bytes a second; 0: a trickling body is never expendable
    slots: Slots | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._deadline: asyncio.TimerHandle | None = None
        self._waiting_for = ""
        self._body_since: float | None = None  # when the current request's head was whole
        self._body_bytes = 0
        super().connection_made(transport)
        refused = self.slots.open(self, self.client) if self.slots is not None else None
        if refused is not None:
            self.app = refused_app(refused)  # this connection's requests only; then it closes
        self._expect("head", self.header_seconds)

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel()
        if self.slots is not None:
            self.slots.close(self)
        super().connection_lost(exc)

    @property
    def idle(self) -> bool:
        """No request of this connection is being served (so closing it loses nothing)."""
        return self.cycle is None or self.cycle.response_complete

    @property
    def trickling(self) -> bool:
        """Its request body has come slower than `min_body_rate` since the head (after the first
        second): a client holding a slot by sending its body a byte at a time, closed for room
        after the idle ones. A real client sends its body at once, so this never waits on one."""
        if self._body_since is None or not self.min_body_rate or self.conn.their_state is not h11.SEND_BODY:
            return False
        elapsed = self.loop.time() - self._body_since
        return elapsed >= BODY_GRACE_SECONDS and self._body_bytes < self.min_body_rate * elapsed

    def shed(self) -> None:
        """Closed to make room for a newer connection (`Slots`)."""
        who = f"{self.client[0]}:{self.client[1]}" if self.client else "a client"
        log.debug("closing the idle connection from %s to make room", who)
        self.transport.close()

    def data_received(self, data: bytes) -> None:
        if self.conn.their_state is h11.SEND_BODY:
            self._body_bytes += len(data)
        super().data_received(data)
        self._follow()

    def on_response_complete(self) -> None:
        if self.slots is not None:
            self.slots.touch(self)
        super().on_response_complete()  # arms the keep-alive timeout, or reads a pipelined request
        self._follow()

    def _follow(self) -> None:
        """Set the deadline for what the client owes now."""
        state = self.conn.their_state
        if state is h11.IDLE and self.conn.trailing_data[0]:
            if self._waiting_for != "head":  # from the first byte of a request head, not reset by more
                self._expect("head", self.header_seconds)
        elif state is h11.SEND_BODY:
            if self._body_since is None:
                self._body_since, self._body_bytes = self.loop.time(), 0
            self._expect("body", self.idle_seconds)  # reset by every piece of the body
        elif state is not h11.IDLE or self._waiting_for != "head":
            self._cancel()  # a whole request (or keep-alive idle, which uvicorn times)
        if state is not h11.SEND_BODY:
            self._body_since = None

    def _expect(self, what: str, seconds: float) -> None:
        self._cancel()
        self._waiting_for = what
        self._deadline = self.loop.call_later(seconds, self._expired, what, seconds)

    def _cancel(self) -> None:
        if getattr(self, "_deadline", None) is not None:
            self._deadline.cancel()  # type: ignore[union-attr]
        self._deadline, self._waiting_for = None, ""

    def _expired(self, what: str, seconds: float) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            who = f"{self.client[0]}:{self.client[1]}" if self.client else "a client"
            detail = "no whole request head" if what == "head" else "no more of the request body"
            log.debug("closing the connection from %s: %s after %g s", who, detail, seconds)
            self.transport.close()


def guarded_protocol(
    header_seconds: float, idle_seconds: float, slots: Slots | None = None, min_body_rate: int = 1000
) -> type[GuardedH11]:
    """The protocol class uvicorn should use, with these deadlines, slots and least body rate."""
    attributes = {
        "header_seconds": header_seconds,
        "idle_seconds": idle_seconds,
        "slots": slots,
        "min_body_rate": min_body_rate,
    }
    return type("GuardedH11", (GuardedH11,), attributes)


def refused_app(message: str) -> Any:
    """What a connection that found no slot answers: 503 saying which cap, then it closes."""
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32000, "message": message}}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"retry-after", b"1"),
        (b"connection", b"close"),
    ]

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 503, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return app


class AcceptFailures:
    """The loop's exception handler for accept failures at the descriptor limit."""

    def __init__(self, previous: Any, clock: Any = time.monotonic) -> None:
        self.previous = previous
        self.clock = clock
        self.refused = 0  # since the last line
        self.reported_at: float | None = None
        self.spare: int | None = _spare()
        self.limit = _open_file_limit()  # now: at the limit, even an import may fail

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if context.get("message") != ACCEPT_FAILURE:
            if self.previous is not None:
                self.previous(loop, context)
            else:
                loop.default_exception_handler(context)
            return
        self._shed(context.get("socket"))
        self.refused += 1
        now = self.clock()
        if self.reported_at is None or now - self.reported_at >= REPORT_SECONDS:
            error = context.get("exception")
            reason = getattr(error, "strerror", None) or str(error)
            log.warning(
                "refusing new connections: %s (the open-file limit, ulimit -n, is %s); %d refused%s;"
                " raise the limit or lower server.http.max_connections",
                reason,
                self.limit,
                self.refused,
                "" if self.reported_at is None else f" in the last {REPORT_SECONDS:.0f} s",
            )
            self.reported_at, self.refused = now, 0

    def _shed(self, sock: Any) -> None:
        """Accept the pending connection into the spare descriptor's place and close it."""
        raw = getattr(sock, "_sock", sock)
        if raw is None or self.spare is None:
            return
        os.close(self.spare)
        self.spare = None
        try:
            conn, _ = raw.accept()
            conn.close()
        except OSError:
            pass
        finally:
            self.spare = _spare()


def _open_file_limit() -> str:
    try:
        import resource  # not on Windows
    except ImportError:
        return "unknown"
    return str(resource.getrlimit(resource.RLIMIT_NOFILE)[0])


def _spare() -> int | None:
    try:
        return os.open(os.devnull, os.O_RDONLY)
    except OSError:
        return None


def calm_accept_failures(loop: asyncio.AbstractEventLoop) -> AcceptFailures:
    handler = AcceptFailures(loop.get_exception_handler())
    loop.set_exception_handler(handler)
    return handler


class RepeatFilter(logging.Filter):
    """The same message at most once a minute; the next one says how many were dropped."""

    def __init__(self, clock: Any = time.monotonic) -> None:
        super().__init__()
        self.clock = clock
        self.seen: dict[str, tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        text = record.getMessage()
        now = self.clock()
        last, dropped = self.seen.get(text, (None, 0))
        if last is not None and now - last < REPORT_SECONDS:
            self.seen[text] = (last, dropped + 1)
            return False
        if len(self.seen) > 1000:
            self.seen.clear()
        self.seen[text] = (now, 0)
        if dropped:
            record.msg, record.args = f"{text} ({dropped} more like it in the last minute)", None
        return True
