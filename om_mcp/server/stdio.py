"""The stdio transport: newline-delimited JSON-RPC on the process's stdin and stdout.

It replaces the SDK's `stdio_server` (mcp 2.3.0), which
* drops a line it cannot parse without an answer, so the client waits for its timeout
  (a lone surrogate escape, nesting deeper than pydantic's ~200 levels, garbage);
* reads stdin on a non-daemon worker thread, so Ctrl-C waits for the next input line
  and a second Ctrl-C ends in a traceback;
* reads lines of any length into memory.
Here every line that is not a message gets a JSON-RPC error (-32700 or -32600) and one
log line on stderr, and serving goes on. The error carries the request's id whenever
the line names one: JSON that is not a valid message, and also a line that is not
valid UTF-8, holds raw control bytes, nests too deep or is too long to keep, whose id
`request_id.RequestId` finds in the raw bytes. Reading and writing happen on daemon threads, so a signal ends the
server at once. While serving, fd 0 reads /dev/null and fd 1 points at stderr (as in the
SDK): a stray print() or a child process cannot corrupt the wire.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.mcpserver import MCPServer
from mcp.shared.message import SessionMessage
from mcp_types import INTERNAL_ERROR, INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError
from pydantic import ValidationError

from om_mcp.server import sdk
from om_mcp.server.request_id import RequestId, request_id

log = logging.getLogger(__name__)

MAX_LINE_BYTES = 32 * 1024 * 1024  # one message; a longer line is answered with -32600 and skipped
SHUTDOWN_GRACE_SECONDS = 5.0  # after a signal, the longest clean-up may take before the process exits anyway
EXIT_ON_SIGNAL = 130


@dataclass(frozen=True)
class TooLong:
    """A line over the size limit; its bytes were skipped, not kept (but looked at for its id)."""

    size: int
    request_id: str | int | None = None


def parse_line(line: bytes) -> SessionMessage | JSONRPCError | None:
    """A message, the error answering a line that is not one, or None for a blank line."""
    text = line.strip().removeprefix(b"\xef\xbb\xbf")  # a byte order mark is no reason to refuse
    if not text:
        return None
    try:
        message = types.jsonrpc_message_adapter.validate_json(text, by_name=False)
    except ValidationError as error:
        problems = error.errors(include_input=False, include_url=False)
    else:
        if isinstance(message, types.JSONRPCNotification) and b'"id"' in text and "id" in json.loads(text):
            # The SDK reads a request whose id is null, a float or a bool as a notification
            # and never answers it; MCP allows only a string or an integer.
            return _error(None, INVALID_REQUEST, "Invalid request: id must be a string or an integer")
        return SessionMessage(message)
    try:
        # Python's parser takes deeper nesting and lone surrogates, so the reason can be precise.
        data: Any = json.loads(text)
    except (ValueError, RecursionError):
        reason = problems[0]["msg"].removeprefix("Invalid JSON: ")
        if "recursion limit" in reason:
            reason = "nested too deeply (the limit is about 200 levels)"
        return _error(request_id(text), PARSE_ERROR, f"Parse error: {reason}")
    return _error(_request_id(data), INVALID_REQUEST, f"Invalid request: {_reason(problems, data)}")


def _error(request_id: str | int | None, code: int, message: str) -> JSONRPCError:
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=message))


def _request_id(data: Any) -> str | int | None:
    # Only a request's id: echoing the id of a malformed *response* would resolve one of
    # the client's own pending requests with our error.
    if not isinstance(data, dict) or "method" not in data:
        return None
    value = data.get("id")
    if isinstance(value, bool) or not isinstance(value, str | int):
        return None
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:  # the id itself holds a lone surrogate
            return None
    return value


def _reason(problems: list[Any], data: Any) -> str:
    first = problems[0]
    if first["type"] == "json_invalid":
        if "recursion limit" in first["msg"]:
            return "nested too deeply (the limit is about 200 levels)"
        if "escape" in first["msg"] or "surrogate" in first["msg"]:
            return "a string holds a lone UTF-16 surrogate escape (\\ud800-\\udfff), which is not valid Unicode"
        return first["msg"].removeprefix("Invalid JSON: ")
    if isinstance(data, list):
        return "batches are not supported; send one message per line"
    if not isinstance(data, dict):
        return "a message must be a JSON object"
    if "method" in data:
        branch = "JSONRPCRequest" if "id" in data else "JSONRPCNotification"
    else:
        branch = "JSONRPCError" if "error" in data else "JSONRPCResponse"
    chosen = [p for p in problems if p["loc"][:1] == (branch,)] or problems
    field = ".".join(str(part) for part in chosen[0]["loc"][1:])
    return f"{field}: {chosen[0]['msg']}" if field else chosen[0]["msg"]


def split_lines(read: Callable[[], bytes], deliver: Callable[[bytes | TooLong], None], limit: int) -> None:
    """Feed each line from `read` (b"" at end of input) to `deliver`, keeping at most
    `limit` bytes of any one line; a longer line is delivered as TooLong (with its id)."""
    buffer = bytearray()
    skipped = 0  # > 0 while discarding the rest of an oversized line
    scan: RequestId | None = None  # looks for the id of the line being discarded

    def discard(piece: bytes) -> None:
        nonlocal skipped, scan
        if scan is None:
            scan = RequestId()
            scan.feed(bytes(buffer))
        scan.feed(piece)
        skipped += len(buffer) + len(piece)
        buffer.clear()

    def too_long() -> TooLong:
        nonlocal skipped, scan
        out = TooLong(skipped, scan.result() if scan is not None else None)
        skipped, scan = 0, None
        return out

    while chunk := read():
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            piece = chunk[start:end]
            if skipped or len(buffer) + len(piece) > limit:
                discard(piece)
                deliver(too_long())
            else:
                buffer += piece
                deliver(bytes(buffer))
                buffer.clear()
            start = end + 1
        piece = chunk[start:]
        if skipped or len(buffer) + len(piece) > limit:
            discard(piece)
        else:
            buffer += piece
    if skipped:
        deliver(too_long())
    elif buffer:
        deliver(bytes(buffer))


class _Wire:
    """The wire's own descriptors; fd 0 and fd 1 are diverted while it is claimed."""

    def __init__(self, read_fd: int | None, write_fd: int | None) -> None:
        self.claimed = read_fd is None and write_fd is None
        if self.claimed:
            sys.stdout.flush()
            read_fd, write_fd = os.dup(0), os.dup(1)  # not inheritable, above 2
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.close(null)
            os.dup2(2, 1)
        assert read_fd is not None and write_fd is not None
        self.read_fd, self.write_fd = read_fd, write_fd

    def release(self) -> None:
        if self.claimed:
            sys.stdout.flush()
            os.dup2(self.read_fd, 0)
            os.dup2(self.write_fd, 1)
            # The private copies stay open: a daemon thread may still block on them.


