"""How long `om-mcp serve` takes to become useful over stdio.

Spawns `python -m om_mcp serve --db <fresh temp file>` RUNS times (environment
without OM_* variables), speaks raw JSON-RPC over the pipes and times, from
process start:
  * initialize answered (protocolVersion 2025-11-25 handshake);
  * tools/list answered.
Prints each run, the medians and whether the target is met, plus for reference
the wall time of a bare `python -c "import mcp.server.mcpserver"` (the SDK's
import cost, a floor om-mcp cannot go below). Run with
`.venv/bin/python benchmarks/startup.py [runs]`.
"""

from __future__ import annotations

import json
import os
import resource
import selectors
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUNS = 10
TARGET_SECONDS = 1.0
READ_TIMEOUT = 30.0  # per response; a run that exceeds it fails instead of hanging
PROTOCOL_VERSION = "2025-11-25"


class StartupError(RuntimeError):
    pass


class LineReader:
    """Reads newline-delimited JSON-RPC messages from a pipe with a deadline."""

    def __init__(self, stream):
        self.fd = stream.fileno()
        os.set_blocking(self.fd, False)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.fd, selectors.EVENT_READ)
        self.buffer = b""

    def read_message(self, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            newline = self.buffer.find(b"\n")
            if newline >= 0:
                line, self.buffer = self.buffer[:newline], self.buffer[newline + 1:]
                if line.strip():
                    return json.loads(line)
                continue
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise StartupError(f"no response within {timeout:.0f} s")
            if not self.selector.select(remaining):
                continue
            chunk = os.read(self.fd, 65536)
            if not chunk:
                raise StartupError("server closed stdout")
            self.buffer += chunk

    def response(self, request_id: int, timeout: float) -> dict:
        """The response to `request_id`, skipping notifications and server requests."""
        deadline = time.monotonic() + timeout
        while True:
            message = self.read_message(max(0.0, deadline - time.monotonic()))
            if message.get("id") == request_id and ("result" in message or "error" in message):
                if "error" in message:
                    raise StartupError(f"request {request_id} failed: {message['error']}")
                return message["result"]


def send(proc: subprocess.Popen, message: dict) -> None:
    proc.stdin.write((json.dumps(message) + "\n").encode())
    proc.stdin.flush()


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def one_run(workdir: Path, index: int) -> tuple[float, float, int, float]:
    db = workdir / f"run{index}" / "memory.db"
    db.parent.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("OM_")}
    stderr_path = db.parent / "stderr.log"
    cpu_before = children_cpu()
    with open(stderr_path, "wb") as stderr:
        start = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "om_mcp", "serve", "--db", str(db)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=env,
        )
        try:
            reader = LineReader(proc.stdout)
            send(proc, {
                "jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {
                    "protocolVersion": PROTOCOL_VERSION,
                    "capabilities": {},
                    "clientInfo": {"name": "startup-benchmark", "version": "0"},
                },
            })
            reader.response(1, READ_TIMEOUT)
            initialized = time.perf_counter() - start
            send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
            send(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}})
            tools = reader.response(2, READ_TIMEOUT).get("tools", [])
            listed = time.perf_counter() - start
        except StartupError as error:
            proc.kill()
            proc.wait()
            log = stderr_path.read_text(errors="replace")[-2000:]
            raise StartupError(f"run {index + 1}: {error}\n--- server stderr ---\n{log}") from None
        finally:
            if proc.poll() is None:
                proc.stdin.close()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
    # CPU seconds of the whole server process (start to exit): less sensitive
    # to other load on the machine than the wall-clock figures.
    return initialized, listed, len(tools), children_cpu() - cpu_before


def sdk_import_floor(runs: int = 3) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OM_")}
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import mcp.server.mcpserver"], env=env, check=True, timeout=60)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else RUNS
    print(f"python {sys.version.split()[0]} ({sys.executable})")
    print(f"{runs} runs of `python -m om_mcp serve --db <fresh temp db>` over stdio")
    init_times: list[float] = []
    list_times: list[float] = []
    cpu_times: list[float] = []
    with tempfile.TemporaryDirectory(prefix="om-mcp-startup-") as tmp:
        for index in range(runs):
            try:
                initialized, listed, tool_count, cpu = one_run(Path(tmp), index)
            except StartupError as error:
                print(f"FAILED: {error}", file=sys.stderr)
                return 1
            init_times.append(initialized)
            list_times.append(listed)
            cpu_times.append(cpu)
            print(f"run {index + 1:2d}: initialize {initialized:.3f} s  tools/list {listed:.3f} s"
                  f"  ({tool_count} tools; server CPU {cpu:.3f} s start to exit)")
    init_median = statistics.median(init_times)
    list_median = statistics.median(list_times)
    print(f"median: initialize {init_median:.3f} s  tools/list {list_median:.3f} s"
          f"  (server CPU {statistics.median(cpu_times):.3f} s)")
    met = list_median < TARGET_SECONDS
    print(f"target: tools/list < {TARGET_SECONDS:.1f} s: {'met' if met else 'NOT met'} (median {list_median:.3f} s)")
    print(f"reference: `import mcp.server.mcpserver` alone takes {sdk_import_floor():.3f} s (median of 3)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
