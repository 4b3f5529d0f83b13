"""The stdio transport answers every line, keeps stdout to the protocol, and stops on Ctrl-C."""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import time
from typing import Any

import anyio
import pytest
from support.processes import PYTHON, REPO, clean_env
from support.timeouts import scaled

from om_mcp.server.stdio import TooLong, parse_line, serve_stdio, split_lines

SURROGATE = '{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"cursor":"\\ud800"}}'
DEEP = '{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"x":' + "[" * 250 + "]" * 250 + "}}"
GARBAGE = "this is not json {"
BATCH = '[{"jsonrpc":"2.0","id":4,"method":"ping"}]'
BAD_METHOD = '{"jsonrpc":"2.0","id":"five","method":5}'
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
}


class Pipe:
    """Newline-delimited JSON from a child's stdout, with a deadline per message."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        os.set_blocking(fd, False)
        self.selector = selectors.DefaultSelector()
        self.selector.register(fd, selectors.EVENT_READ)
        self.buffer = b""
        self.raw = b""

    def message(self, timeout: float = 30.0) -> dict[str, Any]:
        deadline = time.monotonic() + scaled(timeout)
        while b"\n" not in self.buffer:
            if time.monotonic() > deadline:
                raise AssertionError(f"no message within {timeout} s")
            if self.selector.select(0.1):
                chunk = os.read(self.fd, 65536)
                if not chunk:
                    raise AssertionError("stdout closed")
                self.buffer += chunk
                self.raw += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return json.loads(line)


def spawn(tmp_path) -> subprocess.Popen:
    return subprocess.Popen(
        [PYTHON, "-m", "om_mcp", "serve", "--db", str(tmp_path / "om.db")],
        env=clean_env(tmp_path),
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def send(process: subprocess.Popen, line: str | dict) -> None:
    process.stdin.write((line if isinstance(line, str) else json.dumps(line)).encode() + b"\n")
    process.stdin.flush()


def handshake(process: subprocess.Popen, pipe: Pipe) -> None:
    send(process, INIT)
    assert pipe.message()["id"] == 1
    send(process, {"jsonrpc": "2.0", "method": "notifications/initialized"})


# -- unit: parsing and line splitting ------------------------------------------------------


def error_of(line: str | bytes) -> tuple[Any, int, str]:
    answer = parse_line(line if isinstance(line, bytes) else line.encode())
    assert answer is not None and hasattr(answer, "error"), answer
    return answer.id, answer.error.code, answer.error.message


def test_each_unparseable_line_gets_an_error_with_the_id_when_there_is_one():
    assert error_of(SURROGATE) == (2, -32600, error_of(SURROGATE)[2])
    assert "lone UTF-16 surrogate" in error_of(SURROGATE)[2]
    assert error_of(DEEP)[:2] == (3, -32600) and "nested too deeply" in error_of(DEEP)[2]
    assert error_of(GARBAGE)[:2] == (None, -32700)
    assert error_of(BATCH)[:2] == (None, -32600) and "batches are not supported" in error_of(BATCH)[2]
    assert error_of(BAD_METHOD)[:2] == ("five", -32600) and "method" in error_of(BAD_METHOD)[2]
    # lines no parser reads still name their request's id (found in the raw bytes)
    assert error_of(b'{"jsonrpc":"2.0","id":6,"method":"ping","params":{"x":"\xff"}}')[:2] == (6, -32700)
    assert error_of(b'{"jsonrpc":"2.0","id":"c","method":"ping","params":{"x":"a\x01b"}}')[:2] == ("c", -32700)
    deepest = b'{"jsonrpc":"2.0","id":8,"method":"ping","params":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    assert error_of(deepest)[:2] == (8, -32700) and "nested too deeply" in error_of(deepest)[2]
    assert error_of(b'{"jsonrpc":"2.0","method":"ping","params":"\xff","id":"last"}')[:2] == ("last", -32700)
    # a malformed *response* must not resolve one of the client's own requests
    assert error_of('{"jsonrpc":"2.0","id":7,"result":5}')[:2] == (None, -32600)
    assert error_of('{"jsonrpc":"2.0","id":"\\udc00","method":"x"}')[:2] == (None, -32600)
    for bad_id in ("null", "1.5", "true"):  # the SDK would take these for notifications: no answer at all
        assert error_of(f'{{"jsonrpc":"2.0","id":{bad_id},"method":"ping"}}')[:2] == (None, -32600)
    assert parse_line(b'{"jsonrpc":"2.0","method":"notifications/initialized","params":{"id":1}}').message
    assert parse_line(b"  \r") is None
    assert parse_line(json.dumps(INIT).encode() + b"\r").message.id == 1


def test_lines_are_split_and_an_oversized_line_is_skipped_not_kept():
    chunks = [b"ab", b"c\nde", b"fghijklmnop", b"qr\n", b"\nxyz\n12", b"34567890123", b""]
    delivered: list[bytes | TooLong] = []
    split_lines(iter(chunks).__next__, delivered.append, limit=10)
    assert delivered == [b"abc", TooLong(15), b"", b"xyz", TooLong(13)]
    # an oversized request is looked at as it goes by: its id comes with the TooLong, wherever it is
    big = b'{"jsonrpc":"2.0","method":"ping","params":{"x":"' + b"y" * 100 + b'"},"id":41}'
    delivered.clear()
    split_lines(iter([big[i : i + 7] for i in range(0, len(big), 7)] + [b"\n", b""]).__next__, delivered.append, 10)
    assert delivered == [TooLong(len(big), 41)]


# -- in process: the transport itself ------------------------------------------------------


@pytest.mark.anyio
async def test_serving_answers_bad_lines_and_goes_on(make_server):
    server = make_server()
    to_server_r, to_server_w = os.pipe()
    from_server_r, from_server_w = os.pipe()
    lines = [
        json.dumps(INIT),
        SURROGATE,
        DEEP,
        "x" * 5000,
        GARBAGE,
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json.dumps({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}),
    ]
    os.write(to_server_w, "\n".join(lines).encode() + b"\n")
    answers: list[dict[str, Any]] = []

    def read_until_listed() -> None:
        with os.fdopen(from_server_r, "rb") as out:
            for line in out:
                answers.append(json.loads(line))
                if answers[-1].get("id") == 9:
                    return

    with anyio.fail_after(scaled(30)):
        async with anyio.create_task_group() as group:
            group.start_soon(
                lambda: serve_stdio(server, read_fd=to_server_r, write_fd=from_server_w, max_line_bytes=4096)
            )
            await anyio.to_thread.run_sync(read_until_listed)
            os.close(to_server_w)  # end of input ends the server
    for fd in (to_server_r, from_server_w):
        os.close(fd)
    by_id = {a.get("id"): a for a in answers if "error" in a and a["id"] is not None}
    assert by_id[2]["error"]["code"] == -32600 and by_id[3]["error"]["code"] == -32600
    anonymous = [a["error"] for a in answers if a.get("id") is None]
    assert [e["code"] for e in anonymous] == [-32600, -32700]
    assert "over the 4096 byte limit" in anonymous[0]["message"]
    assert "append_messages" in {t["name"] for t in answers[-1]["result"]["tools"]}


# -- the real process ----------------------------------------------------------------------


@pytest.mark.slow
def test_stdio_process_answers_every_bad_line_and_keeps_serving(tmp_path):
    process = spawn(tmp_path)
    pipe = Pipe(process.stdout.fileno())
    try:
        handshake(process, pipe)
        for line in (SURROGATE, DEEP, GARBAGE, BATCH, BAD_METHOD):
            send(process, line)
        send(process, {"jsonrpc": "2.0", "id": 10, "method": "tools/list"})
        answers = [pipe.message() for _ in range(6)]
    finally:
        process.stdin.close()
        process.wait(timeout=scaled(30))
    errors = [(a.get("id"), a["error"]["code"]) for a in answers if "error" in a]
    assert errors == [(2, -32600), (3, -32600), (None, -32700), (None, -32600), ("five", -32600)]
    assert "append_messages" in {t["name"] for t in answers[-1]["result"]["tools"]}
    stderr = process.stderr.read().decode()
    assert stderr.count("not served:") == 5 and "Traceback" not in stderr
    assert process.returncode == 0
    rest = pipe.raw + os.read(pipe.fd, 65536) if pipe.selector.select(0) else pipe.raw
    assert all(json.loads(line)["jsonrpc"] == "2.0" for line in rest.splitlines()), "stdout holds only JSON-RPC"


@pytest.mark.slow
@pytest.mark.parametrize("busy", [False, True])
def test_ctrl_c_stops_the_server_at_once_without_a_traceback(tmp_path, busy):
    process = spawn(tmp_path)
    pipe = Pipe(process.stdout.fileno())
    try:
        handshake(process, pipe)
        send(process, {"jsonrpc": "2.0", "id": 2, "method": "ping"})
        assert pipe.message()["id"] == 2  # serving, and waiting on input
        if busy:  # a request still in flight when the signal comes
            send(
                process,
                {
                    "jsonrpc": "2.0",
                    "id": 3,
                    "method": "tools/call",
                    "params": {
                        "name": "append_messages",
                        "arguments": {"thread_id": "t", "messages": [{"role": "user", "content": "x"}]},
                    },
                },
            )
        process.send_signal(signal.SIGINT)
        process.wait(timeout=scaled(10))  # it used to ignore two Ctrl-C presses for over 20 s
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    stderr = process.stderr.read().decode()
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr
    assert "stopped by SIGINT" in stderr


@pytest.mark.slow
def test_a_failure_to_start_is_one_line_without_a_traceback(tmp_path):
    result = subprocess.run(
        [PYTHON, "-m", "om_mcp", "serve", "--db", str(tmp_path)],  # a directory, not a database file
        env=clean_env(tmp_path),
        cwd=REPO,
        input=json.dumps(INIT) + "\n",
        capture_output=True,
        text=True,
        timeout=scaled(60),
    )
    # Refused before the transport opens: its own exit code, one line that says what to do.
    assert result.returncode == 3 and result.stdout == ""
    assert "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip().splitlines() == [line for line in result.stderr.splitlines() if line.strip()]
    [line] = [line for line in result.stderr.splitlines() if line.startswith("om-mcp:")]
    assert "is a directory" in line and "memory.db" in line


@pytest.mark.slow
def test_the_real_server_answers_unreadable_lines_with_their_ids(tmp_path):
    """Before: each of these was answered with `id: null`, so the client waited for its timeout."""
    from om_mcp.server.stdio import MAX_LINE_BYTES

    lines = [
        b'{"jsonrpc":"2.0","id":21,"method":"tools/list","params":{"x":"\xff\xfe"}}',  # not UTF-8
        b'{"jsonrpc":"2.0","id":22,"method":"tools/list","params":{"x":"a\x00\x07b"}}',  # raw control bytes
        b'{"jsonrpc":"2.0","id":23,"method":"tools/list","params":' + b"[" * 200_000 + b"]" * 200_000 + b"}",
        b'{"jsonrpc":"2.0","id":24,"method":"tools/list","params":{"x":"' + b"z" * (MAX_LINE_BYTES + 10) + b'"}}',
    ]
    process = spawn(tmp_path)
    pipe = Pipe(process.stdout.fileno())
    try:
        handshake(process, pipe)
        for line in lines:
            process.stdin.write(line + b"\n")
        process.stdin.flush()
        send(process, {"jsonrpc": "2.0", "id": 25, "method": "tools/list"})
        answers = [pipe.message(timeout=120) for _ in range(5)]
    finally:
        process.stdin.close()
        process.wait(timeout=scaled(60))
    assert [(a["id"], a["error"]["code"]) for a in answers[:4]] == [
        (21, -32700),
        (22, -32700),
        (23, -32700),
        (24, -32600),
    ]
    assert "over the" in answers[3]["error"]["message"] and answers[4]["id"] == 25
