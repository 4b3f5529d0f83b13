"""HTTP on a public bind, attacked at its edges: half-open connections, a stalled body,
a forged Host header, guessed tokens, the status page's server info, and a flood at the
open-file limit (the shares of connections and sessions: test_http_slots.py).

Before: a connection that never finished its headers stayed open for ever; the OAuth
metadata and the 401 challenge named whatever Host the client sent; invalid tokens were
never limited; `/api/info` showed the database path to every token; at the descriptor
limit the accept loop logged about 13,000 tracebacks a second.

Deadlines and the descriptor limit are tried on a real `om-mcp serve --transport http`
(a child process, its open-file limit lowered for the last test); the rest in process,
on the same uvicorn settings `serve` uses. Conditions are awaited, never timed.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import httpx2
import pytest
from support.mcp import ok
from support.processes import PYTHON, REPO, clean_env
from support.timeouts import scaled
from test_http_security import ADMIN, ALICE, BOB, INIT, TOKENS, bearer, connect, note, post, serving

from om_mcp.testing.ports import free_port

pytestmark = pytest.mark.anyio

SAFETY = scaled(60.0)  # seconds before a test gives up waiting for what it waits for


@contextmanager
def real_server(
    tmp_path: Path, nofile: int | None = None, bearer: bool = True, **http: object
) -> Iterator[tuple[int, Path]]:
    """`om-mcp serve --transport http` as a child process with bearer tokens (or none); yields
    (port, its stderr)."""
    port = free_port()
    auth = {"tokens": TOKENS} if bearer else {}
    config = {"server": {"transport": "http", "host": "127.0.0.1", "port": port, "auth": auth, "http": http}}
    env = {**clean_env(tmp_path), "OM_SERVER": json.dumps(config["server"])}
    stderr = tmp_path / f"stderr-{port}.log"
    limit = None
    if nofile is not None:
        import resource

        def limit() -> None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    with open(stderr, "wb") as err:
        proc = subprocess.Popen(
            [PYTHON, "-m", "om_mcp", "serve", "--db", str(tmp_path / "om.db")],
            cwd=REPO,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
            preexec_fn=limit,
        )
    try:
        deadline = time.monotonic() + SAFETY
        while True:  # until it accepts a connection
            assert proc.poll() is None and time.monotonic() < deadline, stderr.read_text()
            try:
                socket.create_connection(("127.0.0.1", port), timeout=SAFETY).close()
                break
            except ConnectionRefusedError:
                time.sleep(0.05)
        yield port, stderr
    finally:
        proc.terminate()
        proc.wait(30)


def closed_by_server(sock: socket.socket) -> bytes:
    """Wait (up to SAFETY) until the server closes the connection; returns what it sent first."""
    sock.settimeout(SAFETY)
    received = b""
    while chunk := sock.recv(4096):
        received += chunk
    return received


@pytest.mark.slow
def test_a_connection_that_never_finishes_its_request_is_closed(tmp_path):
    with real_server(tmp_path, header_timeout_seconds=0.5, idle_timeout_seconds=0.5) as (port, _):
        silent = socket.create_connection(("127.0.0.1", port))
        half = socket.create_connection(("127.0.0.1", port))
        half.sendall(b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # the head never ends
        stalled = socket.create_connection(("127.0.0.1", port))
        stalled.sendall(
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000\r\n\r\n{"  # a body that stops coming
        )
        for sock in (silent, half, stalled):
            sent = closed_by_server(sock)
            assert sent == b"" or sent.startswith(b"HTTP/1.1 "), sent
            sock.close()
        # a client that sends whole requests is served, again and again on one connection
        with httpx2.Client(timeout=SAFETY) as client:
            for _ in range(3):
                assert (
                    client.get(f"http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp").status_code == 200
                )


@pytest.mark.slow
def test_at_the_open_file_limit_the_log_says_so_once(tmp_path):
    with real_server(tmp_path, nofile=96) as (port, stderr):
        held = []
        deadline = time.monotonic() + SAFETY
        while b"refusing new connections" not in stderr.read_bytes():
            assert time.monotonic() < deadline, stderr.read_text()[-2000:]
            try:
                held.append(socket.create_connection(("127.0.0.1", port), timeout=5))
            except OSError:
                time.sleep(0.05)
        for _ in range(300):  # keep knocking: every attempt is refused, none logged
            try:
                socket.create_connection(("127.0.0.1", port), timeout=5).close()
            except OSError:
                pass
        for sock in held:
            sock.close()
        text = stderr.read_text()
    assert "Traceback" not in text
    assert text.count("refusing new connections") == 1, text[-3000:]
    assert "ulimit -n, is 96" in text
    assert len(text.splitlines()) < 15, text[-3000:]


async def test_the_metadata_and_the_challenge_never_echo_the_host_header(make_config):
    async with serving(make_config, host="0.0.0.0", **bearer()) as url:
        port = url.rsplit(":", 1)[1].split("/")[0]
        bind = f"http://0.0.0.0:{port}"
        challenge = (await post(url, INIT, Host="evil.example")).headers["www-authenticate"]
        assert f'resource_metadata="{bind}/.well-known/oauth-protected-resource/mcp"' in challenge
        assert "evil" not in challenge
        async with httpx2.AsyncClient() as http:
            metadata = url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
            document = (await http.get(metadata, headers={"Host": 'evil.example"; x="'})).json()
        assert document["resource"] == f"{bind}/mcp"


async def test_failed_authentication_is_limited_per_client_address(make_config):
    async with serving(make_config, **bearer({"failed_auth_per_minute": 5})) as url:
        answers = [(await post(url, INIT, f"om_guess-{n:024d}")).status_code for n in range(5)]
        assert answers == [401] * 5
        limited = await post(url, INIT, "om_guess-again-000000000000")
        assert limited.status_code == 429 and int(limited.headers["retry-after"]) >= 1
        assert "without a valid token" in limited.text
        assert (await post(url, INIT)).status_code == 429  # no token at all counts too
        assert (await post(url, INIT, ALICE)).status_code == 200  # a valid token is never refused for it


async def info_for(http: httpx2.AsyncClient, base: str, token: str) -> dict:
    """/api/info, once the memory is open (until then the page answers 503)."""
    deadline = time.monotonic() + SAFETY
    while (
        answer := await http.get(f"{base}/api/info", headers={"Authorization": f"Bearer {token}"})
    ).status_code == 503:
        assert time.monotonic() < deadline, answer.text
        await anyio.sleep(0.05)
    assert answer.status_code == 200, answer.text
    return answer.json()


async def test_server_info_names_the_database_only_for_an_admin_token(make_config):
    async with serving(make_config, **bearer()) as url:
        base = url.removesuffix("/mcp")
        async with httpx2.AsyncClient(timeout=scaled(30)) as http:
            alice = await info_for(http, base, ALICE)
            admin = await info_for(http, base, ADMIN)
    assert alice["database"] is None and alice["version"]
    assert admin["database"].endswith(".db") or admin["database"].startswith("postgresql")


async def test_a_thread_id_held_by_another_tenant_is_refused_without_saying_whose(make_config):
    """Thread ids are one space for the server: the first tenant to use an id holds it. The
    other sees "unknown thread" for it everywhere, and creating it is refused in one sentence
    that names no owner; its own threads are untouched, under other ids."""
    async with serving(make_config, **bearer()) as url:
        async with connect(url, ALICE) as alice:
            await ok(alice, "append_messages", thread_id="planning", messages=[note(1, "alice's launch plan")])
        async with connect(url, BOB) as bob:
            refused = await bob.call_tool("append_messages", {"thread_id": "planning", "messages": [note(1, "bob")]})
            text = refused.content[0].text
            assert refused.is_error and "'planning' is already in use on this server" in text
            assert "alice" not in text and "launch" not in text
            assert (await bob.call_tool("get_context", {"thread_id": "planning"})).content[0].text == (
                "thread_id: unknown thread 'planning'"
            )
            listed = await bob.read_resource("om://resources/bob/threads")
            assert "planning" not in listed.contents[0].text
            await ok(bob, "append_messages", thread_id="bob-planning", messages=[note(1, "bob's own plan")])
        async with connect(url, ALICE) as alice:
            context = await ok(alice, "get_context", thread_id="planning")
            assert [m["id"] for m in context["messages"]] == ["m1"]  # nothing of bob's got in
