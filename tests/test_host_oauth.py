"""Host CLIs sign in to om-mcp over OAuth through its consent page, driven in headless Chromium:
Codex (npm @openai/codex), whose tool call then reaches om-mcp, and Claude Code, whose health check
then connects with the token it got.

`om-mcp serve --oauth` runs as a user runs it; `codex mcp login` registers, prints the
authorization URL and waits on its loopback callback; headless Chromium (Debian's `chromium`)
opens that URL and the owner approves on the consent page with the code `om-mcp connect` printed;
then `codex exec`, whose model is the scripted server on loopback answering with a call of om-mcp's
`append_messages`, stores a message, which lands in the resource the consent granted. Everything
runs in a throwaway HOME and CODEX_HOME; without codex or chromium the test skips, saying so.

Claude Code's `claude mcp login` wants a terminal (it offers to take a pasted redirect URL), so it
runs on a pseudo-terminal here; its tool call is not tried: `claude -p` needs an Anthropic login or
key and speaks the Messages API, which the scripted server does not.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from support.processes import PYTHON, REPO, clean_env
from support.timeouts import scaled

from om_mcp.testing.fake_server import FakeLLMServer, FakeReply
from om_mcp.testing.headless import find_chromium, open_page
from om_mcp.testing.ports import free_port

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

NOTE = "the boiler is serviced in March"


def scripted(request: dict[str, Any]) -> FakeReply:
    """The model: call om-mcp's append_messages (Codex groups an MCP server's tools under the namespace
    `mcp__<name>`), then answer in words once the call's output is back."""
    if any(isinstance(i, dict) and i.get("type") == "function_call_output" for i in request.get("input", [])):
        return FakeReply("Stored it in om-mcp.")
    arguments = {"thread_id": "codex-thread", "messages": [{"id": "c1", "role": "user", "content": NOTE}]}
    return FakeReply("", tool_calls=[{"name": "append_messages", "namespace": "mcp__om", "arguments": arguments}])


