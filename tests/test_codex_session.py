"""A real Codex session recorded end to end, from `om-mcp setup codex` to the stored messages.

The Codex CLI (npm @openai/codex) runs against a scripted model on loopback: a `model_providers`
entry whose `base_url` is the fake server, which answers the Responses API Codex speaks
(`wire_api = "responses"`, the only one 0.171 accepts). Everything lives in a throwaway HOME and
CODEX_HOME: `setup codex` writes the MCP server and the hooks there and has Codex trust the hooks
(an untrusted hook never runs); `codex exec` then fires SessionStart, UserPromptSubmit and Stop.
No login, no network. Skipped, saying so, when `codex` is not installed.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from support.processes import PYTHON, clean_env

from om_mcp.testing.fake_server import FakeLLMServer, request_text

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("codex") is None, reason="the codex CLI is not installed (npm @openai/codex)"),
]
PROMPT = "Decision: the cache lives in Redis. Say noted."
REPLY = "Noted: the cache lives in Redis."


def reply(request: dict) -> str:
    return REPLY if "cache lives in Redis" in request_text(request) else "Hello again."


@pytest.mark.timeout(900)
def test_a_codex_session_is_recorded_from_setup_to_the_stored_messages(tmp_path: Path) -> None:
    home = tmp_path / "home"
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    env = clean_env(tmp_path)
    env.update(
        HOME=str(home),
        CODEX_HOME=str(home / ".codex"),
        XDG_DATA_HOME=str(home / ".local" / "share"),
        XDG_CONFIG_HOME=str(home / ".config"),
        OM_MODEL="openai/gpt-4o-mini",  # no key: the worker a hook may start never reaches a model
        PATH=os.pathsep.join([str(Path(PYTHON).parent), env["PATH"]]),
    )
    with FakeLLMServer(reply) as server:
        config = home / ".codex" / "config.toml"
        config.parent.mkdir(parents=True)
        config.write_text(
            'model = "fake-model"\nmodel_provider = "scripted"\n\n[model_providers.scripted]\nname = "scripted"\n'
            f'base_url = "{server.base_url}"\nwire_api = "responses"\n'
        )
        setup = subprocess.run(
            [PYTHON, "-m", "om_mcp", "setup", "codex", "--no-check"],
            capture_output=True,
            text=True,
            env=env,
            cwd=project,
            timeout=240,
        )
        assert setup.returncode == 0, setup.stdout + setup.stderr
        assert "hooks: Codex trusts the 4 hooks" in setup.stdout, setup.stdout

        def codex(prompt: str) -> subprocess.CompletedProcess[str]:
            done = subprocess.run(
                ["codex", "exec", "--skip-git-repo-check", prompt],
                capture_output=True,
                text=True,
                env=env,
                cwd=project,
                timeout=300,
                stdin=subprocess.DEVNULL,
            )
            assert done.returncode == 0, done.stdout + done.stderr
            return done

        first = codex(PROMPT)
        assert REPLY in first.stdout
        for event in ("SessionStart", "UserPromptSubmit", "Stop"):
            assert f"hook: {event} Completed" in first.stderr, first.stderr  # Codex ran each, trusted

        db = home / ".local" / "share" / "om-mcp" / "memory.db"
        conn = sqlite3.connect(db)
        try:
            stored = conn.execute("SELECT thread_id, resource_id, id, role, body FROM messages ORDER BY seq").fetchall()
        finally:
            conn.close()
        ((session, resource),) = {(r[0], r[1]) for r in stored}
        assert resource == str(project)
        rows = [(r[2], r[3], r[4]) for r in stored]
        assert [role for _, role, _ in rows] == ["user", "assistant"], rows
        assert rows[0][0].endswith(":prompt") and PROMPT in rows[0][2]  # from the hook, once
        assert REPLY in rows[1][2]

        asked = len(server.requests)
        codex("What do we use for the cache?")  # the next session starts with the project's memory
        later = "\n".join(request_text(r) for r in server.requests[asked:])
        assert session in later and "cache lives in Redis" in later
