"""The real `om-mcp serve` process over stdio and streamable HTTP, and its start-up checks."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from conftest import PYTHON, REPO, clean_env, ok

pytestmark = pytest.mark.anyio

START_TIMEOUT = 30.0


def serve_args(*extra: str) -> list[str]:
    return ["-m", "om_mcp", "serve", *extra]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, process: subprocess.Popen, timeout: float = START_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"server exited early with code {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"server did not listen on port {port} within {timeout}s")


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


async def exercise(client: Client, thread_id: str) -> None:
    """Append, read the context back, and find the message by search."""
    out = await ok(client, "append_messages", thread_id=thread_id, messages=[
        {"id": "m1", "role": "user", "content": "My favourite mountain is Kilimanjaro.",
         "created_at": "2024-05-01T10:00:00+02:00"},
        {"id": "m2", "role": "assistant", "content": "Noted."},
    ])
    assert out["appended"] == 2
    context = await ok(client, "get_context", thread_id=thread_id)
    assert [m["id"] for m in context["messages"]] == ["m1", "m2"]
    assert context["messages"][0]["created_at"] == "2024-05-01T10:00:00+02:00"
    found = await ok(client, "recall", thread_id=thread_id, mode="search", query="kilimanjaro mountain",
                      scope="thread")
    # m1 holds the words; m2 may follow it (a message is indexed with the ones before it)
    assert found["results"][0]["message_id"] == "m1"
    assert {r["message_id"] for r in found["results"]} <= {"m1", "m2"}


async def test_stdio_servers_share_the_default_database(tmp_path):
    """Two stdio servers at once: one told --db, one finding the default path under
    $XDG_DATA_HOME. They must land on the same file and see each other's writes."""
    env = clean_env(tmp_path)
    db = Path(env["XDG_DATA_HOME"]) / "om-mcp" / "memory.db"
    commands = {
        "explicit": serve_args("--db", str(db)),
        "default": serve_args(),
    }
    per_server = 10
    finished = {name: anyio.Event() for name in commands}
    seen: dict[str, list[str]] = {}

    async def session(name: str, other: str) -> None:
        params = StdioServerParameters(command=PYTHON, args=commands[name], env=env, cwd=str(REPO))
        async with Client(params) as client:
            assert "append_messages" in {t.name for t in (await client.list_tools()).tools}
            await exercise(client, f"{name}-thread")
            for i in range(per_server):
                out = await ok(client, "append_messages", thread_id="together",
                               messages=[{"id": f"{name}{i}", "role": "user", "content": f"{name} note {i}"}])
                assert out["appended"] == 1
            finished[name].set()
            await finished[other].wait()
            page = await ok(client, "recall", thread_id=f"{other}-thread")
            seen[name] = [m["id"] for m in page["messages"]]
            together = await ok(client, "get_context", thread_id="together")
            assert len(together["messages"]) == 2 * per_server

    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:
            group.start_soon(session, "explicit", "default")
            group.start_soon(session, "default", "explicit")
    assert seen == {"explicit": ["m1", "m2"], "default": ["m1", "m2"]}
    assert db.exists()
    assert not (Path(env["HOME"]) / ".local" / "share" / "om-mcp").exists()


async def test_http_server_in_both_eras(tmp_path):
    db = tmp_path / "http.db"
    port = free_port()
    process = subprocess.Popen(
        [PYTHON, *serve_args("--transport", "http", "--port", str(port), "--db", str(db))],
        env=clean_env(tmp_path), cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True,
    )
    try:
        await anyio.to_thread.run_sync(wait_for_port, port, process)
        url = f"http://127.0.0.1:{port}/mcp"
        with anyio.fail_after(START_TIMEOUT):
            async with Client(url) as client:
                assert client.protocol_version == "2026-07-28"
                await exercise(client, "modern")
            async with Client(url, mode="legacy") as client:
                assert client.protocol_version == "2025-11-25"
                await exercise(client, "legacy")
                # the legacy session sees what the other era wrote: one server, one database
                found = await ok(client, "recall", thread_id="legacy", mode="search", query="kilimanjaro")
                assert {r["thread_id"] for r in found["results"]} == {"modern", "legacy"}
    finally:
        stop(process)
        stderr = process.stderr.read()
    assert "Traceback" not in stderr, stderr
    assert str(db) in stderr


def _read_stderr_until(process: subprocess.Popen, needle: str, timeout: float) -> str:
    """Collect the child's stderr until `needle` shows up (or the timeout)."""
    lines: list[str] = []
    found = threading.Event()

    def pump() -> None:
        for line in process.stderr:
            lines.append(line)
            if needle in line:
                found.set()
        found.set()

    threading.Thread(target=pump, daemon=True).start()
    found.wait(timeout)
    return "".join(lines)


def test_default_db_path_is_under_xdg_data_home_and_logged(tmp_path):
    env = clean_env(tmp_path)
    expected = Path(env["XDG_DATA_HOME"]) / "om-mcp" / "memory.db"
    process = subprocess.Popen(
        [PYTHON, *serve_args()], env=env, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )
    try:
        log = _read_stderr_until(process, "database:", START_TIMEOUT)
    finally:
        stop(process)
    assert f"database: {expected}" in log, log
    assert not (Path(env["HOME"]) / ".local" / "share" / "om-mcp").exists()


def _start_and_fail(tmp_path, *args: str, **env_extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PYTHON, *serve_args("--db", str(tmp_path / "never.db"), *args)], env=clean_env(tmp_path, **env_extra),
        cwd=REPO, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
    )


def test_invalid_env_option_stops_start_up(tmp_path):
    result = _start_and_fail(tmp_path, OM_OBSERVATIONAL_MEMORY__OBSERVATION__MESSAGE_TOKENS="-5")
    assert result.returncode == 2
    assert "observational_memory.observation.message_tokens" in result.stderr
    assert result.stdout == ""
    assert not (tmp_path / "never.db").exists()


def test_unknown_key_in_toml_stops_start_up(tmp_path):
    config = tmp_path / "om.toml"
    config.write_text('output_token_budget = 4000\n\n[working_memory]\nread_onyl = true\n')
    result = _start_and_fail(tmp_path, "--config", str(config))
    assert result.returncode == 2
    assert "working_memory.read_onyl" in result.stderr
    assert "unknown option" in result.stderr
    assert not (tmp_path / "never.db").exists()


def test_bad_value_in_toml_and_missing_file_stop_start_up(tmp_path):
    config = tmp_path / "om.toml"
    config.write_text("output_token_budget = 10\n")
    result = _start_and_fail(tmp_path, "--config", str(config))
    assert result.returncode == 2 and "output_token_budget" in result.stderr
    result = _start_and_fail(tmp_path, "--config", str(tmp_path / "missing.toml"))
    assert result.returncode == 2 and "missing.toml" in result.stderr