def oauth_server(env: dict[str, str], db: Path) -> tuple[subprocess.Popen[str], str]:
    """`om-mcp serve --transport http --oauth` on a free loopback port, its public URL that port's."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    command = [PYTHON, "-m", "om_mcp", "serve", "--transport", "http", "--port", str(port), "--oauth"]
    server = subprocess.Popen(
        [*command, "--public-url", base, "--db", str(db)],
        env=env,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    return server, base


def _wait_for(url: str, server: subprocess.Popen[str], seconds: float) -> None:
    import urllib.request

    deadline = time.monotonic() + seconds
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except OSError:
            assert server.poll() is None, "om-mcp serve exited"
            assert time.monotonic() < deadline, f"om-mcp serve did not answer {url}"
            time.sleep(0.3)


@pytest.mark.timeout(900)
async def test_codex_logs_in_through_the_consent_page_and_its_tool_call_reaches_om_mcp(tmp_path: Path) -> None:
    if shutil.which("codex") is None:
        pytest.skip("the Codex CLI is not installed (npm install -g @openai/codex; .ci/run installs it)")
    if find_chromium() is None:
        pytest.skip("no Chromium (Debian's chromium package; .ci/run installs it)")
    home = tmp_path / "home"
    (home / ".codex").mkdir(parents=True)
    env = clean_env(tmp_path)
    env.update(HOME=str(home), CODEX_HOME=str(home / ".codex"), OM_MODEL="openai/gpt-4o-mini")
    db = tmp_path / "memory.db"
    om = [PYTHON, "-m", "om_mcp"]
    server, base = oauth_server(env, db)
    login: subprocess.Popen[str] | None = None
    try:
        await anyio.to_thread.run_sync(_wait_for, f"{base}/.well-known/oauth-authorization-server", server, scaled(120))
        run = lambda *args: subprocess.run(  # noqa: E731
            list(args),
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=scaled(120),
            stdin=subprocess.DEVNULL,
        )
        # What `codex mcp add om --url URL` writes (run against a server that offers OAuth, that command
        # starts the login itself; the test runs `codex mcp login`, as a user does after adding it).
        (home / ".codex" / "config.toml").write_text(f'[mcp_servers.om]\nurl = "{base}/mcp"\n')

        login = subprocess.Popen(
            ["codex", "mcp", "login", "om"],
            env=env,
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        assert login.stdout is not None
        url = ""
        with anyio.fail_after(scaled(120)):
            while not url.startswith(f"{base}/authorize?"):
                url = (await anyio.to_thread.run_sync(login.stdout.readline)).strip()
                assert url or login.poll() is None, "codex mcp login ended before printing a URL"
        printed = run(*om, "connect", "--json", "--public-url", base, "--db", str(db))
        assert printed.returncode == 0, printed.stderr
        code = json.loads(printed.stdout)["code"]

        async with await open_page(url) as page:  # headless Chromium, as the owner's browser
            await page.until("!!document.querySelector('input[name=code]')", timeout=scaled(60))
            client = await page.evaluate("document.querySelector('main b').textContent")
            await page.evaluate(f"document.querySelector('input[name=code]').value = {json.dumps(code)}")
            await page.evaluate("document.querySelector('input[name=resource]').value = 'alice'")
            await page.evaluate("document.querySelector('button[value=approve]').click()")
            landed = await page.until(
                "location.href.includes('/callback') && document.body && document.body.innerText", timeout=scaled(60)
            )
        assert client == "Codex"
        print(f"\nconsent page approved for {client}; Codex's callback page says: {landed.strip()}")
        out, err = await anyio.to_thread.run_sync(lambda: login.communicate(timeout=scaled(120)))
        assert login.returncode == 0, out + err
        assert "Successfully logged in to MCP server 'om'" in out + err

        with FakeLLMServer(scripted) as model:
            config = home / ".codex" / "config.toml"
            config.write_text(
                'model = "fake-model"\nmodel_provider = "scripted"\napproval_policy = "never"\n'
                + config.read_text()
                + f'\n[model_providers.scripted]\nname = "scripted"\nbase_url = "{model.base_url}"\n'
                'wire_api = "responses"\n'
            )
            done = await anyio.to_thread.run_sync(
                lambda: subprocess.run(
                    ["codex", "exec", "--skip-git-repo-check", "Remember when the boiler is serviced"],
                    env=env,
                    cwd=tmp_path,
                    capture_output=True,
                    text=True,
                    timeout=scaled(300),
                    stdin=subprocess.DEVNULL,
                )
            )
            assert done.returncode == 0, done.stdout + done.stderr
            assert "Stored it in om-mcp." in done.stdout
            outputs = [
                i
                for r in model.requests
                for i in r.get("input", [])
                if isinstance(i, dict) and i.get("type") == "function_call_output"
            ]
            assert '{\\"stored\\":1}' in json.dumps(outputs), outputs  # om-mcp's answer, through Codex
        with sqlite3.connect(db) as conn:
            stored = conn.execute("SELECT thread_id, resource_id, body FROM messages").fetchall()
        assert stored == [("codex-thread", "alice", NOTE)]  # in the resource the consent granted
        listed = run(*om, "token", "list", "--json", "--db", str(db))
        [grant] = [g for g in json.loads(listed.stdout) if g["kind"] == "oauth"]
        assert grant["who"] == "Codex" and grant["resources"] == "alice" and grant["state"] == "active"
    finally:
        for process in (login, server):
            if process is not None and process.poll() is None:
                process.terminate()
                process.wait(timeout=30)


async def approve(url: str, code: str, resources: str) -> tuple[str, str]:
    """The owner in headless Chromium: open the client's authorization URL, type the code and the
    resources, approve; (the client's name on the page, the text of the client's callback page)."""
    async with await open_page(url) as page:
        await page.until("!!document.querySelector('input[name=code]')", timeout=scaled(60))
        client = await page.evaluate("document.querySelector('main b').textContent")
        await page.evaluate(f"document.querySelector('input[name=code]').value = {json.dumps(code)}")
        await page.evaluate(f"document.querySelector('input[name=resource]').value = {json.dumps(resources)}")
        await page.evaluate("document.querySelector('button[value=approve]').click()")
        landed = await page.until(
            "location.href.includes('/callback') && document.body && document.body.innerText", timeout=scaled(60)
        )
    return client, landed


@pytest.mark.timeout(900)
async def test_claude_code_logs_in_through_the_consent_page_and_connects(tmp_path: Path) -> None:
    if shutil.which("claude") is None:
        pytest.skip("the Claude Code CLI is not installed (npm install -g @anthropic-ai/claude-code; .ci/run does)")
    if find_chromium() is None:
        pytest.skip("no Chromium (Debian's chromium package; .ci/run installs it)")
    import pty

    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    env = clean_env(tmp_path)
    env.update(HOME=str(home), OM_MODEL="openai/gpt-4o-mini", TERM="dumb")
    db = tmp_path / "memory.db"
    om = [PYTHON, "-m", "om_mcp"]
    server, base = oauth_server(env, db)
    login: subprocess.Popen[bytes] | None = None
    primary = secondary = -1

    def claude(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["claude", *args],
            env=env,
            cwd=project,
            capture_output=True,
            text=True,
            timeout=scaled(120),
            stdin=subprocess.DEVNULL,
        )

    try:
        await anyio.to_thread.run_sync(_wait_for, f"{base}/.well-known/oauth-authorization-server", server, scaled(120))
        added = claude("mcp", "add", "--transport", "http", "om", f"{base}/mcp")
        assert added.returncode == 0, added.stdout + added.stderr
        primary, secondary = pty.openpty()
        login = subprocess.Popen(
            ["claude", "mcp", "login", "om"], env=env, cwd=project, stdin=secondary, stdout=secondary, stderr=secondary
        )
        os.close(secondary)
        shown = b""
        with anyio.fail_after(scaled(120)):
            while b"/authorize?" not in shown or not shown[shown.find(b"/authorize?") :].split(maxsplit=1)[1:]:
                shown += await anyio.to_thread.run_sync(os.read, primary, 4096)
        url = shown[shown.find(b"http://127.0.0.1") :].split()[0].decode()
        assert url.startswith(f"{base}/authorize?"), shown
        printed = subprocess.run(
            [*om, "connect", "--json", "--public-url", base, "--db", str(db)],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=scaled(120),
        )
        assert printed.returncode == 0, printed.stderr
        client, landed = await approve(url, json.loads(printed.stdout)["code"], "alice")
        assert client.startswith("Claude Code")
        print(f"\nconsent page approved for {client}; Claude Code's callback page says: {landed.strip()}")
        with anyio.fail_after(scaled(120)):
            while b"Authenticated with" not in shown:
                try:
                    shown += await anyio.to_thread.run_sync(os.read, primary, 4096)
                except OSError:  # the terminal closed: claude exited
                    break
        assert b'Authenticated with "om"' in shown, shown
        listed = claude("mcp", "list")  # health-checks the server with the token it stored
        assert "om: " in listed.stdout and "Connected" in listed.stdout, listed.stdout + listed.stderr
        granted = subprocess.run(
            [*om, "token", "list", "--json", "--db", str(db)],
            env=env,
            capture_output=True,
            text=True,
            timeout=scaled(120),
        )
        [grant] = [g for g in json.loads(granted.stdout) if g["kind"] == "oauth"]
        assert grant["who"].startswith("Claude Code") and grant["resources"] == "alice"
        assert grant["state"] == "active" and grant["last_used"]
    finally:
        for process in (login, server):
            if process is not None and process.poll() is None:
                process.terminate()
                process.wait(timeout=30)
        if primary >= 0:
            os.close(primary)
