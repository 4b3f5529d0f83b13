"""The real `om-mcp serve` process over stdio and streamable HTTP, and its start-up checks."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import threading
import time
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters
from support.mcp import call, ok
from support.processes import REPO, clean_env, server_command
from support.timeouts import scaled

from om_mcp.testing.ports import free_port

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

START_TIMEOUT = 30.0
# Servers that take messages run with observation off: with the default model = "auto" a real
# `claude` command on PATH would be chosen, and a test must never reach a real model.
NO_MODEL = {"OM_OBSERVATIONAL_MEMORY__ENABLED": "false"}
HEADER_ID = re.compile(r"^\*\*\w+ \([^)]*\)\*\* \[([^\]\n]+)\]:$", re.M)
SEARCH_PLACE = re.compile(r"^thread (\S+), [\d-]+:$")
SEARCH_LINE = re.compile(r"^- \[([^\]]+)\] \w+: ")


def search_hits(text: str) -> list[tuple[str, str]]:
    """(message id, thread id) of each hit of a search result (an index under `thread <id>, <day>:` lines)."""
    hits, thread = [], None
    for row in text.splitlines():
        if place := SEARCH_PLACE.match(row):
            thread = place.group(1)
        elif (hit := SEARCH_LINE.match(row)) and thread is not None:
            hits.append((hit.group(1), thread))
    return hits


def wait_for_port(port: int, process: subprocess.Popen, timeout: float = START_TIMEOUT) -> None:
    deadline = time.monotonic() + scaled(timeout)
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
            process.wait(timeout=scaled(10))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=scaled(10))


async def stored(client: Client, thread_id: str, messages: list[dict]) -> tuple[int, int]:
    out = await ok(client, "append_messages", thread_id=thread_id, messages=messages)
    return out.get("stored", 0), out.get("skipped", 0)


async def exercise(client: Client, thread_id: str) -> None:
    """Append, read the context and the history back, and find the message by search."""
    assert await stored(
        client,
        thread_id,
        [
            {
                "id": "m1",
                "role": "user",
                "content": "My favourite mountain is Kilimanjaro.",
                "created_at": "2024-05-01T10:00:00+02:00",
            },
            {"id": "m2", "role": "assistant", "content": "Noted."},
        ],
    ) == (2, 0)
    context = await ok(client, "get_context", thread_id=thread_id)
    assert [(m["id"], m["content"]) for m in context["messages"]] == [
        ("m1", "My favourite mountain is Kilimanjaro."),
        ("m2", "Noted."),
    ]
    page = await call(client, "recall", thread_id=thread_id)
    assert HEADER_ID.findall(page) == ["m1", "m2"]
    assert "**user (2024-05-01 08:00:00Z)** [m1]:" in page
    found = await call(
        client, "recall", thread_id=thread_id, mode="search", query="kilimanjaro mountain", scope="thread"
    )
    hits = [message_id for message_id, _ in search_hits(found)]
    # m1 holds the words; m2 may follow it (a message is indexed with the ones before it)
    assert hits[0] == "m1" and set(hits) <= {"m1", "m2"}
    # re-sending is harmless over the wire too
    assert await stored(client, thread_id, [{"id": "m2", "role": "assistant", "content": "Noted."}]) == (0, 1)


async def test_stdio_servers_share_the_default_database(tmp_path):
    """Two stdio servers at once: one told --db, one finding the default path under
    $XDG_DATA_HOME. They must land on the same file and see each other's writes."""
    env = clean_env(tmp_path, **NO_MODEL)
    db = Path(env["XDG_DATA_HOME"]) / "om-mcp" / "memory.db"
    commands = {"explicit": server_command("--db", str(db)), "default": server_command()}
    per_server = 10
    finished = {name: anyio.Event() for name in commands}
    seen: dict[str, list[str]] = {}

    async def session(name: str, other: str) -> None:
        command, *args = commands[name]
        params = StdioServerParameters(command=command, args=args, env=env, cwd=str(REPO))
        async with Client(params) as client:
            assert "append_messages" in {t.name for t in (await client.list_tools()).tools}
            await exercise(client, f"{name}-thread")
            for i in range(per_server):
                assert await stored(
                    client, "together", [{"id": f"{name}{i}", "role": "user", "content": f"{name} note {i}"}]
                ) == (1, 0)
            finished[name].set()
            await finished[other].wait()
            seen[name] = HEADER_ID.findall(await call(client, "recall", thread_id=f"{other}-thread"))
            together = await ok(client, "get_context", thread_id="together")
            assert len(together["messages"]) == 2 * per_server

    with anyio.fail_after(scaled(60)):
        async with anyio.create_task_group() as group:
            group.start_soon(session, "explicit", "default")
            group.start_soon(session, "default", "explicit")
    assert seen == {"explicit": ["m1", "m2"], "default": ["m1", "m2"]}
    assert db.exists()
    assert not (Path(env["HOME"]) / ".local" / "share" / "om-mcp").exists()


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_stdio_server_in_both_eras(tmp_path, mode):
    command, *args = server_command("--db", str(tmp_path / "stdio.db"))
    params = StdioServerParameters(command=command, args=args, env=clean_env(tmp_path, **NO_MODEL), cwd=str(REPO))
    with anyio.fail_after(scaled(START_TIMEOUT)):
        async with Client(params, mode=mode) as client:
            assert client.protocol_version == ("2026-07-28" if mode == "auto" else "2025-11-25")
            await exercise(client, mode)
            error = await client.call_tool(
                "append_messages",
                {"thread_id": mode, "messages": [{"id": "m1", "role": "user", "content": "rewritten"}]},
            )
            assert error.is_error and "'m1'" in error.content[0].text
            assert (
                json.loads((await client.read_resource(f"om://threads/{mode}/status")).contents[0].text)[
                    "message_count"
                ]
                == 2
            )