async def serve_stdio(
    server: MCPServer,
    *,
    stop: anyio.Event | None = None,
    read_fd: int | None = None,
    write_fd: int | None = None,
    max_line_bytes: int = MAX_LINE_BYTES,
) -> None:
    """Serve `server` until end of input or until `stop` is set, which ends the input
    the same way: in-flight requests are cancelled and the lifespan closes normally.
    Without descriptors it claims the process's stdin and stdout."""
    wire = _Wire(read_fd, write_fd)
    token = anyio.lowlevel.current_token()
    to_server, server_reads = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    server_writes, to_client = anyio.create_memory_object_stream[SessionMessage](0)
    answers = server_writes.clone()  # our error replies; the SDK closes its own end when it stops
    reader = threading.Thread(
        target=_reader, args=(wire.read_fd, to_server, answers, token, max_line_bytes), name="om-mcp stdin", daemon=True
    )
    try:
        async with anyio.create_task_group() as group:
            writer = threading.Thread(
                target=_writer,
                args=(wire.write_fd, to_client, token, to_server.close),
                name="om-mcp stdout",
                daemon=True,
            )
            writer.start()
            reader.start()
            if stop is not None:

                async def end_input() -> None:
                    await stop.wait()
                    to_server.close()

                group.start_soon(end_input)
            await sdk.serve_streams(server, server_reads, server_writes)
            answers.close()
            # The last answers reach the client before the process goes on to exit.
            await anyio.to_thread.run_sync(writer.join, 2.0)
            group.cancel_scope.cancel()
    finally:
        # Whatever the threads still wait for in the loop fails now, not at loop shutdown.
        for stream in (to_server, server_reads, server_writes, answers, to_client):
            stream.close()
        with anyio.CancelScope(shield=True):
            await anyio.sleep(0.01)
        wire.release()


