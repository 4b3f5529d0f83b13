"""Fair slots on the HTTP server: connections and legacy sessions shared out per client address and
per token, clients without a token held to a small share, idle ones closed first, one body limit on
every route, and a budget for failed authentication across all addresses.

Before: one client without a token holding 505 idle connections (one `GET /ui` each) made every
legitimate request 503 (the 500-connection limit was global); abandoned legacy sessions filled the
pool of 100 for 30 minutes; `/api/*` read a body of any size; 1,200 guesses from 40 loopback
addresses were never limited.

Through real sockets (other loopback source addresses stand for other clients): on a real
`om-mcp serve` child process for the 505 connections, in process otherwise (on the uvicorn settings
`serve` uses; a socket that waits on the server then waits in a thread). Answers and refusals are
counted; waits are for conditions, never timed.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AsyncExitStack, ExitStack, asynccontextmanager, contextmanager

import anyio
import httpx2
import pytest
from support.mcp import ok
from test_http_edges import SAFETY, real_server
from test_http_security import ACCEPT, ALICE, BOB, INIT, bearer, connect, note, post, serving

from om_mcp.server.http.connections import BODY_GRACE_SECONDS

pytestmark = pytest.mark.anyio

UI = b"GET /ui HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
LEGACY = "2025-11-25"


def held_open(port: int, request: bytes = UI, source: str = "127.0.0.1") -> socket.socket:
    """A connection that sent one request, read its whole answer (200), and stays open (keep-alive)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=SAFETY, source_address=(source, 0))
    sock.sendall(request)
    answer = b""
    while b"\r\n\r\n" not in answer:
        answer += sock.recv(65536)
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    length = next(int(line.split(b":")[1]) for line in lines if line.lower().startswith(b"content-length"))
    while len(body) < length:
        body += sock.recv(65536)
    assert head.startswith(b"HTTP/1.1 200"), head
    return sock


