"""Crash safety of observational memory (the issue's property test and kill test).

(a) A seeded property test (plain `random`, no hypothesis) drives random
    interleavings against the engine on a temp-file database: appends of random
    sizes, get_context, direct buffer / activate / observe / reflect calls,
    scripted model failures and simulated crashes. A crash cancels an in-flight
    cycle at a random await point, stops the background worker, closes the
    Memory and opens a NEW Memory (a new lease owner) on the same file after the
    dead owner's leases expired.

    The tracing observer: the scripted Observer writes one line per message id
    ("m17") it finds in its transcript, the scripted Reflector keeps every id it
    finds in the log it rewrites. After every step the database must satisfy:
      * the cursor (om_cursors.seq) never decreases;
      * buffered chunks are ordered, do not overlap, start after the cursor,
        continue right after it with no message skipped, and each chunk's text
        names exactly its own messages;
      * the active log (om_groups of the record's current generation) names
        every message at or below the cursor exactly once and nothing above it.
    At the end (a final manual observe, nothing else running) every appended id
    appears exactly once in the active log plus the raw unobserved messages.

    A second test has two Memory instances (two owners) race `observe` on the
    same thread: they never both commit and no id is observed twice.

(b) A real-process test kills `python -m om_mcp serve` (kill -9) while its
    synchronous observation waits on the (fake, slow) model, restarts a server on
    the same file and checks that nothing was lost or half-written.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest

from om_mcp.config import load_config
from om_mcp.engine import Memory
from om_mcp.models import ModelError
from om_mcp.testing import ScriptedModel

pytestmark = pytest.mark.anyio

THREAD, RESOURCE = "t", "r"
ID_RE = re.compile(r"\bm(\d+)\b")
WORDS = (
    "the a we you they plan trip budget hotel flight museum dinner friday meeting report draft code test deploy"
    " garden recipe coffee train ticket paper review chapter piano lesson doctor appointment gym run weather"
    " sunny rain city river bridge market price order delivery"
).split()


# -- the tracing model ------------------------------------------------------------------


def _fenced(text: str, tag: str) -> str:
    start, end = text.rfind(f"<{tag}>"), text.rfind(f"</{tag}>")
    return text[start + len(tag) + 2 : end] if start >= 0 and end > start else ""


def _content(message: dict[str, Any]) -> str:
    content = message["content"]
    if isinstance(content, str):
        return content
    return "\n".join(item.get("text", "") for item in content if isinstance(item, dict))


def _lines(ids: list[str]) -> str:
    # A per-id hash keeps the log from looking like a repetition loop to the
    # degenerate-output check.
    return "\n".join(f"* 🔴 (10:00) saw {i} {hashlib.sha1(i.encode()).hexdigest()[:10]}" for i in ids)


class TracingModel:
    """Observer: one line per message id in its transcript. Reflector: keeps every id.
    `fail_next` makes the next calls raise a (non-transient) model error."""

    def __init__(self) -> None:
        self.fail_next = 0
        self.calls = 0

    def __call__(self, messages: list[dict[str, Any]], target: Any) -> str:
        self.calls += 1
        if self.fail_next > 0:
            self.fail_next -= 1
            raise ModelError("scripted failure")
        text = "\n".join(_content(m) for m in messages[1:])
        log = _fenced(text, "memory-log")
        if log:  # the Reflector
            ids = list(dict.fromkeys("m" + i for i in ID_RE.findall(log)))
            return f"<observations>\nDate: Jan 1, 2026\n{_lines(ids)}\n</observations>"
        conversation = _fenced(text, "conversation")
        ids = list(dict.fromkeys("m" + i for i in ID_RE.findall(conversation)))
        return (
            f"<observations>\nDate: Jan 1, 2026\n{_lines(ids)}\n</observations>\n"
            "<current-task>chatting</current-task>\n<suggested-response>reply</suggested-response>"
        )


# -- invariants, read with a separate connection ------------------------------------------


class Checker:
    def __init__(self, path: Path):
        self.path = path
        self.last_cursor = 0
        self.appended: list[str] = []

    def _conn(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=10)
        conn.row_factory = sqlite3.Row
        return conn

    def state(self) -> dict[str, Any]:
        conn = self._conn()
        try:
            conn.execute("BEGIN")  # one snapshot
            record = conn.execute("SELECT * FROM om_records WHERE key = ?", (f"thread:{THREAD}",)).fetchone()
            cursor = conn.execute(
                "SELECT seq FROM om_cursors WHERE record_key = ? AND thread_id = ?", (f"thread:{THREAD}", THREAD)
            ).fetchone()
            generation = record["generation"] if record else 0
            groups = conn.execute(
                "SELECT text, first_seq, last_seq FROM om_groups WHERE record_key = ? AND generation = ?"
                " ORDER BY position",
                (f"thread:{THREAD}", generation),
            ).fetchall()
            chunks = conn.execute(
                "SELECT first_seq, last_seq, message_count, text FROM om_chunks WHERE record_key = ?"
                " ORDER BY first_seq",
                (f"thread:{THREAD}",),
            ).fetchall()
            messages = conn.execute(
                "SELECT seq, id FROM messages WHERE thread_id = ? AND role != 'system' ORDER BY seq", (THREAD,)
            ).fetchall()
            leases = conn.execute("SELECT * FROM om_leases").fetchall()
            conn.rollback()
        finally:
            conn.close()
        return {
            "cursor": cursor["seq"] if cursor else 0,
            "groups": groups,
            "chunks": chunks,
            "messages": [(r["seq"], r["id"]) for r in messages],
            "leases": leases,
        }

    def check(self, where: str) -> dict[str, Any]:
        s = self.state()
        cursor = s["cursor"]
        assert cursor >= self.last_cursor, f"{where}: cursor went back {self.last_cursor} -> {cursor}"
        self.last_cursor = cursor
        stored = [mid for _, mid in s["messages"]]
        assert sorted(stored) == sorted(self.appended), f"{where}: stored messages differ from appended ones"
        # The active log names every message at or below the cursor exactly once.
        logged = Counter("m" + i for g in s["groups"] for i in ID_RE.findall(g["text"]))
        duplicates = {k: v for k, v in logged.items() if v > 1}
        assert not duplicates, f"{where}: observed twice: {duplicates}"
        observed = {mid for seq, mid in s["messages"] if seq <= cursor}
        assert set(logged) == observed, (
            f"{where}: log/cursor mismatch; lost={sorted(observed - set(logged))}"
            f" beyond-cursor={sorted(set(logged) - observed)}"
        )
        # Chunks: ordered, disjoint, contiguous from the cursor, naming their own messages.
        raw = [(seq, mid) for seq, mid in s["messages"] if seq > cursor]
        position = 0
        previous_end = cursor
        for chunk in s["chunks"]:
            assert chunk["first_seq"] > previous_end, (
                f"{where}: chunk {tuple(chunk)[:2]} overlaps or precedes the cursor"
            )
            assert chunk["first_seq"] <= chunk["last_seq"]
            ids = [mid for seq, mid in raw[position:] if seq <= chunk["last_seq"]]
            assert len(ids) == chunk["message_count"], f"{where}: chunk counts {chunk['message_count']}, covers {ids}"
            assert raw[position][0] == chunk["first_seq"], f"{where}: a message was skipped before a chunk"
            position += len(ids)
            previous_end = chunk["last_seq"]
            named = ["m" + i for i in ID_RE.findall(chunk["text"])]
            assert sorted(named) == sorted(ids), f"{where}: chunk text names {named}, covers {ids}"
        return s


# -- the property test ------------------------------------------------------------------------

MODEL_DELAY = 0.02
LEASE_TTL = 0.2


def _config(buffering: bool):
    env = {
        "OM_OBSERVATIONAL_MEMORY__OBSERVATION__MESSAGE_TOKENS": "600",
        "OM_OBSERVATIONAL_MEMORY__REFLECTION__OBSERVATION_TOKENS": "900",
        "OM_OBSERVATIONAL_MEMORY__SCOPE": "thread",
        "OM_OBSERVATIONAL_MEMORY__TURN_WAIT_SECONDS": "0.05",
        "OM_OBSERVATIONAL_MEMORY__LEASE_SECONDS": str(LEASE_TTL),
        "OM_MODEL": "default",
    }
    if not buffering:
        env["OM_OBSERVATIONAL_MEMORY__OBSERVATION__BUFFER_TOKENS"] = "false"
    return load_config(env=env)


async def _open(path: Path, buffering: bool, tracer: TracingModel) -> Memory:
    memory = await Memory.open(_config(buffering), db_path=str(path), client=ScriptedModel(tracer, delay=MODEL_DELAY))
    return memory


class Driver:
    def __init__(self, seed: int, path: Path):
        self.rng = random.Random(seed)
        self.path = path
        self.buffering = seed % 2 == 0
        self.tracer = TracingModel()
        self.checker = Checker(path)
        self.next_id = 0
        self.log: list[str] = []  # the ops so far, for failure messages

    def _message(self) -> dict[str, Any]:
        i = self.next_id
        self.next_id += 1
        words = " ".join(self.rng.choice(WORDS) for _ in range(self.rng.randint(3, 90)))
        self.checker.appended.append(f"m{i}")
        return {"id": f"m{i}", "role": "user" if i % 2 == 0 else "assistant", "content": f"m{i} {words}"}

    def _cycle(self, memory: Memory, name: str):
        om = memory.observation
        return {
            "buffer": lambda: om.buffer(THREAD, RESOURCE),
            "activate": lambda: om.activate(THREAD, RESOURCE),
            "observe": lambda: om.observe(THREAD, RESOURCE, "turn-sync"),
            "observe-manual": lambda: om.observe(THREAD, RESOURCE, "manual"),
            "reflect": lambda: om.reflect(THREAD, RESOURCE, "turn-sync"),
            "reflect-buffer": lambda: om.reflect(THREAD, RESOURCE, "async-buffer"),
            "context": lambda: memory.get_context(THREAD, RESOURCE),
        }[name]

    async def step(self, memory: Memory) -> bool:
        """One random operation; False when it was a crash (the Memory is dead)."""
        rng = self.rng
        op = rng.choices(["append", "context", "cycle", "fail", "crash", "pause"], weights=[8, 4, 4, 1, 1, 1])[0]
        if op == "append" or not self.checker.appended:
            batch = [self._message() for _ in range(rng.choice([1, 1, 2, 3]))]
            self.log.append(f"append {[m['id'] for m in batch]}")
            await memory.append_messages(THREAD, batch, resource_id=RESOURCE)
        elif op == "context":
            self.log.append("get_context")
            await memory.get_context(THREAD, RESOURCE)
        elif op == "cycle":
            name = rng.choice(["buffer", "activate", "observe", "observe-manual", "reflect", "reflect-buffer"])
            self.log.append(name)
            await self._cycle(memory, name)()
        elif op == "fail":
            self.tracer.fail_next = rng.randint(1, 3)
            self.log.append(f"fail next {self.tracer.fail_next}")
        elif op == "pause":  # let background cycles run
            self.log.append("pause")
            await anyio.sleep(rng.uniform(0, 3 * MODEL_DELAY))
        else:
            name = rng.choice(["buffer", "observe", "observe-manual", "reflect", "reflect-buffer", "context"])
            delay = rng.uniform(0, 2.5 * MODEL_DELAY)
            self.log.append(f"crash during {name} after {delay * 1000:.0f} ms")
            async with anyio.create_task_group() as group:
                group.start_soon(self._cycle(memory, name))
                await anyio.sleep(delay)
                group.cancel_scope.cancel()
            return False
        return True

    async def run(self, steps: int) -> None:
        done = 0
        while done < steps:
            memory = await _open(self.path, self.buffering, self.tracer)
            alive = True
            try:
                async with memory.running():
                    while alive and done < steps:
                        alive = await self.step(memory)
                        done += 1
                        self.checker.check(self._where())
                    # leaving the block cancels background cycles in flight: part of the crash
            finally:
                await memory.close()
            self.checker.check(self._where())
            if not alive:
                await anyio.sleep(LEASE_TTL * 1.5)  # the dead owner's leases expire
        await self.finish()

    async def finish(self) -> None:
        await anyio.sleep(LEASE_TTL * 1.5)
        memory = await _open(self.path, self.buffering, self.tracer)  # no running(): nothing in the background
        try:
            self.tracer.fail_next = 0
            outcome = await memory.observation.observe(THREAD, RESOURCE, "manual")
            assert outcome.ran or outcome.reason == "no unobserved messages", outcome
        finally:
            await memory.close()
        s = self.checker.check(self._where("final"))
        logged = Counter("m" + i for g in s["groups"] for i in ID_RE.findall(g["text"]))
        raw = [mid for seq, mid in s["messages"] if seq > s["cursor"]]
        assert not raw, f"a manual observe left {raw} raw"
        total = logged + Counter(raw)
        assert sorted(total) == sorted(self.checker.appended), "lost or unknown ids"
        assert all(v == 1 for v in total.values()), "an id appears twice"
        assert not s["chunks"], "a chunk was stranded"

    def _where(self, label: str | None = None) -> str:
        return f"{label or 'step ' + str(len(self.log))} (ops: {' | '.join(self.log[-8:])})"


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
async def test_random_interleavings_with_crashes(tmp_path: Path, seed: int) -> None:
    driver = Driver(seed, tmp_path / "om.db")
    await driver.run(steps=70)
    assert driver.tracer.calls > 0


def _expire_leases(path: Path) -> None:
    with sqlite3.connect(path, timeout=30) as conn:
        conn.execute("UPDATE om_leases SET expires_at = 0")


async def test_two_owners_racing_observe_never_both_commit(tmp_path: Path) -> None:
    path = tmp_path / "om.db"
    tracer = TracingModel()
    first = await _open(path, False, tracer)
    second = await _open(path, False, tracer)
    checker = Checker(path)
    try:
        assert first.observation.owner != second.observation.owner
        for round_ in range(4):
            batch = [
                {
                    "id": f"m{round_ * 10 + i}",
                    "role": "user" if i % 2 == 0 else "assistant",
                    "content": f"m{round_ * 10 + i} " + "plan the trip " * 20,
                }
                for i in range(6)
            ]
            checker.appended += [m["id"] for m in batch]
            await first.append_messages(THREAD, batch, resource_id=RESOURCE)
            outcomes: list = []

            async def run(memory: Memory) -> None:
                # The task group below awaits every run within this round (B023 is a false positive).
                outcomes.append(await memory.observation.observe(THREAD, RESOURCE, "manual"))  # noqa: B023

            if round_ % 2 == 0:
                async with anyio.create_task_group() as group:  # plain race: the lease decides
                    group.start_soon(run, first)
                    group.start_soon(run, second)
            else:
                # The first owner stalls (think SIGSTOP) past its lease: the second takes
                # over and commits; the first's late commit must be discarded.
                async with anyio.create_task_group() as group:
                    group.start_soon(run, first)
                    await anyio.sleep(MODEL_DELAY / 4)
                    # Simulates the lease running out. In a thread: blocking the event
                    # loop here would stall the other connection mid-transaction.
                    await anyio.to_thread.run_sync(_expire_leases, path)
                    group.start_soon(run, second)
            committed = [o for o in outcomes if o.ran]
            assert len(committed) == 1, outcomes
            loser = next(o for o in outcomes if not o.ran)
            assert loser.reason or "discarded" in (loser.error or ""), loser
            checker.check(f"round {round_}")
        s = checker.check("end")
        assert s["cursor"] == s["messages"][-1][0]
    finally:
        await first.close()
        await second.close()


# -- (b) kill -9 a real server mid-cycle -----------------------------------------------------

REPO = Path(__file__).resolve().parent.parent
LEASE_SECONDS = 3600  # a dead process's lease still holds when the next one starts, however loaded the machine


def _env(tmp_path: Path, port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OM_")}
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env.update(
        HOME=str(home),
        XDG_DATA_HOME=str(home),
        PYTHONUNBUFFERED="1",
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        LITELLM_OFFLINE_MODE="true",
        OM_OBSERVATIONAL_MEMORY__MODEL=json.dumps({"model": "openai/fake", "api_base": f"http://127.0.0.1:{port}/v1"}),
        OM_OBSERVATIONAL_MEMORY__OBSERVATION__MESSAGE_TOKENS="300",
        OM_OBSERVATIONAL_MEMORY__OBSERVATION__BUFFER_TOKENS="false",
        OM_OBSERVATIONAL_MEMORY__SCOPE="thread",
        OM_OBSERVATIONAL_MEMORY__LEASE_SECONDS=str(LEASE_SECONDS),
    )
    return env


class RpcServer:
    """`python -m om_mcp serve` over stdio, spoken to with raw JSON-RPC."""

    def __init__(self, db: Path, env: dict[str, str], stderr: Path):
        self._stderr = open(stderr, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "om_mcp", "serve", "--db", str(db)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env,
            cwd=REPO,
        )
        self._id = 0
        self._buffer = b""
        os.set_blocking(self.proc.stdout.fileno(), False)
        self.request(
            "initialize",
            {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "crash-test", "version": "0"}},
        )
        self.notify("notifications/initialized")

    def notify(self, method: str, params: dict | None = None) -> None:
        self._send({"jsonrpc": "2.0", "method": method, **({"params": params} if params else {})})

    def _send(self, message: dict) -> None:
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()

    def send_request(self, method: str, params: dict) -> int:
        self._id += 1
        self._send({"jsonrpc": "2.0", "id": self._id, "method": method, "params": params})
        return self._id

    def response(self, request_id: int) -> dict:
        """The answer to `request_id`, however long it takes (a hang meets the test's time limit)."""
        import selectors

        selector = selectors.DefaultSelector()
        selector.register(self.proc.stdout, selectors.EVENT_READ)
        while True:
            newline = self._buffer.find(b"\n")
            if newline >= 0:
                line, self._buffer = self._buffer[:newline], self._buffer[newline + 1 :]
                if line.strip():
                    message = json.loads(line)
                    if message.get("id") == request_id and ("result" in message or "error" in message):
                        assert "error" not in message, message
                        return message["result"]
                continue
            if selector.select():
                chunk = os.read(self.proc.stdout.fileno(), 1 << 16)
                assert chunk, "the server closed stdout"
                self._buffer += chunk

    def request(self, method: str, params: dict) -> dict:
        return self.response(self.send_request(method, params))

    def tool(self, name: str, **arguments: Any) -> dict:
        result = self.request("tools/call", {"name": name, "arguments": arguments})
        assert not result.get("isError"), result
        return json.loads(result["content"][0]["text"])

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self._stderr.close()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._stderr.close()


_FAKE_LLM = """
import itertools, sys, threading, signal
from om_mcp.testing.fake_server import FakeLLMServer, FakeReply, default_responder
seen = open(sys.argv[2], "a", buffering=1)
calls = itertools.count(1)
def responder(request):
    seen.write("request\\n")  # on arrival, before the delay
    first = next(calls) == 1
    return FakeReply(default_responder(request), delay_seconds=float(sys.argv[1]) if first else 0.0)
server = FakeLLMServer(responder).start()
print(f"fake LLM server listening on {server.base_url}", flush=True)
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
stop.wait()
server.close()
"""


def _start_fake_llm(delay: float, seen: Path, log: Path) -> tuple[subprocess.Popen, int]:
    """The fake OpenAI-compatible server as its own process; it writes one line to
    `seen` per chat request it receives, holds the first one `delay` seconds and answers
    the others at once."""
    proc = subprocess.Popen(
        [sys.executable, "-u", "-c", _FAKE_LLM, str(delay), str(seen)],
        stdout=subprocess.PIPE,
        stderr=open(log, "wb"),
        cwd=REPO,
    )
    line = proc.stdout.readline().decode()
    match = re.search(r":(\d+)/v1", line)
    assert match, f"fake LLM server did not start: {line!r}"
    return proc, int(match.group(1))


def _seen(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


@pytest.mark.timeout(300)  # two server starts and two litellm imports, on a loaded machine
@pytest.mark.slow
def test_kill_server_mid_cycle_and_restart(tmp_path: Path) -> None:
    db = tmp_path / "om.db"
    seen = tmp_path / "llm-requests.txt"
    # The first model call is held far longer than the test takes to kill the server while it waits; the
    # restarted server's calls are answered at once.
    llm, port = _start_fake_llm(LEASE_SECONDS, seen, tmp_path / "llm.log")
    try:
        env = _env(tmp_path, port)
        server = RpcServer(db, env, tmp_path / "server1.log")
        ids = []
        before = time.time()  # the lease is taken (and renewed) after this, by this machine's clock
        try:
            for i in range(12):
                batch = [
                    {
                        "id": f"m{i}",
                        "role": "user" if i % 2 == 0 else "assistant",
                        "content": f"[id:m{i}] m{i} " + "we planned the museum trip and the budget " * 8,
                    }
                ]
                ids.append(f"m{i}")
                server.tool("append_messages", thread_id=THREAD, resource_id=RESOURCE, messages=batch)
            # get_context over the threshold starts a sync observation and waits for it
            # (at most 10 s; the cycle goes on in the background after that). The first
            # model call of a process also imports litellm (seconds on a busy machine),
            # so wait for the request to reach the fake model, which holds it, and
            # kill the server then.
            pending = server.send_request(
                "tools/call", {"name": "get_context", "arguments": {"thread_id": THREAD, "resource_id": RESOURCE}}
            )
            deadline = time.monotonic() + 90
            lease = None
            while time.monotonic() < deadline:
                with sqlite3.connect(db, timeout=5) as conn:
                    lease = conn.execute("SELECT owner, expires_at FROM om_leases WHERE op = 'observe'").fetchone()
                if lease and _seen(seen) == 1:
                    break
                time.sleep(0.05)
            assert lease is not None, "no observe lease appeared"
            assert _seen(seen) == 1, "the model call never reached the fake server"
            server.kill()
            after = time.time()  # ... and before this
            del pending
        finally:
            if server.proc.poll() is None:
                server.kill()

        with sqlite3.connect(db, timeout=5) as conn:
            stored = [r[0] for r in conn.execute("SELECT id FROM messages ORDER BY seq")]
            cursor = conn.execute("SELECT seq FROM om_cursors").fetchall()
            groups = conn.execute("SELECT COUNT(*) FROM om_groups").fetchone()[0]
            owner, expires_at = conn.execute("SELECT owner, expires_at FROM om_leases WHERE op = 'observe'").fetchone()
        assert stored == ids, "appended messages were lost"
        assert all(seq == 0 for (seq,) in cursor) and groups == 0, "the killed process observed something"
        assert str(server.proc.pid) in owner
        # The lease is bounded: lease_seconds past its last renewal, which happened between
        # `before` and `after` (an order of events, however slow the machine).
        assert before + LEASE_SECONDS <= expires_at <= after + LEASE_SECONDS

        server = RpcServer(db, env, tmp_path / "server2.log")
        try:
            out = server.tool("observe", thread_id=THREAD, resource_id=RESOURCE)
            assert not out["ran"] and "another process" in (out["reason"] or ""), out  # the dead lease still holds
            # The lease outlives any slow restart; waiting it out would make the test slow:
            # this UPDATE stands for the passage of time, nothing else.
            with sqlite3.connect(db, timeout=5) as conn:
                conn.execute("UPDATE om_leases SET expires_at = 0 WHERE op = 'observe'")
            out = server.tool("observe", thread_id=THREAD, resource_id=RESOURCE)
            # The restarted server's worker may have retaken the expired work on its own first.
            assert out["ran"] or out.get("reason") == "no unobserved messages", out
            context = server.tool("get_context", thread_id=THREAD, resource_id=RESOURCE, include_status=True)
            assert not context.get("messages") and context["status"]["unobserved_tokens"] == 0
        finally:
            server.stop()
        with sqlite3.connect(db, timeout=5) as conn:
            texts = [r[0] for r in conn.execute("SELECT text FROM om_groups")]
            (cursor,) = conn.execute("SELECT seq FROM om_cursors").fetchone()
            last_seq = conn.execute("SELECT MAX(seq) FROM messages").fetchone()[0]
            ends = conn.execute("SELECT COUNT(*) FROM om_events WHERE type = 'data-om-observation-end'").fetchone()[0]
        assert len(texts) == ends >= 1, "each committed observation wrote one group"
        named = Counter(re.findall(r"observed message (m\d+)", " ".join(texts)))
        assert sorted(named) == sorted(ids) and set(named.values()) == {1}, named
        assert cursor == last_seq
    finally:
        llm.send_signal(signal.SIGTERM)
        try:
            llm.wait(10)
        except subprocess.TimeoutExpired:
            llm.kill()