def _reader(
    fd: int,
    to_server: MemoryObjectSendStream[SessionMessage | Exception],
    answers: MemoryObjectSendStream[SessionMessage],
    token: anyio.lowlevel.EventLoopToken,
    limit: int,
) -> None:
    line_number = 0

    def deliver(line: bytes | TooLong) -> None:
        nonlocal line_number
        line_number += 1
        if isinstance(line, TooLong):
            item: SessionMessage | JSONRPCError | None = _error(
                line.request_id,
                INVALID_REQUEST,
                f"Invalid request: message of {line.size} bytes is over the {limit} byte limit",
            )
        else:
            item = parse_line(line)
        if item is None:
            return
        if isinstance(item, SessionMessage):
            anyio.from_thread.run(to_server.send, item, token=token)
            return
        log.warning("stdin line %d not served: %s (answered %d)", line_number, item.error.message, item.error.code)
        try:
            anyio.from_thread.run(answers.send, SessionMessage(item), token=token)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass

    try:
        split_lines(lambda: os.read(fd, 65536), deliver, limit)
    except BaseException as error:  # noqa: BLE001 - the loop is gone (shutdown) or the pipe failed
        log.debug("stdin reader stopped: %r", error)
    finally:
        for stream in (to_server, answers):
            try:
                anyio.from_thread.run_sync(stream.close, token=token)
            except BaseException:  # noqa: BLE001 - loop already closed
                pass


def _writer(
    fd: int,
    to_client: MemoryObjectReceiveStream[SessionMessage],
    token: anyio.lowlevel.EventLoopToken,
    stop: Callable[[], None],
) -> None:
    while True:
        try:
            message = anyio.from_thread.run(to_client.receive, token=token)
        except BaseException:  # noqa: BLE001 - end of stream, or the loop is gone
            return
        data = _encode(message)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        except OSError as error:
            log.info("stdout closed by the client (%s); stopping", error.strerror or error)
            # Ending the input stops the server the ordinary way.
            try:
                anyio.from_thread.run_sync(stop, token=token)
            except BaseException:  # noqa: BLE001
                pass
            return


def _encode(message: SessionMessage) -> bytes:
    try:
        return message.message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"
    except ValueError as error:  # e.g. a lone surrogate in a result: answer, do not stall the writer
        log.error("message to the client could not be encoded: %s", error)
        request_id = getattr(message.message, "id", None)
        fallback = _error(request_id, INTERNAL_ERROR, "Internal error: the answer could not be encoded as JSON")
        return fallback.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"


def run_stdio(server: MCPServer) -> int:
    """Serve over stdio until end of input or SIGINT/SIGTERM; returns the exit code.

    A signal ends the input: in-flight requests are cancelled and the lifespan closes
    the database. If that takes over SHUTDOWN_GRACE_SECONDS, or a second signal comes,
    the process exits at once.
    """
    stopped_by: list[int] = []

    async def main() -> None:
        stop = anyio.Event()
        async with anyio.create_task_group() as group:

            async def watch() -> None:
                if sys.platform == "win32":  # no signal receiver there; Ctrl-C raises KeyboardInterrupt
                    return
                with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                    async for number in signals:
                        stopped_by.append(number)
                        break
                _arm_hard_exit()  # after the receiver has given the signals back
                stop.set()

            group.start_soon(watch)
            await serve_stdio(server, stop=stop)
            group.cancel_scope.cancel()

    try:
        anyio.run(main)
    except KeyboardInterrupt:  # Ctrl-C before the watcher was listening
        return EXIT_ON_SIGNAL
    if stopped_by:
        log.info("stopped by %s", signal.Signals(stopped_by[0]).name)
        return EXIT_ON_SIGNAL
    return 0


def _arm_hard_exit() -> None:
    def hard_exit(*_: object) -> None:
        sys.stderr.flush()
        os._exit(EXIT_ON_SIGNAL)

    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, hard_exit)
    timer = threading.Timer(SHUTDOWN_GRACE_SECONDS, hard_exit)
    timer.daemon = True
    timer.start()
