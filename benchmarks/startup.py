"""Stdio start-up of om-mcp against a bare MCPServer, idle memory, per-call latency, and
what the stdio path imports.

1. Spawns, alternately, RUNS times each:
  * bare: a one-tool `MCPServer(...).run()` script (the SDK's own stdio transport);
  * bare+ours: the same server run by `om_mcp.server.stdio.run_stdio` (the transport's own cost);
  * om-mcp: `python -m om_mcp serve --db <fresh temp file>`;
  and times spawn -> `tools/list` answered (initialize handshake, 2025-11-25), over raw
  pipes. Prints each run, the medians and the ratios to bare (target: om-mcp within 1.15x).
2. Idle memory: each server after the handshake and one call (om-mcp: one append_messages and
   one get_context), once its CPU time has stopped moving: VmRSS, median of --rss-runs
   (target: om-mcp at most 90 MiB).
3. Per call over stdio: get_context of a thread of 150 messages (about 80 tokens each, so the
   8,000-token output budget keeps about 95) and append_messages of one message, against the
   bare server answering the same messages from a list (target: get_context within 2x).
4. `python -X importtime` on each process's imports: modules, the summed self time, and per
   top-level package the time of HTTP-only packages (uvicorn, starlette, sse_starlette,
   httpx2, ...) and of the SDK's client package, which a stdio server never uses.

Run with `.venv/bin/python benchmarks/startup.py [runs] [--rss-runs 3] [--calls 200]`.
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
# The reference for per-call latency: the same SDK server answering from a list.
BARE_MESSAGES_SERVER = """
import json

from mcp.server.mcpserver import MCPServer

mcp = MCPServer("bare-messages")
THREADS = {}


@mcp.tool()
def append_messages(thread_id: str, messages: list[dict]) -> str:
    THREADS.setdefault(thread_id, []).extend(messages)
    return json.dumps({"stored": len(messages)})


@mcp.tool()
def get_context(thread_id: str, limit: int = 100) -> str:
    kept = THREADS.get(thread_id, [])[-limit:]
    return json.dumps({"system_text": "", "messages": kept}, ensure_ascii=False, separators=(",", ":"))


if __name__ == "__main__":
    mcp.run()
