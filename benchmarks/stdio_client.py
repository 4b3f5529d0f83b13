"""`python -m om_mcp serve` over stdio, spoken to with raw JSON-RPC: the benchmarks' client.

No SDK on the client side, so the client's own cost stays out of the figures. The server's
stderr goes to a file, or, when none is given, is read line by line with the time each line
came (`log_times`, and the last lines in `log_tail`).
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


PYCACHE = Path(tempfile.gettempdir()) / "om-mcp-benchmarks-pycache"


def compiled(env: dict[str, str]) -> dict[str, str]:
    """`env` for a server process that runs from bytecode, as an installed package does (pip
    compiles it): PYTHONDONTWRITEBYTECODE would make every spawn compile om_mcp from source
    again, a cost no user pays. The bytecode goes to a folder of its own, not the checkout."""
    out = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    out["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    return out


class RpcError(RuntimeError):
    pass


class StdioServer:
    def __init__(
        self,
        db: Path | None,
        env: dict[str, str],
        *,
        name: str,
        stderr: Path | None = None,
        timeout: float = 120.0,
        command: list[str] | None = None,
        cwd: Path = REPO,
    ):
        """`command`: another server to speak to (a bare SDK server, for a reference); `cwd`: where it
        starts (`python -m om_mcp` runs the om_mcp found there first, before PYTHONPATH's)."""
        self.timeout = timeout  # for each request
        self._stderr = open(stderr, "wb") if stderr is not None else None
        self.proc = subprocess.Popen(
            command or [sys.executable, "-m", "om_mcp", "serve", "--db", str(db)],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr or subprocess.PIPE,
        )
        self.log_times: list[float] = []
        self.log_tail: list[str] = []
        if self._stderr is None:
            threading.Thread(target=self._read_stderr, daemon=True).start()
        os.set_blocking(self.proc.stdout.fileno(), False)  # type: ignore[union-attr]
        self._selector = selectors.DefaultSelector()
        self._selector.register(self.proc.stdout, selectors.EVENT_READ)  # type: ignore[arg-type]
        self._buffer = b""
        self._id = 0
        self.request(
            "initialize",
            {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": name, "version": "0"}},
        )
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _read_stderr(self) -> None:
        for line in self.proc.stderr:  # type: ignore[union-attr]
            self.log_times.append(time.monotonic())
            self.log_tail = (self.log_tail + [line.decode(errors="replace").rstrip()])[-5:]

    def _send(self, message: dict) -> None:
        self.proc.stdin.write((json.dumps(message) + "\n").encode())  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]

    def request(self, method: str, params: dict, timeout: float | None = None) -> Any:
        timeout = self.timeout if timeout is None else timeout
        self._id += 1
        request_id = self._id
        self._send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        deadline = time.monotonic() + timeout
        while True:
            line, newline, rest = self._buffer.partition(b"\n")
            if newline:
                self._buffer = rest
                message = json.loads(line) if line.strip() else {}
                if message.get("id") == request_id and ("result" in message or "error" in message):
                    if "error" in message:
                        raise RpcError(f"{method} failed: {message['error']}")
                    return message["result"]
                continue  # notifications (events, progress)
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self._selector.select(remaining):
                raise RpcError(f"no answer to {method} within {timeout} s")
            chunk = os.read(self.proc.stdout.fileno(), 1 << 20)  # type: ignore[union-attr]
            if not chunk:
                raise RpcError(f"the server closed stdout; stderr: {self.log_tail}")
            self._buffer += chunk

    def tool(self, name: str, **arguments: Any) -> Any:
        """A tool's result: its JSON decoded (tools answer compact JSON), or its text."""
        result = self.request("tools/call", {"name": name, "arguments": arguments})
        text = result["content"][0]["text"] if result.get("content") else "{}"
        if result.get("isError"):
            raise RpcError(f"{name}: {text}")
        return json.loads(text) if text[:1] in "{[" else text

    def resource(self, uri: str) -> Any:
        return json.loads(self.request("resources/read", {"uri": uri})["contents"][0]["text"])

    def stop(self, timeout: float = 20.0) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()  # type: ignore[union-attr]
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._stderr is not None:
            self._stderr.close()