async def test_http_server_in_both_eras(tmp_path):
    db = tmp_path / "http.db"
    port = free_port()
    process = subprocess.Popen(
        server_command("--transport", "http", "--port", str(port), "--db", str(db)),
        env=clean_env(tmp_path, **NO_MODEL),
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        await anyio.to_thread.run_sync(wait_for_port, port, process)
        url = f"http://127.0.0.1:{port}/mcp"
        with anyio.fail_after(scaled(START_TIMEOUT)):
            async with Client(url) as client:
                assert client.protocol_version == "2026-07-28"
                await exercise(client, "modern")
            async with Client(url, mode="legacy") as client:
                assert client.protocol_version == "2025-11-25"
                await exercise(client, "legacy")
                # the legacy session sees what the other era wrote: one server, one database
                found = await call(client, "recall", thread_id="legacy", mode="search", query="kilimanjaro")
                assert {thread for _, thread in search_hits(found)} == {"modern", "legacy"}
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
        server_command(),
        env=env,
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        log = _read_stderr_until(process, "database:", scaled(START_TIMEOUT))
    finally:
        stop(process)
    assert f"database: {expected}" in log, log
    assert not (Path(env["HOME"]) / ".local" / "share" / "om-mcp").exists()


def _start_and_fail(tmp_path, *args: str, **env_extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        server_command("--db", str(tmp_path / "never.db"), *args),
        env=clean_env(tmp_path, **env_extra),
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=scaled(60),
    )


def test_invalid_env_option_stops_start_up(tmp_path):
    result = _start_and_fail(tmp_path, OM_OBSERVATIONAL_MEMORY__OBSERVATION__MESSAGE_TOKENS="-5")
    assert result.returncode == 2
    assert "observational_memory.observation.message_tokens" in result.stderr
    assert result.stdout == ""
    assert not (tmp_path / "never.db").exists()


def test_unknown_key_in_toml_stops_start_up(tmp_path):
    config = tmp_path / "om.toml"
    config.write_text("output_token_budget = 4000\n\n[working_memory]\nread_onyl = true\n")
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
