"""GitHub Copilot CLI, the seventh host, added through its adapter alone (`hosts/copilot_cli.py`,
`hosts/setup/copilot_cli.py` and a line in each registry), and recorded end to end.

The Copilot CLI (npm @github/copilot) runs against a scripted model on loopback: Copilot's own
"bring your own key" settings (`COPILOT_PROVIDER_BASE_URL` at `om_mcp.testing.fake_server`, which
answers the Chat Completions API, streaming), with `COPILOT_OFFLINE=true`: no GitHub login, no
network. Everything lives in a throwaway HOME: `om-mcp setup copilot-cli` writes the MCP server and
the hooks there, `copilot mcp get` reads the server entry back, `copilot -p` fires SessionStart,
UserPromptSubmit, Stop and SessionEnd, and a second session starts with what the first stored.
Skipped, saying so, when `copilot` is not installed.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from support.processes import PYTHON, clean_env
from support.timeouts import scaled

from om_mcp.hosts import adapter_for
from om_mcp.hosts.adapter import Source
from om_mcp.reading import Position
from om_mcp.testing.fake_server import FakeLLMServer, request_text
from om_mcp.trim import TrimRule

COPILOT = shutil.which("copilot")
needs_copilot = pytest.mark.skipif(COPILOT is None, reason="the Copilot CLI is not installed (npm @github/copilot)")
PROMPT = "Decision: the cache lives in Redis. Say noted."
REPLY = "Noted: the cache lives in Redis."
SESSION = "452554fb-2dbb-4226-99d6-30f5bcf95499"
CWD = {"cwd": "/p"}
OUTPUT = {"content": "a.txt"}


def copilot_env(tmp_path: Path, server: FakeLLMServer | None = None) -> dict[str, str]:
    home = tmp_path / "home"
    env = clean_env(tmp_path)
    env.update(
        HOME=str(home),
        XDG_DATA_HOME=str(home / ".local" / "share"),
        XDG_CONFIG_HOME=str(home / ".config"),
        OM_MODEL="openai/gpt-4o-mini",  # no key: the worker a hook may start never reaches a model
        PATH=os.pathsep.join([str(Path(PYTHON).parent), env["PATH"]]),
        COPILOT_OFFLINE="true",
        COPILOT_MODEL="fake-model",
    )
    if server is not None:
        env["COPILOT_PROVIDER_BASE_URL"] = server.base_url
    return env


def setup(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "om_mcp", "setup", "copilot-cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=scaled(240),
    )


def test_the_event_log_becomes_messages_with_their_tools(tmp_path: Path) -> None:
    """Copilot's event log (its package's `schemas/session-events.schema.json`): the person's text, the reply
    with its tool requests, the tool's result named after its call; hooks, turns and usage left out."""
    lines = [
        {
            "type": "session.start",
            "data": {"sessionId": SESSION, "copilotVersion": "1.0.102", "context": {"cwd": "/p"}},
        },
        {"type": "hook.start", "data": {"hookType": "userPromptSubmitted"}},
        {"type": "user.message", "data": {"content": "list the files", "transformedContent": "<current_datetime>x"}},
        {
            "type": "assistant.message",
            "data": {
                "messageId": "m1",
                "content": "Listing them.",
                "toolRequests": [{"toolCallId": "c1", "name": "bash", "arguments": {"command": "ls"}}],
            },
        },
        {
            "type": "tool.execution_complete",
            "data": {"toolCallId": "c1", "success": True, "result": {"content": "a.txt"}},
        },
        {"type": "tool.execution_complete", "data": {"toolCallId": "c2", "success": False, "error": {"message": "no"}}},
        {"type": "assistant.turn_end", "data": {"turnId": "0"}},
    ]
    text = "".join(
        json.dumps({**line, "id": f"e{n}", "timestamp": "2026-12-07T20:21:55.000Z"}) + "\n"
        for n, line in enumerate(lines)
    )
    host = adapter_for("copilot-cli")
    assert host.recognises(lines[0]) and not adapter_for("claude-code").recognises(lines[0])
    log = tmp_path / "events.jsonl"
    log.write_text(text)
    messages = host.read(Source(str(log)), Position(), final=True, trim=TrimRule()).messages
    assert host.session_of(str(log)) == (SESSION, "/p")
    assert [(m["id"], m["role"]) for m in messages] == [
        ("e2", "user"),
        ("e3", "assistant"),
        ("e4", "tool"),
        ("e5", "tool"),
    ]
    assert messages[0]["content"] == [{"type": "text", "text": "list the files"}]
    assert messages[1]["content"][1] == {
        "type": "tool-call",
        "tool_name": "bash",
        "args": {"command": "ls"},
        "tool_call_id": "c1",
    }
    assert messages[2]["content"][0]["tool_name"] == "bash" and messages[2]["content"][0]["result"] == "a.txt"
    assert messages[3]["content"][0].get("is_error") is True
    assert all(m["metadata"]["host"] == "copilot-cli" for m in messages)