def closed_by_server(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        return sock.recv(1) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True
    finally:
        sock.setblocking(True)


def still_open(socks: list[socket.socket]) -> int:
    return sum(not closed_by_server(s) for s in socks)


def until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + SAFETY
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


async def until_async(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + SAFETY
    while not condition():
        assert time.monotonic() < deadline, what
        await anyio.sleep(0.02)


def with_token(token: str, path: str = "/api/info") -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\r\n".encode()


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/")[0])


def headers(token: str | None, session: str | None = None) -> dict[str, str]:
    out = dict(ACCEPT, **({"Authorization": f"Bearer {token}"} if token else {}))
    return {**out, "Mcp-Session-Id": session, "Mcp-Protocol-Version": LEGACY} if session else out


# -- connections -----------------------------------------------------------------------------------------


@pytest.mark.timeout(600)
@pytest.mark.parametrize("auth", ["bearer", "none"])
def test_505_idle_connections_keep_no_legitimate_request_out(tmp_path, auth):
    """The issue's attack, on a real server with the default limits: every legitimate request is
    answered, and a client without a token keeps no more than its share of the connections."""
    token = {"Authorization": f"Bearer {ALICE}"} if auth == "bearer" else {}
    with real_server(tmp_path, bearer=auth == "bearer") as (port, _):
        info = f"http://127.0.0.1:{port}/api/info"
        with httpx2.Client(timeout=SAFETY, headers=token) as http:
            until(lambda: http.get(info).status_code == 200, "the memory opens")
        attacker = [held_open(port) for _ in range(505)]
        try:
            answers = []
            for _ in range(20):  # each on a new connection, as a client starting up makes one
                with httpx2.Client(timeout=SAFETY, headers=token) as http:
                    answers.append(http.get(info).status_code)
            assert answers == [200] * 20
            if auth == "bearer":  # no token: 32 from one address (and 10 % of the 500 in all)
                until(lambda: still_open(attacker) <= 32, "the attacker keeps its share only")
            else:  # the one local user: the idle ones are closed as room is needed
                until(lambda: still_open(attacker) <= 500, "the oldest idle ones closed")
        finally:
            for sock in attacker:
                sock.close()


async def ready(url: str) -> None:
    """Until the memory is open (the status page answers 503 before)."""
    async with httpx2.AsyncClient(timeout=SAFETY, headers={"Authorization": f"Bearer {ALICE}"}) as http:
        while (await http.get(url.replace("/mcp", "/api/info"))).status_code == 503:
            await anyio.sleep(0.05)


async def test_one_address_without_a_token_keeps_its_own_share(make_config):
    async with serving(make_config, **bearer({"max_connections_per_address": 4, "unauthenticated_share": 1.0})) as url:
        port = port_of(url)
        crowd = [await anyio.to_thread.run_sync(held_open, port, UI, "127.0.0.2") for _ in range(10)]
        await until_async(lambda: still_open(crowd) == 4, "one address's share")
        assert all(closed_by_server(s) for s in crowd[:6])  # its oldest idle connections were closed
        neighbour = await anyio.to_thread.run_sync(held_open, port, UI, "127.0.0.3")
        assert not closed_by_server(neighbour) and still_open(crowd) == 4  # another address's is not
        for sock in [*crowd, neighbour]:
            sock.close()


async def test_clients_without_a_token_share_a_small_part_of_the_slots(make_config):
    async with serving(make_config, **bearer({"max_connections": 20, "unauthenticated_share": 0.25})) as url:
        port = port_of(url)
        await ready(url)
        crowd = [await anyio.to_thread.run_sync(held_open, port, UI, f"127.0.0.{10 + n}") for n in range(12)]
        await until_async(lambda: still_open(crowd) == 5, "a quarter of 20, whatever the address")
        mine = [await anyio.to_thread.run_sync(held_open, port, with_token(ALICE)) for _ in range(10)]
        assert still_open(mine) == 10  # a token's connections are beyond that share


@asynccontextmanager
async def busy(http: httpx2.AsyncClient, url: str, token: str | None, count: int) -> AsyncIterator[list[str]]:
    """`count` legacy sessions, each with its GET stream open: each session, and its connection, busy."""
    async with AsyncExitStack() as stack:
        sessions = []
        for _ in range(count):
            session = await open_session(http, url, token)
            response = await stack.enter_async_context(
                http.stream("GET", url, headers={**headers(token, session), "Accept": "text/event-stream"})
            )
            assert response.status_code == 200
            sessions.append(session)
        yield sessions


async def open_session(http: httpx2.AsyncClient, url: str, token: str | None) -> str:
    opened = await http.post(url, content=json.dumps(INIT), headers=headers(token))
    assert opened.status_code == 200, opened.text
    session = opened.headers["mcp-session-id"]
    done = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert (await http.post(url, content=done, headers=headers(token, session))).status_code == 202
    return session


async def ping(http: httpx2.AsyncClient, url: str, token: str | None, session: str) -> int:
    body = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"})
    return (await http.post(url, content=body, headers=headers(token, session))).status_code


async def test_a_token_keeps_its_own_share_and_is_refused_only_when_all_are_busy(make_config):
    async with serving(make_config, **bearer({"max_connections_per_token": 3})) as url:
        port = port_of(url)
        await ready(url)
        mine = [await anyio.to_thread.run_sync(held_open, port, with_token(ALICE)) for _ in range(5)]
        bobs = await anyio.to_thread.run_sync(held_open, port, with_token(BOB))
        await until_async(lambda: still_open(mine) == 3, "the token's share")
        assert not closed_by_server(bobs)  # another token's connection is not touched
        for sock in [*mine, bobs]:
            sock.close()
        async with httpx2.AsyncClient(timeout=SAFETY) as http, busy(http, url, ALICE, 3):
            refused = await post(url, INIT, ALICE)
            assert refused.status_code == 503 and "server.http.max_connections_per_token" in refused.text
            assert (await post(url, INIT, BOB)).status_code == 200
        assert (await post(url, INIT, ALICE)).status_code == 200  # the streams ended: room again


@contextmanager
def streams(port: int, token: str, count: int) -> Iterator[None]:
    """Blocking twin of `busy`, for a server in another process."""
    url = f"http://127.0.0.1:{port}/mcp"
    with httpx2.Client(timeout=SAFETY) as http, ExitStack() as stack:
        for _ in range(count):
            opened = http.post(url, content=json.dumps(INIT), headers=headers(token))
            assert opened.status_code == 200, opened.text
            session = opened.headers["mcp-session-id"]
            done = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
            assert http.post(url, content=done, headers=headers(token, session)).status_code == 202
            get = http.stream("GET", url, headers={**headers(token, session), "Accept": "text/event-stream"})
            assert stack.enter_context(get).status_code == 200
        yield


@contextmanager
def trickling(port: int, count: int) -> Iterator[list[socket.socket]]:
    """`count` connections that each sent a whole request head announcing a 1,000-byte body, were told
    to go on (`100 Continue`: the server holds the connection busy, its handler reading the body), and
    then send the body a byte every half second (so no idle deadline closes them), until the block ends."""
    head = (
        b"PUT /api/threads/t/title HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Expect: 100-continue\r\nContent-Length: 1000\r\n\r\n"
    )
    socks = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=SAFETY)
        sock.sendall(head)
        told = b""
        while b"\r\n\r\n" not in told:
            told += sock.recv(4096) or b"(closed)\r\n\r\n"
        assert told.startswith(b"HTTP/1.1 100"), told
        sock.sendall(b"{")
        socks.append(sock)
    stop = threading.Event()

    def drip() -> None:
        while not stop.wait(0.5):
            for sock in socks:
                try:
                    sock.send(b" ")
                except OSError:
                    pass  # closed by the server for room

    dripper = threading.Thread(target=drip, daemon=True)
    dripper.start()
    try:
        yield socks
    finally:
        stop.set()
        dripper.join()
        for sock in socks:
            sock.close()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_500_trickling_bodies_keep_no_request_of_the_user_out(tmp_path):
    """On the default (loopback, no tokens, 500 connections): 500 clients each sending a request body a
    byte at a time held every slot busy, so the user's own requests were all refused 503. A body slower
    than `min_body_bytes_per_second` is closed for room like an idle connection."""
    with real_server(tmp_path, bearer=False) as (port, _):
        info = f"http://127.0.0.1:{port}/api/info"
        with httpx2.Client(timeout=SAFETY) as http:
            until(lambda: http.get(info).status_code == 200, "the memory opens")
        with trickling(port, 500) as attacker:
            time.sleep(BODY_GRACE_SECONDS)  # a body's rate is judged after its first second
            answers = []
            for _ in range(20):  # each on a new connection, as a hook or a client starting up makes one
                with httpx2.Client(timeout=SAFETY) as http:
                    answers.append(http.get(info).status_code)
            print(f"500 trickling bodies: the user's requests answered {answers.count(200)} of {len(answers)}")
            assert answers == [200] * 20
            # The first took a trickler's slot; each next one the slot its predecessor left.
            until(lambda: still_open(attacker) < 500, "a trickling body closed for room")


def test_when_every_connection_is_busy_a_new_one_gets_503_and_one_log_line(tmp_path):
    with real_server(tmp_path, max_connections=4) as (port, stderr):
        info = f"http://127.0.0.1:{port}/api/info"
        with httpx2.Client(timeout=SAFETY, headers={"Authorization": f"Bearer {ALICE}"}) as http:
            until(lambda: http.get(info).status_code == 200, "the memory opens")
        with streams(port, ALICE, 4), httpx2.Client(timeout=SAFETY) as other:
            statuses = [other.get(info).status_code for _ in range(20)]
        assert statuses == [503] * 20
        text = stderr.read_text()
    assert text.count("refused") == 1 and "(server.http.max_connections)" in text, text


# -- legacy sessions --------------------------------------------------------------------------------------


async def test_at_the_session_cap_the_least_recently_used_idle_session_ends(make_config):
    async with serving(make_config, http={"max_sessions": 2}) as url, httpx2.AsyncClient(timeout=SAFETY) as http:
        first, second = await open_session(http, url, None), await open_session(http, url, None)
        assert await ping(http, url, None, first) == 200  # now the second is the least recently used
        third = await open_session(http, url, None)  # before: 503 until one expired, 30 minutes on
        assert await ping(http, url, None, second) == 404  # ended: its client starts another
        assert await ping(http, url, None, first) == 200 and await ping(http, url, None, third) == 200
    async with serving(make_config, http={"max_sessions": 2}) as url, httpx2.AsyncClient(timeout=SAFETY) as http:
        async with busy(http, url, None, 2):  # none idle: the newcomer is refused, nothing ended
            refused = await post(url, INIT)
            assert refused.status_code == 503 and "Too many open sessions" in refused.text
            async with connect(url, None) as modern:  # the sessionless era opens no session
                await ok(modern, "append_messages", thread_id="t", messages=[note(1, "still served")])


async def test_one_token_ends_its_own_idle_sessions_not_anothers(make_config):
    async with serving(make_config, **bearer({"max_sessions": 10, "max_sessions_per_token": 3})) as url:
        async with httpx2.AsyncClient(timeout=SAFETY) as http:
            bobs = await open_session(http, url, BOB)
            mine = [await open_session(http, url, ALICE) for _ in range(3)]
            fourth = await open_session(http, url, ALICE)  # alice's oldest idle session makes room
            assert [await ping(http, url, ALICE, s) for s in mine] == [404, 200, 200]
            assert await ping(http, url, ALICE, fourth) == 200 and await ping(http, url, BOB, bobs) == 200
        async with httpx2.AsyncClient(timeout=SAFETY) as http:
            for session in [*mine[1:], fourth]:
                await http.delete(url, headers=headers(ALICE, session))
            async with busy(http, url, ALICE, 3):  # all three busy: refused, naming the share
                refused = await post(url, INIT, ALICE)
                assert refused.status_code == 503 and "max_sessions_per_token" in refused.text
                assert "token 'alice'" in refused.text
                assert (await post(url, INIT, BOB)).status_code == 200  # another tenant is not affected


async def test_an_address_without_a_token_ends_its_own_idle_sessions(make_config):
    """A public bind without auth (--insecure): sessions are shared out per client address."""
    async with serving(make_config, host="0.0.0.0", http={"max_sessions_per_address": 2}) as url:
        async with httpx2.AsyncClient(timeout=SAFETY) as neighbour:
            kept = await open_session(neighbour, url, None)
        transport = httpx2.AsyncHTTPTransport(local_address="127.0.0.5")
        async with httpx2.AsyncClient(timeout=SAFETY, transport=transport) as crowd:
            opened = [await open_session(crowd, url, None) for _ in range(5)]
            assert [await ping(crowd, url, None, s) for s in opened] == [404, 404, 404, 200, 200]
        async with httpx2.AsyncClient(timeout=SAFETY) as neighbour:
            assert await ping(neighbour, url, None, kept) == 200


# -- failed authentication, bodies ------------------------------------------------------------------------


async def test_failed_authentication_has_a_budget_across_all_addresses(make_config):
    limits = {"failed_auth_per_minute": 3, "failed_auth_total_per_minute": 6}  # a refill every 10 s at most
    async with serving(make_config, **bearer(limits)) as url:
        answers: list[int] = []
        for n in range(4):  # four addresses, three guesses each: none over its own budget
            transport = httpx2.AsyncHTTPTransport(local_address=f"127.0.0.{20 + n}")
            async with httpx2.AsyncClient(timeout=SAFETY, transport=transport) as guesser:
                for guess in range(3):
                    sent = {**ACCEPT, "Authorization": f"Bearer om_guess-{n}-{guess:020d}"}
                    answers.append((await guesser.post(url, content=json.dumps(INIT), headers=sent)).status_code)
        assert answers == [401] * 6 + [429] * 6, answers
        limited = await post(url, INIT, "om_one-more-guess-00000000000")
        assert limited.status_code == 429 and "came from all addresses together" in limited.text
        assert (await post(url, INIT, ALICE)).status_code == 200  # a valid token is never refused for it


@pytest.mark.parametrize("chunked", [False, True])
async def test_one_body_limit_on_every_route(make_config, chunked):
    """`/api/*` read a body of any size (a 300 MB PUT took the server from 260 to 538 MiB)."""
    async with serving(make_config, **bearer()) as url:
        base = url.removesuffix("/mcp")
        big = b'{"text": "' + b"x" * (5 * 1024 * 1024) + b'"}'

        async def pieces() -> AsyncIterator[bytes]:
            for start in range(0, len(big), 65536):
                yield big[start : start + 65536]

        async with httpx2.AsyncClient(timeout=SAFETY, headers={"Authorization": f"Bearer {ALICE}"}) as http:
            while (await http.get(f"{base}/api/info")).status_code == 503:
                await anyio.sleep(0.05)
            body = pieces() if chunked else big
            routes = [("PUT", "/api/threads/t/observations/x1"), ("POST", "/api/threads/t/restore")]
            for method, path in [*routes, ("PUT", "/api/threads/t/title")]:
                answer = await http.request(method, f"{base}{path}", content=body if not chunked else pieces())
                assert answer.status_code == 413 and "server.http.max_body_bytes" in answer.text, answer.text
            mcp = await http.post(url, content=pieces() if chunked else big, headers=ACCEPT)
            assert mcp.status_code == 413
            small = await http.put(f"{base}/api/threads/t/observations/x1", json={"text": "fine"})
            assert small.status_code == 404  # under the limit: the route answers (no such thread)


def test_docs_http_lists_every_limit_with_its_default():
    """docs/http.md's table of limits holds each numeric `[server.http]` option at its default."""
    from pathlib import Path

    from om_mcp.config import Config

    text = (Path(__file__).resolve().parents[1] / "docs" / "http.md").read_text()
    listed: dict[str, float] = {}
    for row in re.findall(r"^\| ((?:`[a-z_]+`(?:, )?)+) \| ([^|]+) \|", text, re.MULTILINE):
        names, values = [n.strip("`") for n in row[0].split(", ")], row[1].strip().split(", ")
        for name, value in zip(names, values, strict=True):
            number, _, unit = value.partition(" ")
            listed[name] = float(number) * (1024 * 1024 if unit == "MiB" else 1)
    http = Config().server.http
    numeric = {k: v for k, v in http.model_dump().items() if isinstance(v, int | float) and not isinstance(v, bool)}
    assert listed == {k: float(v) for k, v in numeric.items()}
