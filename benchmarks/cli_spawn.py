"""How fast the read-only commands answer: `om-mcp status`, `search` and `show`, spawned as a user
runs them, beside a bare `python -c "import sqlite3"` spawn (target: within 4x of it).

A throwaway memory (HOME and XDG folders in a temp directory; 20 threads of 20 messages) is made
first; then, RUNS times, each command and each reference is spawned in turn, and the wall time from
spawn to exit and the child's CPU time (user + system: what a busy machine inflates least) are
taken. Prints the medians and the ratios to the bare spawn, then what bounds the commands: spawns
that only import pydantic, the config model and the engine. Last, the modules each command loaded
(`sys.modules` at its exit) from the packages that are kept off these paths: mcp, litellm, tiktoken,
rich (0 expected; rich draws tables on a terminal only, see --terminal).

The children run with bytecode caches, as an installed om-mcp does (pip compiles it): the first
spawn of each writes them if PYTHONDONTWRITEBYTECODE kept them from being written.

Run with `.venv/bin/python benchmarks/cli_spawn.py [runs] [--terminal]` (--terminal: stdout is a
pseudo-terminal, so the commands draw their tables with rich, as at a shell prompt).
"""

from __future__ import annotations

import asyncio
import json
import os
import pty
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUNS = 15
TARGET_RATIO = 4.0
KEPT_OFF = ("mcp", "mcp_types", "litellm", "tiktoken", "rich")
BARE = ["-c", "import sqlite3"]


def make_memory(folder: Path) -> Path:
    from om_mcp.config import Config
    from om_mcp.engine import Memory

    db = folder / "memory.db"

    async def fill() -> None:
        memory = await Memory.open(Config(db_path=str(db)))  # type: ignore[call-arg]
        async with memory:
            for t in range(20):
                messages = [
                    {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}: the sqlite decision {t}"}
                    for i in range(20)
                ]
                await memory.append_messages(f"thread-{t}", messages, resource_id="bench")

    asyncio.run(fill())
    return db


def child_env(folder: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OM_") and k != "PYTHONDONTWRITEBYTECODE"}
    for name in ("home", "data", "config", "cache"):
        (folder / name).mkdir(exist_ok=True)
    env.update(
        HOME=str(folder / "home"),
        XDG_DATA_HOME=str(folder / "data"),
        XDG_CONFIG_HOME=str(folder / "config"),
        XDG_CACHE_HOME=str(folder / "cache"),
        TERM=os.environ.get("TERM", "xterm-256color"),
    )
    return env


def spawn(args: list[str], env: dict[str, str], terminal: bool) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one `python ARGS` to its exit."""
    if terminal:
        reader, writer = pty.openpty()
        stdout = writer
    else:
        reader, writer, stdout = -1, -1, subprocess.DEVNULL
    start = time.perf_counter()
    process = subprocess.Popen([sys.executable, *args], stdout=stdout, stderr=subprocess.DEVNULL, env=env)
    if terminal:
        os.close(writer)
        while True:  # drain what it draws, or it blocks on a full terminal
            try:
                if not os.read(reader, 65536):
                    break
            except OSError:
                break
        os.close(reader)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise RuntimeError(f"{args} exited {process.returncode}")
    return wall, usage.ru_utime + usage.ru_stime


def kept_off(argv: list[str], env: dict[str, str], folder: Path) -> dict[str, int]:
    """How many modules of each kept-off package the command loaded."""
    out = folder / "modules.json"
    probe = (
        "import atexit, json, sys;"
        f" atexit.register(lambda: open({str(out)!r}, 'w').write(json.dumps(sorted(sys.modules))));"
        f" from om_mcp.cli import main; raise SystemExit(main({argv!r}))"
    )
    subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, check=True)
    modules = json.loads(out.read_text())
    return {package: sum(1 for m in modules if m.split(".")[0] == package) for package in KEPT_OFF}


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    runs = int(args[0]) if args else RUNS
    terminal = "--terminal" in sys.argv
    with tempfile.TemporaryDirectory(prefix="om-cli-spawn-") as name:
        folder = Path(name)
        db = make_memory(folder)
        env = child_env(folder)
        commands = {
            "status": ["status", "--db", str(db)],
            "search": ["search", "sqlite decision", "--db", str(db)],
            "show": ["show", "thread-3", "--db", str(db)],
        }
        spawns = {
            "bare python (import sqlite3)": BARE,
            **{f"om-mcp {name}": ["-m", "om_mcp", *argv] for name, argv in commands.items()},
        }
        bounds = {
            "import pydantic": ["-c", "import pydantic.main"],
            "import om_mcp.config": ["-c", "import om_mcp.config"],
            "load the config": ["-c", "from om_mcp.config import load_config; load_config(None, env={})"],
            "import om_mcp.engine.memory": ["-c", "import om_mcp.engine.memory"],
        }
        everything = {**spawns, **bounds}
        for argv in everything.values():  # warm-up: bytecode caches written, files in the page cache
            spawn(argv, env, terminal)
        walls: dict[str, list[float]] = {name: [] for name in everything}
        cpus: dict[str, list[float]] = {name: [] for name in everything}
        for run in range(runs):
            order = list(everything.items())
            if run % 2:
                order.reverse()  # alternate, so a burst of load does not land on one row only
            for name, argv in order:
                wall, cpu = spawn(argv, env, terminal)
                walls[name].append(wall)
                cpus[name].append(cpu)
        bare = "bare python (import sqlite3)"
        bare_wall, bare_cpu = statistics.median(walls[bare]), statistics.median(cpus[bare])
        where = "a pseudo-terminal (rich draws)" if terminal else "a pipe (plain text)"
        print(f"spawn to exit, median of {runs} runs, stdout to {where}; load average {os.getloadavg()[0]:.1f}")
        print(f"{'':34} {'wall':>8} {'x bare':>7} {'cpu':>8} {'x bare':>7}")

        def row(name: str, mark: str = "", indent: str = "") -> None:
            wall, cpu = statistics.median(walls[name]), statistics.median(cpus[name])
            figures = f"{wall * 1000:6.0f}ms {wall / bare_wall:6.1f}x {cpu * 1000:6.0f}ms {cpu / bare_cpu:6.1f}x"
            print(f"{indent + name:34} {figures}{mark}")

        for name in spawns:
            met = ""
            if name != bare:
                ratio = statistics.median(walls[name]) / bare_wall
                met = f"   target {TARGET_RATIO:.0f}x: {'met' if ratio <= TARGET_RATIO else 'missed'}"
            row(name, met)
        print("what bounds them (a spawn that does only this):")
        for name in bounds:
            row(name, indent="  ")
        print("modules loaded of the packages kept off these paths:")
        for name, argv in commands.items():
            counts = kept_off(argv, env, folder)
            print(f"  om-mcp {name:8} " + ", ".join(f"{p} {n}" for p, n in counts.items()))


if __name__ == "__main__":
    main()