@needs_copilot
@pytest.mark.slow
def test_setup_dry_run_uninstall_and_copilot_reads_the_server_entry(tmp_path: Path) -> None:
    env = copilot_env(tmp_path)
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    dry = setup(env, project, "--dry-run")
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert "mcp-config.json" in dry.stdout and "settings.json" in dry.stdout
    assert not (tmp_path / "home" / ".copilot").exists()  # a dry run writes nothing anywhere
    done = setup(env, project, "--no-check")
    assert done.returncode == 0, done.stdout + done.stderr
    settings = json.loads((tmp_path / "home" / ".copilot" / "settings.json").read_text())
    assert set(settings["hooks"]) == {
        "SessionStart",
        "UserPromptSubmit",
        "Stop",
        "SubagentStop",
        "PreCompact",
        "SessionEnd",
    }
    shown = subprocess.run(
        [COPILOT or "copilot", "mcp", "get", "om-mcp"],
        capture_output=True,
        text=True,
        env=env,
        cwd=project,
        timeout=scaled(120),
        stdin=subprocess.DEVNULL,
    )
    assert shown.returncode == 0 and "serve --hooks" in shown.stdout, shown.stdout + shown.stderr
    again = setup(env, project, "--no-check")
    assert "unchanged" in again.stdout and "wrote" not in again.stdout
    gone = setup(env, project, "--uninstall")
    assert gone.returncode == 0, gone.stdout + gone.stderr
    assert not (tmp_path / "home" / ".copilot" / "settings.json").exists()
    assert not (tmp_path / "home" / ".copilot" / "mcp-config.json").exists()


@needs_copilot
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_copilot_session_is_recorded_and_the_next_one_starts_with_it(tmp_path: Path) -> None:
    seen: list[str] = []

    def reply(request: dict) -> str:
        seen.append(request_text(request))
        return REPLY if "cache lives in Redis" in request_text(request) else "Hello again."

    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    with FakeLLMServer(reply) as server:
        env = copilot_env(tmp_path, server)
        done = setup(env, project)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "check: ok" in done.stdout

        def copilot(prompt: str) -> None:
            ran = subprocess.run(
                [COPILOT or "copilot", "-p", prompt, "--allow-all-tools"],
                capture_output=True,
                text=True,
                env=env,
                cwd=project,
                timeout=scaled(300),
                stdin=subprocess.DEVNULL,
            )
            assert ran.returncode == 0, ran.stdout + ran.stderr

        copilot(PROMPT)
        db = tmp_path / "home" / ".local" / "share" / "om-mcp" / "memory.db"
        conn = sqlite3.connect(db)
        try:
            rows = conn.execute(
                "SELECT m.id, m.role, m.body, t.resource_id, t.metadata"
                " FROM messages m JOIN threads t ON t.id = m.thread_id ORDER BY m.seq"
            ).fetchall()
        finally:
            conn.close()
        assert [(role, body) for _, role, body, _, _ in rows] == [("user", PROMPT), ("assistant", REPLY)], rows
        assert rows[0][0].endswith(":prompt")  # stored from UserPromptSubmit's payload, its copy left out later
        assert {r[3] for r in rows} == {str(project)}
        metadata = json.loads(rows[0][4])
        assert metadata["host"] == "copilot-cli" and "ended_at" in metadata  # SessionEnd closed it
        log = tmp_path / "home" / ".local" / "share" / "om-mcp" / "hook.log"
        assert not log.exists() or "Error" not in log.read_text(), log.read_text()
        seen.clear()
        copilot("What do you remember?")
        assert any("cache lives in Redis" in text and "om-mcp long-term memory" in text for text in seen)
