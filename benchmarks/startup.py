"""Stdio start-up of om-mcp against a bare MCPServer, and what the stdio path imports.

Spawns, alternately, RUNS times each:
  * bare: a one-tool `MCPServer(...).run()` script (the SDK's own stdio transport);
  * bare+ours: the same server run by `om_mcp.server.stdio.run_stdio` (the transport's own cost);
  * om-mcp: `python -m om_mcp serve --db <fresh temp file>`;
and times spawn -> `tools/list` answered (initialize handshake, 2025-11-25), over raw
pipes. Prints each run, the medians and the ratios to bare (target: om-mcp within 1.15x).

Then runs `python -X importtime` on each process's imports and prints, per top-level
package, the import time of HTTP-only packages (uvicorn, starlette, sse_starlette,
httpx2, ...), which the SDK imports even for stdio. Run with
`.venv/bin/python benchmarks/startup.py [runs]`.
"""

from __future__ import annotations

import json
import os
import selectors
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

RUNS = 10
TARGET_RATIO = 1.15
TIMEOUT = 30.0
HTTP_PACKAGES = (
    "uvicorn",
    "starlette",
    "sse_starlette",
    "httpx2",
    "httpx",
    "httpcore",
    "h11",
    "python_multipart",
    "multipart",
    "click",
)
BARE_SERVER = """
from mcp.server.mcpserver import MCPServer

mcp = MCPServer("bare")


@mcp.tool()
def add(a: int, b: int) -> int:
    return a + b


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] == ["ours"]:
        # Loaded by path: importing the om_mcp.server package would import the whole app.
        import importlib.util

        spec = importlib.util.spec_from_file_location("om_stdio", sys.argv[2])
        stdio = sys.modules["om_stdio"] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(stdio)
        raise SystemExit(stdio.run_stdio(mcp))
    mcp.run()
"""
STDIO_MODULE = Path(__file__).resolve().parent.parent / "om_mcp" / "server" / "stdio.py"
OM_IMPORTS = "import om_mcp.cli; from om_mcp.server import build_server; from om_mcp.server.stdio import run_stdio"
BARE_IMPORTS = "from mcp.server.mcpserver import MCPServer"


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("OM_")}


def read_response(fd: int, selector: selectors.BaseSelector, buffer: bytearray, request_id: int) -> dict:
    deadline = time.monotonic() + TIMEOUT
    while True:
        while (newline := buffer.find(b"\n")) >= 0:
            line = bytes(buffer[:newline])
            del buffer[: newline + 1]
            message = json.loads(line) if line.strip() else {}
            if message.get("id") == request_id:
                if "error" in message:
                    raise RuntimeError(f"request {request_id} failed: {message['error']}")
                return message["result"]
        if time.monotonic() > deadline:
            raise RuntimeError(f"no answer to request {request_id} within {TIMEOUT:.0f} s")
        if selector.select(0.5):
            chunk = os.read(fd, 65536)
            if not chunk:
                raise RuntimeError("server closed stdout")
            buffer += chunk


def time_to_tools_list(command: list[str]) -> tuple[float, int]:
    start = time.perf_counter()
    process = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=clean_env()
    )
    try:
        fd = process.stdout.fileno()
        os.set_blocking(fd, False)
        selector = selectors.DefaultSelector()
        selector.register(fd, selectors.EVENT_READ)
        buffer = bytearray()

        def send(message: dict) -> None:
            process.stdin.write(json.dumps(message).encode() + b"\n")
            process.stdin.flush()

        send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "bench", "version": "0"},
                },
            }
        )
        read_response(fd, selector, buffer, 1)
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        tools = read_response(fd, selector, buffer, 2)["tools"]
        elapsed = time.perf_counter() - start
    finally:
        process.stdin.close()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return elapsed, len(tools)


def import_profile(code: str) -> tuple[float, dict[str, float], int]:
    """(total import seconds, seconds per HTTP-only package, modules imported) for `code`."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True, env=clean_env(), check=True
    )
    per_package: dict[str, float] = defaultdict(float)
    total = 0.0
    count = 0
    for line in result.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, _cumulative, name = line[len("import time:") :].split("|")
        seconds = int(self_us) / 1e6
        total += seconds
        count += 1
        top = name.strip().split(".")[0]
        if top in HTTP_PACKAGES:
            per_package[top] += seconds
    return total, dict(per_package), count


def main() -> int:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else RUNS
    print(f"python {sys.version.split()[0]}; {runs} runs each, alternating; spawn -> tools/list answered")
    times: dict[str, list[float]] = {"bare": [], "bare+ours": [], "om-mcp": []}
    with tempfile.TemporaryDirectory(prefix="om-mcp-transport-") as tmp:
        script = Path(tmp) / "bare_server.py"
        script.write_text(BARE_SERVER)
        for index in range(runs):
            commands = {
                "bare": [sys.executable, str(script)],
                "bare+ours": [sys.executable, str(script), "ours", str(STDIO_MODULE)],
                "om-mcp": [sys.executable, "-m", "om_mcp", "serve", "--db", str(Path(tmp) / f"run{index}.db")],
            }
            line = []
            for name, command in commands.items():
                elapsed, tools = time_to_tools_list(command)
                times[name].append(elapsed)
                line.append(f"{name} {elapsed:.3f} s ({tools} tools)")
            print(f"run {index + 1:2d}: " + "  ".join(line))
    bare = statistics.median(times["bare"])
    medians = "  ".join(
        f"{name} {statistics.median(t):.3f} s ({statistics.median(t) / bare:.2f}x)" for name, t in times.items()
    )
    ratio = statistics.median(times["om-mcp"]) / bare
    verdict = "met" if ratio <= TARGET_RATIO else "NOT met"
    print(f"median: {medians}; om-mcp target <= {TARGET_RATIO}x: {verdict}")
    for name, code in (("bare MCPServer", BARE_IMPORTS), ("om-mcp stdio path", OM_IMPORTS)):
        total, http, count = import_profile(code)
        http_total = sum(http.values())
        detail = ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in sorted(http.items(), key=lambda kv: -kv[1]))
        print(
            f"imports, {name}: {count} modules, {total:.3f} s (self times summed); HTTP-only packages"
            f" {http_total * 1000:.0f} ms ({http_total / total:.0%}): {detail}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