"""
STDIO_MODULE = Path(__file__).resolve().parent.parent / "om_mcp" / "server" / "stdio.py"
# What `om-mcp serve` imports before it answers (the engine included: it is open before the first request).
OM_IMPORTS = (
    "import om_mcp.cli, om_mcp.commands.serve; from om_mcp.server import sdk; sdk.import_server_side();"
    " from om_mcp.server import build_server; from om_mcp.server.stdio import run_stdio;"
    " import om_mcp.engine.memory, om_mcp.store.sqlite.store"
)
BARE_IMPORTS = "from mcp.server.mcpserver import MCPServer"


def clean_env() -> dict[str, str]:
    from stdio_client import compiled

    return compiled({k: v for k, v in os.environ.items() if not k.startswith("OM_")})


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


def time_to_tools_list(command: list[str]) -> tuple[float, float, int]:
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
        cpu = cpu_seconds(process.pid)  # the CPU it took, which a busy machine does not inflate as much
    finally:
        process.stdin.close()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return elapsed, cpu, len(tools)


def import_profile(code: str) -> tuple[float, dict[str, float], int]:
    """(total import seconds, seconds per HTTP-only package and the SDK's client package, modules
    imported) for `code`."""
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
        elif name.strip().startswith("mcp.client"):
            per_package["mcp.client"] += seconds
    return total, dict(per_package), count


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def settle(pid: int, quiet: float = 1.5, longest: float = 30.0) -> None:
    """Wait until the process has used no CPU for `quiet` seconds (its background loading is over)."""
    deadline = time.monotonic() + longest
    last, since = cpu_seconds(pid), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.25)
        now = cpu_seconds(pid)
        if now - last > 0.005:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return


def quiet_env(workdir: Path) -> dict[str, str]:
    """om-mcp with a model that is configured but never due (no cycle, no client load): the
    tool path alone, the same on every machine."""
    env = clean_env()
    env.update(
        HOME=str(workdir),
        XDG_DATA_HOME=str(workdir),
        OM_OBSERVATIONAL_MEMORY__MODEL=json.dumps({"model": "openai/unused", "api_base": "http://127.0.0.1:9/v1"}),
        OM_OBSERVATIONAL_MEMORY__OBSERVATION__MESSAGE_TOKENS="1000000",
    )
    return env


def idle_rss(workdir: Path, script: Path, runs: int) -> dict[str, list[float]]:
    """VmRSS (MiB) of each server after one call, once idle."""
    from stdio_client import StdioServer

    out: dict[str, list[float]] = {"bare": [], "om-mcp": [], "om-mcp default config": []}
    for run in range(runs):
        for name in out:
            if name == "bare":
                server = StdioServer(None, clean_env(), name="rss", command=[sys.executable, str(script)])
                server.tool("add", a=1, b=2)
            else:
                env = quiet_env(workdir) if name == "om-mcp" else clean_env()
                server = StdioServer(workdir / f"rss-{run}-{len(out[name])}.db", env, name="rss")
                server.tool("append_messages", thread_id="t", user="Hello, remember that I live in Lyon.")
                server.tool("get_context", thread_id="t")
            try:
                settle(server.proc.pid)
                out[name].append(rss_mib(server.proc.pid))
            finally:
                server.stop()
    return out


def message_text(i: int) -> str:
    from turn_latency import conversation

    lines = [m["content"] for m in conversation(600)]
    return " ".join(lines[(2 * i + k) % len(lines)] for k in range(2))


def call_latency(workdir: Path, script: Path, calls: int) -> dict[str, dict[str, float]]:
    """p50 (ms) of get_context and append_messages over stdio, om-mcp against the bare server."""
    from stdio_client import StdioServer

    stored = [
        {"id": f"m{i}", "role": "user" if i % 2 == 0 else "assistant", "content": message_text(i)} for i in range(150)
    ]
    results: dict[str, dict[str, float]] = {}
    om = StdioServer(workdir / "calls.db", quiet_env(workdir), name="calls")
    bare = StdioServer(None, clean_env(), name="calls", command=[sys.executable, str(script)])
    try:
        for server in (om, bare):
            for start in range(0, len(stored), 50):
                server.tool("append_messages", thread_id="t", messages=stored[start : start + 50])
        returned = om.tool("get_context", thread_id="t")
        kept = len(returned["messages"])
        same = returned["messages"]  # the bare server answers these very messages, as om-mcp shows them
        bare.tool("append_messages", thread_id="shown", messages=same)
        timings: dict[str, dict[str, list[float]]] = {"om-mcp": {}, "bare": {}}
        for index in range(calls):
            for name, server, args in (
                ("om-mcp", om, {"thread_id": "t"}),
                ("bare", bare, {"thread_id": "shown", "limit": kept}),
            ):
                t0 = time.perf_counter()
                server.tool("get_context", **args)
                timings[name].setdefault("get_context", []).append((time.perf_counter() - t0) * 1000)
                message = {"id": f"new-{index}", "role": "user", "content": message_text(index)}
                t0 = time.perf_counter()
                server.tool("append_messages", thread_id="appends", messages=[message])
                timings[name].setdefault("append_messages", []).append((time.perf_counter() - t0) * 1000)
        for name, per_tool in timings.items():
            results[name] = {tool: statistics.median(values) for tool, values in per_tool.items()}
        results["om-mcp"]["messages"] = kept
    finally:
        om.stop()
        bare.stop()
    return results


def main() -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="?", type=int, default=RUNS)
    parser.add_argument("--rss-runs", type=int, default=3)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    runs = args.runs
    print(f"python {sys.version.split()[0]}; {runs} runs each, alternating; spawn -> tools/list answered")
    times: dict[str, list[float]] = {"bare": [], "bare+ours": [], "om-mcp": []}
    cpus: dict[str, list[float]] = {name: [] for name in times}
    with tempfile.TemporaryDirectory(prefix="om-mcp-transport-") as tmp:
        script = Path(tmp) / "bare_server.py"
        script.write_text(BARE_SERVER)
        for command in (  # untimed: each server once, so every timed run starts from bytecode
            [sys.executable, str(script)],
            [sys.executable, "-m", "om_mcp", "serve", "--db", str(Path(tmp) / "warm-up.db")],
        ):
            time_to_tools_list(command)
        for index in range(runs):
            commands = {
                "bare": [sys.executable, str(script)],
                "bare+ours": [sys.executable, str(script), "ours", str(STDIO_MODULE)],
                "om-mcp": [sys.executable, "-m", "om_mcp", "serve", "--db", str(Path(tmp) / f"run{index}.db")],
            }
            line = []
            for name, command in commands.items():
                elapsed, cpu, tools = time_to_tools_list(command)
                times[name].append(elapsed)
                cpus[name].append(cpu)
                line.append(f"{name} {elapsed:.3f} s, cpu {cpu:.2f} s ({tools} tools)")
            print(f"run {index + 1:2d}: " + "  ".join(line))
        bare = statistics.median(times["bare"])
        medians = "  ".join(
            f"{name} {statistics.median(t):.3f} s ({statistics.median(t) / bare:.2f}x)" for name, t in times.items()
        )
        ratio = statistics.median(times["om-mcp"]) / bare
        verdict = "met" if ratio <= TARGET_RATIO else "NOT met"
        print(f"median: {medians}; om-mcp target <= {TARGET_RATIO}x: {verdict}")
        ratios = [om / b for om, b in zip(times["om-mcp"], times["bare"])]
        cpu_bare = statistics.median(cpus["bare"])
        print(
            f"median of the per-run ratios om-mcp / bare: {statistics.median(ratios):.2f}x; CPU at tools/list:"
            + "  ".join(
                f" {n} {statistics.median(c):.3f} s ({statistics.median(c) / cpu_bare:.2f}x)" for n, c in cpus.items()
            )
        )
        if args.rss_runs:
            rss = idle_rss(Path(tmp), script, args.rss_runs)
            line = "  ".join(f"{name} {statistics.median(v):.0f} MiB" for name, v in rss.items())
            worst = max(statistics.median(rss["om-mcp"]), statistics.median(rss["om-mcp default config"]))
            print(
                f"idle RSS, median of {args.rss_runs}: {line}; om-mcp target <= 90 MiB:"
                f" {'met' if worst <= 90 else 'NOT met'}"
            )
        if args.calls:
            messages_script = Path(tmp) / "bare_messages_server.py"
            messages_script.write_text(BARE_MESSAGES_SERVER)
            calls = call_latency(Path(tmp), messages_script, args.calls)
            for tool in ("get_context", "append_messages"):
                om_ms, bare_ms = calls["om-mcp"][tool], calls["bare"][tool]
                note = ""
                if tool == "get_context":
                    note = f"; target <= 2x: {'met' if om_ms <= 2 * bare_ms else 'NOT met'}"
                    note += f"; {int(calls['om-mcp']['messages'])} messages returned"
                print(
                    f"{tool} over stdio, p50 of {args.calls}: om-mcp {om_ms:.2f} ms, bare {bare_ms:.2f} ms"
                    f" ({om_ms / bare_ms:.2f}x{note})"
                )
    for name, code in (("bare MCPServer", BARE_IMPORTS), ("om-mcp stdio path", OM_IMPORTS)):
        total, http, count = import_profile(code)
        client = http.pop("mcp.client", 0.0)
        http_total = sum(http.values())
        detail = ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in sorted(http.items(), key=lambda kv: -kv[1]))
        print(
            f"imports, {name}: {count} modules, {total:.3f} s (self times summed); HTTP-only packages"
            f" {http_total * 1000:.0f} ms ({http_total / total:.0%}): {detail}; the SDK's client package"
            f" {client * 1000:.0f} ms"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
