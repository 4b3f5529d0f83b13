"""The MCP SDK stays in `om_mcp/server/`: importing the engine, running the hook or a read-only
command loads no `mcp` module, nor litellm, tiktoken or rich (a command's spawn time is mostly
imports: `benchmarks/cli_spawn.py` measures it). Each runs in a child process, as a user runs it, and
what it loaded is `sys.modules` at its exit (`python -X importtime` does not see a module loaded by
`importlib.import_module`, which is how the CLI and the engine's facade load theirs)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from support.hooks import SESSION_ID, Box
from support.processes import PYTHON, REPO, clean_env

from om_mcp.config import Config
from om_mcp.engine import Memory

HEAVY = ("mcp", "mcp_types", "litellm", "tiktoken", "rich", "openai", "httpx2", "starlette", "uvicorn")
TRANSCRIPT = Path(__file__).parent / "fixtures" / "claude_code" / "session.jsonl"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def loaded(
    code: str, env: dict[str, str], out: Path, stdin: str | None = None
) -> tuple[subprocess.CompletedProcess, set[str]]:
    """Run `code` in a child; (its result, the modules loaded by the time it exited)."""
    probe = (
        "import atexit, json, sys;"
        f" atexit.register(lambda: open({str(out)!r}, 'w').write(json.dumps(sorted(sys.modules))));"
    )
    done = subprocess.run(
        [PYTHON, "-c", probe + code], input=stdin, capture_output=True, text=True, env=env, cwd=REPO, timeout=120
    )
    return done, set(json.loads(out.read_text())) if out.exists() else set()


def command(*argv: str) -> str:
    return f"from om_mcp.cli import main; raise SystemExit(main({list(argv)!r}))"


def heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in HEAVY)


def test_importing_the_engine_and_its_facade_loads_no_mcp_module(tmp_path: Path) -> None:
    code = (
        "import om_mcp.engine; from om_mcp.engine import Memory, MessageIn, RecallQuery, Status;"
        " import om_mcp.engine.observation.engine, om_mcp.models.clients, om_mcp.models.router"
    )
    done, modules = loaded(code, clean_env(tmp_path), tmp_path / "modules.json")
    assert done.returncode == 0, done.stderr[-2000:]
    assert {"om_mcp.engine.memory", "om_mcp.models.sampler", "om_mcp.messages"} <= modules
    assert heavy(modules) == []


@pytest.mark.anyio
async def test_read_only_commands_load_no_mcp_model_or_drawing_code(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    memory = await Memory.open(Config(db_path=str(db)))  # type: ignore[call-arg]
    async with memory:
        await memory.append_messages(
            "t-1", [{"role": "user", "content": "we chose sqlite for the fence"}], resource_id="me"
        )
    env = clean_env(tmp_path)
    for argv in (["status"], ["search", "sqlite"], ["show", "t-1"], ["threads"]):
        done, modules = loaded(command(*argv, "--db", str(db)), env, tmp_path / f"{argv[0]}.json")
        assert done.returncode == 0, (argv, done.stderr[-2000:])
        assert {f"om_mcp.commands.{argv[0]}", "om_mcp.engine.memory"} <= modules, argv
        assert heavy(modules) == [], argv
        if argv[0] == "search":
            assert "we chose sqlite" in done.stdout


def test_the_hook_loads_no_mcp_module(tmp_path: Path) -> None:
    box = Box(tmp_path)
    transcript = tmp_path / f"{SESSION_ID}.jsonl"
    shutil.copy(TRANSCRIPT, transcript)
    for name, extra in (("UserPromptSubmit", {}), ("Stop", {}), ("SessionStart", {"source": "resume"})):
        event = json.dumps(box.event(name, transcript, **extra))
        code = command("hook", "claude-code", "--no-worker")
        done, modules = loaded(code, box.env, tmp_path / f"{name}.json", stdin=event)
        assert done.returncode == 0, (name, done.stderr[-2000:])
        assert "om_mcp.hook.run" in modules
        assert heavy(modules) == [], name
    assert box.query("SELECT COUNT(*) FROM messages")[0][0] > 0  # it did record


def test_serving_is_what_loads_the_sdk(tmp_path: Path) -> None:
    """The other side of the fence: the server's modules do load it (the tests above can fail)."""
    done, modules = loaded(
        "from om_mcp.server import build_server; build_server", clean_env(tmp_path), tmp_path / "serve.json"
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert {"mcp.server.mcpserver", "om_mcp.server.sampling"} <= modules
    assert heavy(modules) != []
