"""Hostile lines to a real `om-mcp serve` over stdio: every request gets exactly one answer.

The tool calls of support/hostile.py, put on the wire as JSON (lone surrogates become
`\\udXXX` escapes, which the SDK's parser refuses and ours answers), and some lines
damaged on the way: cut short, an invalid UTF-8 byte, nesting thousands deep, a huge
string. Each line is sent alone and answered before the next: the answer carries the
request's id, or a null id when the line was damaged beyond reading it; it is never an
internal error; and the process keeps serving to the end.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.hostile import calls
from support.processes import REPO, clean_env, server_command
from support.timeouts import scaled

pytestmark = pytest.mark.slow

EXAMPLES = 200
ANSWER_DEADLINE = 30.0
INTERNAL_ERROR = -32603


class Peer:
    """The server process, spoken to one raw line at a time."""

    def __init__(self, tmp_path: Path) -> None:
        self.process = subprocess.Popen(
            server_command("--db", str(tmp_path / "om.db")),
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=clean_env(tmp_path, OM_OBSERVATIONAL_MEMORY__ENABLED="false"),
        )
        os.set_blocking(self.process.stdout.fileno(), False)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.process.stdout, selectors.EVENT_READ)
        self.buffer = b""

    def send(self, line: bytes) -> None:
        self.process.stdin.write(line + b"\n")
        self.process.stdin.flush()

    def answer(self) -> dict[str, Any] | None:
        """The next response (notifications skipped), or None after the deadline."""
        deadline = time.monotonic() + scaled(ANSWER_DEADLINE)
        while True:
            line, newline, rest = self.buffer.partition(b"\n")
            if newline:
                self.buffer = rest
                message = json.loads(line)
                if "id" in message and "method" not in message:
                    return message
                continue
            if time.monotonic() > deadline or not self.selector.select(max(0.0, deadline - time.monotonic())):
                return None
            chunk = os.read(self.process.stdout.fileno(), 1 << 20)
            if not chunk:
                return None
            self.buffer += chunk

    def close(self) -> str:
        self.process.stdin.close()
        try:
            self.process.wait(timeout=scaled(30))
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        return self.process.stderr.read().decode(errors="replace")


def request(request_id: int, call: tuple[str, Any]) -> dict[str, Any]:
    name, arguments = call
    if name == "read":
        template, thread = arguments
        return {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "resources/read",
            "params": {"uri": template.format(thread)},
        }
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


def deep(depth: int) -> str:
    return "[" * depth + "]" * depth


DAMAGE = ["none", "none", "none", "cut", "invalid-utf8", "deep-params", "huge-string"]


def line_for(request_id: int, call: tuple[str, Any], damage: str) -> bytes:
    """The request as one line, damaged as asked."""
    body = request(request_id, call)
    if damage == "huge-string":
        body["params"]["padding"] = "z" * 3_000_000
    text = json.dumps(body)  # ensure_ascii: a lone surrogate goes out as a \\udXXX escape
    if damage == "deep-params":
        text = text[:-1] + ', "deep": ' + deep(5000) + "}"
    data = text.encode()
    if damage == "cut":
        data = data[: max(1, len(data) // 2)]
    elif damage == "invalid-utf8":
        data = data[:-2] + b"\xff\xfe" + data[-2:]
    return data


def test_every_hostile_line_gets_one_answer_and_never_an_internal_error(tmp_path: Path) -> None:
    peer = Peer(tmp_path)
    problems: list[str] = []
    counter = {"sent": 0, "by_id": 0}
    try:
        peer.send(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 0,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-11-25",
                        "capabilities": {},
                        "clientInfo": {"name": "fuzz", "version": "0"},
                    },
                }
            ).encode()
        )
        assert (peer.answer() or {}).get("id") == 0
        peer.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')

        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(calls, st.sampled_from(DAMAGE))
        def fuzz(call: tuple[str, Any], damage: str) -> None:
            counter["sent"] += 1
            request_id = counter["sent"]
            peer.send(line_for(request_id, call, damage))
            answer = peer.answer()
            if answer is None:
                problems.append(f"no answer to #{request_id} ({damage}): {call!r:.200}")
                return
            if answer["id"] == request_id:
                counter["by_id"] += 1
            elif not (answer["id"] is None and damage != "none"):
                problems.append(f"#{request_id} ({damage}) answered with id {answer['id']!r}")
            error = answer.get("error") or {}
            text = json.dumps(answer.get("result", {}))
            if error.get("code") == INTERNAL_ERROR or "failed inside om-mcp" in text:
                problems.append(f"internal error for #{request_id} ({damage}): {json.dumps(answer)[:300]}")

        fuzz()
        peer.send(b'{"jsonrpc":"2.0","id":"last","method":"ping"}')
        assert (peer.answer() or {}).get("id") == "last", "the server stopped serving"
    finally:
        stderr = peer.close()
    assert not problems, f"{len(problems)} problems, first: {problems[:3]}"
    assert counter["sent"] >= EXAMPLES * 0.9 and counter["by_id"] >= counter["sent"] / 2
    assert peer.process.returncode == 0 and "Traceback" not in stderr, stderr[-2000:]
