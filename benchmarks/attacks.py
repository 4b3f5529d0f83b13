"""Attacks on a real server, hooks and commands, one row per class: what each one got.

Each row is a function registered in ATTACKS (one line each) that starts what it attacks
(`python -m om_mcp serve`, the hook) in a throwaway folder and prints its figures. No
assertions. Run them all, or some by name:

    .venv/bin/python benchmarks/attacks.py
    .venv/bin/python benchmarks/attacks.py idle_connections abandoned_sessions

`cross_tenant`: three bearer tokens (alice: resource "alice"; bob: "bob" and "/home/bob"; admin:
"*"), observation off. Bob stores threads whose ids need encoding in a URI ("tb", "/home/bob/proj",
"bob%2Fx", "C:\\bob", "b ü?#"), each holding a secret, a title and working memory. Then alice's
token tries, for each of bob's ids:

- every tool, with bob's thread id, with bob's resource (and "*", a case or space variant of it),
  and the claims (append, working memory) on bob's ids;
- every resource URI template, with the id encoded as documented, raw, double-encoded, with
  lower-case hex, and through `..` or `*`;
- the status page's JSON API (GET, DELETE, PUT, POST) with the id path-encoded.

An attempt *leaks* when an answer holds one of bob's secrets, titles or notes, or when bob's data
differs afterwards (read back by the admin token); it *reveals* when an error about bob's thread
differs from the error about an id of the same shape that nobody holds (the documented exception: creating under a held
id is refused in one sentence naming no owner). Then stored XSS: payloads stored by the admin as
thread and resource ids, titles, messages, working memory and metadata, and the status page opened on
each thread in headless Chromium (skipped without one): did any run, or become markup.

The other rows: the model's failure text quoting bob in alice's answers (`model_health_excerpt`),
alice's legacy subscriptions to bob's thread (`legacy_subscriptions`), legitimate requests answered
while one client holds 505 idle connections (`idle_connections`), sessions a newcomer gets while
abandoned ones fill the pool (`abandoned_sessions`), token guesses spread over 40 loopback
addresses (`auth_guessing`), a 300 MB body to the status page's API and the server's memory
(`huge_body`), and a folder with a crafted `.git` file run through the hook (`crafted_gitdir`).
`slow_bodies`: on the default (loopback, no tokens), 500 connections each sending a request body a byte
at a time, then the user's own requests (answered, of 50). `tenant_matrix`: bob's token with alice's
values through every tool, resource, prompt and status-page route the server lists (generated;
benchmarks/attacks_tenancy.py): reads, changes and answers that differ from nobody's.
`forget` (forgotten text back after ingest, the hook and import; benchmarks/attacks_forget.py) and
`spend` (recorded spend over a cap with 3 processes; benchmarks/attacks_spend.py), `meter` (requests a model
received against requests metered, every way the engine asks again, and the looping-answer attack under a
cap; benchmarks/attacks_meter.py).
`random_keys` (random keys kept under each documented assignment shape) and `injection` (injection shapes
that pass the neutralising step), benchmarks/attacks_text.py.
`secrets`: one secret of each class (cloud, VCS, chat, payment and AI keys, private keys, JWTs,
passwords in URLs, connection strings, env-file lines, command-line flags, an unclosed `<private>`)
planted on every surface (messages, tool arguments and results under any key, metadata, titles,
working memory, the host hook, `om-mcp ingest`, an import of an export made with privacy off, and what
the Observer writes after decoding one the user pasted in base64), each surface on a database of its
own, then looked for in the bytes of the SQLite file and its -wal (goal: none stored).
The server runs from a folder outside the checkout, so `PYTHONPATH=<another checkout>` measures
that code (the figures before a change).
"""

from __future__ import annotations

import inspect
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import attacks_forget  # benchmarks/ is the script's folder, first on sys.path
import attacks_meter
import attacks_spend
import attacks_tenancy
import attacks_text
import httpx2
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp_types import ResourceUpdatedNotification

from om_mcp.config import hash_token
from om_mcp.testing.fake_server import FakeLLMServer, default_responder, request_text
from om_mcp.testing.headless import find_chromium, run_chromium
from om_mcp.testing.secrets import ONE_LINE, PLANTS
from om_mcp.testing.transcripts import ClaudeTranscript

REPO = Path(__file__).resolve().parent.parent
ALICE, BOB, ADMIN = "om_alice-attack-0123456789abcdef", "om_bob-attack-0123456789abcdef", "om_admin-attack-0123456789ab"
TOKENS = [
    {"name": "alice", "hash": hash_token(ALICE), "resources": ["alice"]},
    {"name": "bob", "hash": hash_token(BOB), "resources": ["bob", "/home/bob"]},
    {"name": "admin", "hash": hash_token(ADMIN), "resources": ["*"]},
]
BOB_THREADS = {"tb": "bob", "/home/bob/proj": "/home/bob", "bob%2Fx": "bob", "C:\\bob": "bob", "b ü?#": "bob"}
BOB_RESOURCES = ["bob", "/home/bob"]
NOBODY = "zz"  # prefixed to one of bob's ids: an id of the same shape that nobody holds
THREAD_VIEWS = ["messages", "observations", "observations/history", "events", "status", "working-memory"]
RESOURCE_VIEWS = ["threads", "working-memory", "observations", "observations/history"]


def secret(i: int) -> str:
    return f"BOBSECRET{i}"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@asynccontextmanager
async def connect(url: str, token: str) -> AsyncIterator[Client]:
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            yield client


def encodings(value: str) -> dict[str, str]:
    """The id as docs/tools.md encodes it, and the spellings an attacker would try instead."""
    right = quote(value, safe="")
    return {
        "documented": right,
        "raw": value,
        "double": quote(right, safe=""),
        "lower-hex": re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), right),
        "path-only": quote(value, safe="/"),
    }


class Tally:
    def __init__(self, secrets: list[str]) -> None:
        self.secrets = secrets
        self.by_surface: Counter = Counter()
        self.leaks: list[str] = []
        self.reveals: list[str] = []
        self.refused: Counter = Counter()

    def answer(self, surface: str, what: str, text: str, refused: bool) -> None:
        self.by_surface[surface] += 1
        if refused:
            self.refused[surface] += 1
        if any(s in text for s in self.secrets):
            self.leaks.append(f"{surface}: {what}: {text[:160]}")

    def compare(self, surface: str, what: str, about_bob: str, about_nobody: str) -> None:
        if about_bob != about_nobody.replace(NOBODY, ""):
            self.reveals.append(f"{surface}: {what}: {about_bob[:120]!r} vs {about_nobody[:120]!r}")


async def tool(client: Client, name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
    try:
        result = await client.call_tool(name, arguments)
    except MCPError as error:
        return str(error), True
    text = result.content[0].text if result.content else ""
    return text, bool(result.is_error)


async def read(client: Client, uri: str) -> tuple[str, bool]:
    try:
        result = await client.read_resource(uri)
    except MCPError as error:
        return str(error), True
    return "".join(getattr(c, "text", "") for c in result.contents), False


def note(i: int, text: str) -> dict[str, str]:
    return {"id": f"m{i}", "role": "user", "content": text}


async def seed(url: str) -> None:
    async with connect(url, BOB) as bob:
        for i, (thread, resource) in enumerate(BOB_THREADS.items()):
            messages = [note(1, f"the launch plan is {secret(i)}"), note(2, f"and the code word is {secret(i)}")]
            await tool(bob, "append_messages", {"thread_id": thread, "resource_id": resource, "messages": messages})
            await tool(bob, "update_thread", {"thread_id": thread, "title": f"title {secret(i)}"})
            await tool(bob, "update_working_memory", {"thread_id": thread, "memory": f"# notes\n- {secret(i)}"})
    async with connect(url, ALICE) as alice:
        await tool(alice, "append_messages", {"thread_id": "ta", "messages": [note(1, "alice's own note")]})


def tool_attempts(thread: str, resource: str) -> list[tuple[str, dict[str, Any]]]:
    """(tool, arguments) that alice tries against one of bob's thread ids."""
    on = {"thread_id": thread}
    attempts: list[tuple[str, dict[str, Any]]] = [
        ("get_context", on),
        ("recall", on),
        ("recall", {**on, "mode": "search", "query": "launch plan"}),
        ("recall", {**on, "mode": "threads"}),
        ("recall", {"thread_id": "ta", "target_thread_id": thread}),
        ("recall", {"thread_id": "ta", "mode": "search", "query": "launch", "target_thread_id": thread}),
        ("get_working_memory", on),
        ("update_thread", {**on, "title": "alice was here"}),
        ("update_thread", {**on, "observation_id": "x1", "text": "alice was here"}),
        ("delete_thread", {**on, "confirm": True}),
        ("delete_thread", {**on, "message_id": "m1", "confirm": True}),
        ("delete_thread", {**on, "match": "launch", "confirm": True}),
        ("observe", on),
        ("reflect", on),
        # claims: alice writing under bob's id
        ("append_messages", {**on, "messages": [note(9, "alice's text")]}),
        ("update_working_memory", {**on, "memory": "# alice overwrote this"}),
    ]
    for other in (resource, "*", resource.upper(), f" {resource}"):
        attempts += [
            ("get_context", {"thread_id": "ta", "resource_id": other}),
            ("recall", {"thread_id": "ta", "mode": "search", "query": "launch", "resource_id": other}),
            ("recall", {"thread_id": "ta", "mode": "threads", "resource_id": other}),
            ("get_working_memory", {"thread_id": "ta", "resource_id": other}),
            ("update_working_memory", {"thread_id": "ta", "resource_id": other, "memory": "# alice"}),
            ("append_messages", {"thread_id": "ta-new", "resource_id": other, "messages": [note(9, "x")]}),
            ("observe", {"thread_id": "ta", "resource_id": other}),
        ]
    return attempts


def same_ids(arguments: dict[str, Any], thread: str) -> dict[str, Any]:
    return {k: (NOBODY + thread if v == thread else v) for k, v in arguments.items()}


async def attack_tools(url: str, tally: Tally) -> None:
    async with connect(url, ALICE) as alice:
        for thread, resource in BOB_THREADS.items():
            for name, arguments in tool_attempts(thread, resource):
                text, refused = await tool(alice, name, arguments)
                tally.answer("tools", f"{name} {arguments}", text, refused)
                if thread in arguments.values() and name not in ("append_messages", "update_working_memory"):
                    # bob's id must answer as an id nobody holds does (the claims say "in use", by design)
                    nobody, _ = await tool(alice, name, same_ids(arguments, thread))
                    tally.compare("tools", f"{name} {arguments}", text, nobody)


def resource_uris(thread: str) -> list[tuple[str, str, str]]:
    """(what, uri, the same uri for an id nobody holds) for every thread view and spelling."""
    uris = []
    for how, spelled in encodings(thread).items():
        nobody = encodings(NOBODY + thread)[how]
        for view in THREAD_VIEWS:
            uris.append((f"{view} {how}", f"om://threads/{spelled}/{view}", f"om://threads/{nobody}/{view}"))
    for view in THREAD_VIEWS:  # through alice's own thread
        uris.append((f"{view} via ..", f"om://threads/ta/../{quote(thread, safe='')}/{view}", ""))
    return uris


async def attack_resources(url: str, tally: Tally) -> None:
    async with connect(url, ALICE) as alice:
        for thread in BOB_THREADS:
            for what, uri, nobody_uri in resource_uris(thread):
                text, refused = await read(alice, uri)
                tally.answer("resources", uri, text, refused)
                if nobody_uri:
                    nobody, _ = await read(alice, nobody_uri)
                    tally.compare("resources", f"{what} {thread!r}", text, nobody)
        for resource in [*BOB_RESOURCES, "*", "%2A", "alice%2F..%2Fbob", "BOB"]:
            for spelled in {*encodings(resource).values(), resource}:
                for view in RESOURCE_VIEWS:
                    uri = f"om://resources/{spelled}/{view}"
                    text, refused = await read(alice, uri)
                    tally.answer("resources", uri, text, refused)
        listed, _ = await read(alice, "om://resources/alice/threads")
        tally.answer("resources", "alice's own thread list", listed, False)


async def attack_page(url: str, tally: Tally) -> None:
    base = url.removesuffix("/mcp")
    headers = {"Authorization": f"Bearer {ALICE}"}
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
        while (await http.get(f"{base}/api/info")).status_code == 503:
            await anyio.sleep(0.1)

        async def hit(method: str, path: str, body: Any = None) -> tuple[str, bool, int]:
            answer = await http.request(method, f"{base}{path}", json=body)
            return answer.text, answer.status_code >= 400, answer.status_code

        for thread in BOB_THREADS:
            for how in ("documented", "path-only", "double"):
                spelled, nobody = encodings(thread)[how], encodings(NOBODY + thread)[how]
                for method, tail, body in [
                    ("GET", "", None),
                    ("GET", "/events", None),
                    ("GET", "/series", None),
                    ("PUT", "/observations/x1", {"text": "alice"}),
                    ("DELETE", "/observations/x1", None),
                    ("POST", "/restore", {"generation": 0}),
                    ("DELETE", "", None),
                ]:
                    text, refused, status = await hit(method, f"/api/threads/{spelled}{tail}", body)
                    tally.answer("status page", f"{method} {spelled}{tail} -> {status}", text, refused)
                    if method == "GET":
                        other, _, other_status = await hit(method, f"/api/threads/{nobody}{tail}", body)
                        tally.compare(
                            "status page",
                            f"{method} {how}{tail} {thread!r}",
                            f"{status} {text}",
                            f"{other_status} {other}",
                        )
        for resource in [*BOB_RESOURCES, "*"]:
            for spelled in {quote(resource, safe=""), quote(resource, safe="/")}:
                text, refused, status = await hit("GET", f"/api/resources/{spelled}/threads")
                tally.answer("status page", f"GET resources/{spelled}/threads -> {status}", text, refused)
        text, refused, status = await hit("GET", "/api/resources")
        tally.answer("status page", "GET /api/resources", text, refused)
        text, refused, status = await hit("GET", "/api/info")
        tally.answer("status page", "GET /api/info", text, refused)


async def bobs_data(url: str) -> list[Any]:
    """Everything of bob's, as the admin reads it: compared before and after the attempts."""
    out = []
    async with connect(url, ADMIN) as admin:
        for thread, resource in BOB_THREADS.items():
            context, _ = await tool(admin, "get_context", {"thread_id": thread})
            memory, _ = await tool(admin, "get_working_memory", {"thread_id": thread})
            threads, _ = await tool(admin, "recall", {"thread_id": thread, "mode": "threads", "resource_id": resource})
            out.append((thread, json.loads(context).get("messages"), memory, threads))
    return out


async def attack(url: str) -> None:
    await seed(url)
    before = await bobs_data(url)
    tally = Tally([secret(i) for i in range(len(BOB_THREADS))])
    surfaces: list[Callable[[str, Tally], Any]] = [attack_tools, attack_resources, attack_page]
    for surface in surfaces:
        await surface(url, tally)
    after = await bobs_data(url)
    changed = [b[0] for b, a in zip(before, after) if b != a]
    print(
        f"\n{sum(tally.by_surface.values())} cross-tenant attempts by alice's token on bob's {len(BOB_THREADS)}"
        f" threads and {len(BOB_RESOURCES)} resources\n"
    )
    header = f"{'surface':<14} {'attempts':>8} {'refused':>8} {'leaked':>7}"
    print(header)
    print("-" * len(header))
    for surface, count in tally.by_surface.items():
        leaked = sum(1 for line in tally.leaks if line.startswith(surface))
        print(f"{surface:<14} {count:>8} {tally.refused[surface]:>8} {leaked:>7}")
    print(f"\nbob's threads changed afterwards (admin's read): {len(changed)} {changed or ''}")
    reveals = Counter(line.split(":")[0] for line in tally.reveals)
    print(
        "answers about bob's ids that differ from those about an id of the same shape nobody holds:"
        f" {len(tally.reveals)} ({', '.join(f'{k} {v}' for k, v in reveals.items()) or 'none'})"
    )
    for line in tally.leaks:
        print("  leaked:", line)
    shown: Counter = Counter()
    for line in tally.reveals:
        surface = line.split(":")[0]
        shown[surface] += 1
        if shown[surface] <= 3:
            print("  differs:", line[:230])


# Stored XSS: each payload, if it ever ran or became markup, adds an element with id="pwn" or retitles the page.
PAYLOADS = [
    '<img id="pwn" src="x" onerror="document.title=\'PWNED\'">',
    "<script id=\"pwn\">document.title='PWNED'</script>",
    '"><svg id="pwn" onload="document.title=\'PWNED\'">',
    '</textarea></pre><b id="pwn">x</b>',
    '<a id="pwn" href="javascript:document.title=\'PWNED\'">x</a>',
    "javascript:document.title='PWNED'",
]


async def store_payloads(url: str) -> list[str]:
    """The admin stores every payload as a thread id, a resource id, a title, a message, working
    memory and metadata; returns the threads whose page is then opened."""
    opened = []
    async with connect(url, ADMIN) as admin:
        for i, payload in enumerate(PAYLOADS):
            thread = f"xss-{i}"
            await tool(
                admin,
                "append_messages",
                {
                    "thread_id": thread,
                    "resource_id": payload,
                    "messages": [note(1, payload), note(2, f"**{payload}**")],
                },
            )
            await tool(admin, "update_thread", {"thread_id": thread, "title": payload, "metadata": {payload: payload}})
            await tool(admin, "update_working_memory", {"thread_id": thread, "memory": f"# {payload}\n- {payload}"})
            await tool(admin, "append_messages", {"thread_id": payload, "messages": [note(1, payload)]})
            opened += [thread, payload]
    return opened


def xss(url: str) -> None:
    binary = find_chromium()
    if binary is None:
        print("\nstored XSS: skipped, no Chromium (apt-get install chromium)")
        return
    threads = anyio.run(store_payloads, url)
    base = url.removesuffix("/mcp")
    ran = markup = 0
    for thread in threads:
        dom = run_chromium(f"{base}/ui#token={ADMIN}&thread={quote(thread, safe='')}", binary=binary, budget_ms=5000)
        ran += "PWNED" in dom.split("</title>")[0]
        markup += len(re.findall(r'<(?:img|script|svg|b|a) id="pwn"', dom))  # as text it is &lt;img id="pwn"
        if thread == threads[0]:
            shown = thread in dom or "&lt;img" in dom
    print(
        f"\nstored XSS: {len(PAYLOADS)} payloads stored as thread ids, resource ids, titles, messages, working memory"
        f" and metadata; the status page opened on {len(threads)} threads (admin token, Chromium):"
        f" {ran} ran, {markup} became markup (the payload shown as text: {'yes' if shown else 'no'})"
    )


# -- the server each row attacks ---------------------------------------------------------------------------


def environment(home: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OM_") and not k.endswith("_API_KEY")}
    env.update(HOME=home, XDG_DATA_HOME=str(Path(home) / "data"), LITELLM_LOCAL_MODEL_COST_MAP="True", **extra)
    return env


@contextmanager
def server(tokens: list[dict] | None = TOKENS, **settings: str) -> Iterator[tuple[str, int]]:
    """`om-mcp serve --transport http` on a free port, observation off unless `settings` say;
    yields (its MCP URL, its pid). It runs from a throwaway folder: PYTHONPATH decides the code."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="om-attacks-") as tmp:
        env = environment(tmp, **{"OM_OBSERVATIONAL_MEMORY": "false", **settings})
        if tokens:
            env["OM_SERVER__AUTH__TOKENS"] = json.dumps(tokens)
        command = [sys.executable, "-m", "om_mcp", "serve", "--transport", "http", "--port", str(port)]
        process = subprocess.Popen(
            [*command, "--db", str(Path(tmp) / "m.db")],
            cwd=tmp,
            env=env,
            stdin=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            url = f"http://127.0.0.1:{port}/mcp"
            deadline = time.monotonic() + 120
            headers = {"Authorization": f"Bearer {ADMIN}"} if tokens else {}
            while True:  # until the memory is open (the status page answers 503 before)
                try:
                    if httpx2.get(url.replace("/mcp", "/api/info"), headers=headers, timeout=5).status_code == 200:
                        break
                except httpx2.HTTPError:
                    pass
                if time.monotonic() > deadline or process.poll() is not None:
                    raise SystemExit("the server did not start")
                time.sleep(0.1)
            yield url, process.pid
        finally:
            process.terminate()
            process.wait(timeout=30)


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/")[0])


# -- rows --------------------------------------------------------------------------------------------------


def cross_tenant() -> None:
    """Every tool, resource URI spelling and status-page route alice's token can try on bob's; stored XSS."""
    with server(OM_SERVER__HTTP__RATE_LIMIT_PER_MINUTE="0") as (url, _):
        anyio.run(attack, url)
        xss(url)


SECRET = "BOBSECRET-4471"


def refuses_bob(request: dict[str, Any]) -> str:
    """An Observer that refuses bob's conversation, quoting it, and observes anyone else's."""
    if SECRET in request_text(request):
        return f"I can't help with that: the user asked me to keep the launch code {SECRET} for the payroll move."
    return default_responder(request)


def model_health_excerpt() -> None:
    """The model refuses bob's conversation three times (quoting it) and is paused; then alice looks."""
    with FakeLLMServer(refuses_bob) as fake:
        om = {
            "model": {"model": "openai/fake", "api_base": fake.base_url},
            "scope": "thread",
            "observation": {"message_tokens": 5000},
            "call_policy": {"timeout_seconds": 10, "total_budget_seconds": 20},
        }
        with server(OM_OBSERVATIONAL_MEMORY=json.dumps(om), OPENAI_API_KEY="sk-fake") as (url, _):
            surfaces, admin_sees = anyio.run(health_surfaces, url)
    quoted = [name for name, text in surfaces.items() if SECRET in text]
    print(
        f"\nmodel-health excerpt: bob's words in alice's answers on {len(quoted)} of {len(surfaces)} surfaces"
        f" ({', '.join(quoted) or 'none'}); the admin token sees them: {'yes' if admin_sees else 'no'}"
    )


async def health_surfaces(url: str) -> tuple[dict[str, str], bool]:
    async with connect(url, BOB) as bob:
        secret = [note(1, f"the launch code is {SECRET}")]
        await tool(bob, "append_messages", {"thread_id": "tb", "resource_id": "bob", "messages": secret})
        for _ in range(3):
            await tool(bob, "observe", {"thread_id": "tb"})
    surfaces: dict[str, str] = {}
    async with connect(url, ALICE) as alice:
        appended = {"thread_id": "ta", "messages": [note(1, "alice's note")], "include_status": True}
        surfaces["append_messages(include_status)"], _ = await tool(alice, "append_messages", appended)
        context = {"thread_id": "ta", "include_status": True}
        surfaces["get_context(include_status)"], _ = await tool(alice, "get_context", context)
        surfaces["status resource"], _ = await read(alice, "om://threads/ta/status")
        surfaces["events resource"], _ = await read(alice, "om://threads/ta/events")
    base = url.removesuffix("/mcp")
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {ALICE}"}, timeout=60) as http:
        for path in ("/api/info", "/api/threads/ta"):
            surfaces[f"GET {path}"] = (await http.get(f"{base}{path}")).text
    async with connect(url, ADMIN) as admin:
        operator, _ = await read(admin, "om://threads/ta/status")
    return surfaces, SECRET in operator


class Heard:
    def __init__(self) -> None:
        self.uris: list[str] = []

    async def handler(self, message: Any) -> None:
        if isinstance(message, ResourceUpdatedNotification):
            self.uris.append(str(message.params.uri))


def legacy_subscriptions() -> None:
    """alice's legacy session subscribes to bob's thread and resource, then bob writes."""
    with server() as (url, _):
        accepted, heard = anyio.run(subscribe_to_bob, url)
    print(
        f"\nlegacy resources/subscribe by alice to bob's {len(BOB_URIS)} URIs: {accepted} accepted;"
        f" updates about bob's thread she then heard: {heard}"
    )


BOB_URIS = ["om://threads/tb/status", "om://threads/tb/messages", "om://resources/bob/threads"]


async def subscribe_to_bob(url: str) -> tuple[int, int]:
    async with connect(url, BOB) as bob:
        plan = {"thread_id": "tb", "resource_id": "bob", "messages": [note(1, "bob's plan")]}
        await tool(bob, "append_messages", plan)
    heard = Heard()
    accepted = 0
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {ALICE}"}, timeout=60) as http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, mode="legacy", message_handler=heard.handler) as alice:
            await tool(alice, "append_messages", {"thread_id": "ta", "messages": [note(1, "alice's note")]})
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                for uri in [*BOB_URIS, "om://threads/ta/status"]:
                    try:
                        await alice.subscribe_resource(uri)
                        accepted += uri in BOB_URIS
                    except MCPError:
                        pass
            async with connect(url, BOB) as bob:
                for i in range(2, 7):
                    await tool(bob, "append_messages", {"thread_id": "tb", "messages": [note(i, "bob again")]})
            await tool(alice, "append_messages", {"thread_id": "ta", "messages": [note(2, "mine")]})
            with anyio.move_on_after(10):  # alice's own update comes after bob's
                while "om://threads/ta/status" not in heard.uris:
                    await anyio.sleep(0.05)
    return accepted, sum(1 for uri in heard.uris if uri in BOB_URIS)


UI = b"GET /ui HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


def held_open(port: int, request: bytes = UI) -> socket.socket:
    """A connection that sent one request, read its answer, and stays open (keep-alive)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    sock.sendall(request)
    answer = b""
    while b"\r\n\r\n" not in answer:
        answer += sock.recv(65536)
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.lower().split(b"\r\n")
    length = next((int(line.split(b":")[1]) for line in lines if line.startswith(b"content-length")), 0)
    while len(body) < length:
        body += sock.recv(65536)
    return sock


def still_open(socks: list[socket.socket]) -> int:
    count = 0
    for sock in socks:
        sock.setblocking(False)
        try:
            count += sock.recv(1) != b""
        except BlockingIOError:
            count += 1
        except OSError:
            pass
    return count


def idle_connections(count: int = 505, requests: int = 50) -> None:
    """One client without a token opens `count` connections, one `GET /ui` each, and holds them idle."""
    results = []
    for label, tokens in (("bearer auth", TOKENS), ("no auth", None)):
        with server(tokens) as (url, _):
            port = port_of(url)
            attacker = [held_open(port) for _ in range(count)]
            headers = {"Authorization": f"Bearer {ALICE}"} if tokens else {}
            answers: Counter = Counter()
            for _ in range(requests):  # each on a new connection, as a client starting up makes one
                try:
                    with httpx2.Client(timeout=60, headers=headers) as http:
                        answers[http.get(url.replace("/mcp", "/api/info")).status_code] += 1
                except httpx2.HTTPError as error:
                    answers[type(error).__name__] += 1
            time.sleep(1)  # the closes the server made reach these sockets (a figure, not a test)
            kept = still_open(attacker)
            for sock in attacker:
                sock.close()
        other = {k: v for k, v in answers.items() if k != 200} or "none"
        results.append(f"{label} {answers[200]}/{requests} (other: {other}; the attacker keeps {kept} of {count} open)")
    print(f"\nlegitimate requests answered while one client holds {count} idle connections: " + "; ".join(results))


def trickling(port: int) -> socket.socket:
    """A connection that announced a 1,000-byte body, was told to go on (the server holds it busy),
    and has sent one byte of it."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    sock.sendall(
        b"PUT /api/threads/t/title HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Expect: 100-continue\r\nContent-Length: 1000\r\n\r\n"
    )
    told = b""
    while b"\r\n\r\n" not in told:
        told += sock.recv(4096) or b"\r\n\r\n"
    sock.sendall(b"{")
    return sock


def slow_bodies(count: int = 500, requests: int = 50) -> None:
    """`count` clients send a request body a byte every half second; then the user's own requests."""
    import threading

    with server(None) as (url, _):
        attacker = [trickling(port_of(url)) for _ in range(count)]
        stop = threading.Event()

        def drip() -> None:
            while not stop.wait(0.5):
                for sock in attacker:
                    try:
                        sock.send(b" ")
                    except OSError:
                        pass

        dripper = threading.Thread(target=drip, daemon=True)
        dripper.start()
        time.sleep(1.5)  # past the first second of each body, when its rate is judged
        answers: Counter = Counter()
        for _ in range(requests):  # each on a new connection, as a hook or a client starting up makes one
            try:
                with httpx2.Client(timeout=60) as http:
                    answers[http.get(url.replace("/mcp", "/api/info")).status_code] += 1
            except httpx2.HTTPError as error:
                answers[type(error).__name__] += 1
        stop.set()
        dripper.join()
        kept = still_open(attacker)
        for sock in attacker:
            sock.close()
    other = {k: v for k, v in answers.items() if k != 200} or "none"
    print(
        f"\nthe user's requests answered while {count} clients trickle request bodies (loopback, no auth):"
        f" {answers[200]}/{requests} (other: {other}; {count - kept} trickling connections closed for room)"
    )


INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def open_session(http: httpx2.Client, url: str, token: str | None) -> int:
    headers = {**ACCEPT, **({"Authorization": f"Bearer {token}"} if token else {})}
    opened = http.post(url, content=json.dumps(INIT), headers=headers)
    if opened.status_code == 200:
        done = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
        session = {"Mcp-Session-Id": opened.headers["mcp-session-id"], "Mcp-Protocol-Version": "2025-11-25"}
        http.post(url, content=done, headers={**headers, **session})
    return opened.status_code


def abandoned_sessions(abandoned: int = 150, wanted: int = 10) -> None:
    """A client opens `abandoned` legacy sessions and leaves them; then another wants `wanted` of its own."""
    results = []
    for label, tokens, attacker, newcomer in (("no auth", None, None, None), ("bearer auth", TOKENS, BOB, ALICE)):
        with server(tokens, OM_SERVER__HTTP__RATE_LIMIT_PER_MINUTE="0") as (url, _), httpx2.Client(timeout=60) as http:
            for _ in range(abandoned):
                open_session(http, url, attacker)
            got = Counter(open_session(http, url, newcomer) for _ in range(wanted))
        results.append(f"{label} {got[200]}/{wanted}")
    print(
        f"\nnew legacy sessions a client gets while {abandoned} abandoned ones hold the pool of 100 (default 30 min"
        f" idle end): {'; '.join(results)}"
    )


def auth_guessing(addresses: int = 40, each: int = 30) -> None:
    """`each` token guesses from each of `addresses` loopback addresses (127.0.0.2 on)."""
    with server() as (url, _):
        answers: Counter = Counter()
        for n in range(addresses):
            transport = httpx2.HTTPTransport(local_address=f"127.0.0.{2 + n}")
            with httpx2.Client(timeout=60, transport=transport) as http:
                for guess in range(each):
                    sent = {**ACCEPT, "Authorization": f"Bearer om_guess-{n}-{guess:020d}"}
                    answers[http.post(url, content=json.dumps(INIT), headers=sent).status_code] += 1
        with httpx2.Client(timeout=60, headers={**ACCEPT, "Authorization": f"Bearer {ALICE}"}) as http:
            valid = sum(http.post(url, content=json.dumps(INIT)).status_code == 200 for _ in range(10))
    total = addresses * each
    print(
        f"\ntoken guesses from {addresses} addresses, {each} each: {answers[401]} of {total} answered 401"
        f" (not limited), {answers[429]} limited (429); a valid token's requests meanwhile: {valid}/10 answered"
    )


def memory_mib(pid: int) -> tuple[float, float]:
    """(resident, peak resident) MiB of a process."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def send_body(port: int, path: str, size: int, chunked: bool) -> str:
    """PUT `size` bytes to `path` with the admin token, in 1 MiB writes; the answer's status line."""
    with socket.create_connection(("127.0.0.1", port), timeout=120) as sock:
        length = b"Transfer-Encoding: chunked" if chunked else f"Content-Length: {size}".encode()
        head = b"PUT %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n" % (path.encode(), ADMIN.encode())
        sock.sendall(head + b"Content-Type: application/json\r\n" + length + b"\r\n\r\n")
        piece = b"x" * (1 << 20)
        try:
            for _ in range(size >> 20):
                sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
            if chunked:
                sock.sendall(b"0\r\n\r\n")
        except OSError:
            pass  # the server closed: its answer may still be there
        try:
            return sock.recv(4096).split(b"\r\n")[0].decode()
        except OSError as error:
            return type(error).__name__


def huge_body(mib: int = 300) -> None:
    """A `mib` MiB PUT to the status page's API (declared, then chunked), and the server's memory."""
    with server() as (url, pid):
        port = port_of(url)
        before = memory_mib(pid)
        answers = [send_body(port, "/api/threads/ta/observations/x1", mib << 20, chunked) for chunked in (False, True)]
        after = memory_mib(pid)
    print(
        f"\na {mib} MiB PUT /api/threads/ta/observations/x1, with a length / chunked: {' / '.join(answers)};"
        f" the server's memory {before[0]:.0f} -> {after[0]:.0f} MiB (peak {before[1]:.0f} -> {after[1]:.0f} MiB)"
    )


def crafted_gitdir() -> None:
    """A folder whose `.git` file points into another project's worktree admin folder, through the hook."""
    git = shutil.which("git")
    if git is None:
        print("\ncrafted .git file: skipped, no git")
        return
    with tempfile.TemporaryDirectory(prefix="om-attacks-") as tmp:
        root = Path(tmp)
        env = environment(tmp, OM_DB_PATH=str(root / "memory.db"), OM_MODEL="openai/gpt-4o-mini")
        git_env = {**env, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t"}
        git_env["GIT_COMMITTER_EMAIL"] = "t@e"
        victim = root / "victim"
        victim.mkdir()
        for args in (["init", "-q"], ["commit", "-q", "--allow-empty", "-m", "x"], ["worktree", "add", "-q", "../wt"]):
            subprocess.run([git, *args], cwd=victim, env=git_env, check=True, capture_output=True)

        def hook(event: dict[str, Any]) -> str:
            command = [sys.executable, "-m", "om_mcp", "hook", "claude-code", "--no-worker"]
            done = subprocess.run(command, input=json.dumps(event).encode(), env=env, cwd=tmp, capture_output=True)
            out = done.stdout.decode()
            return json.loads(out)["hookSpecificOutput"]["additionalContext"] if out.strip() else ""

        def session(name: str, cwd: Path, prompt: str) -> None:
            transcript = ClaudeTranscript(root / f"{name}.jsonl", name, str(cwd))
            transcript.turn(prompt, "done")
            hook(
                {
                    "session_id": name,
                    "transcript_path": str(transcript.path),
                    "cwd": str(cwd),
                    "hook_event_name": "Stop",
                }
            )

        def start(name: str, cwd: Path) -> str:
            return hook({"session_id": name, "cwd": str(cwd), "hook_event_name": "SessionStart", "source": "startup"})

        session("victim-session", victim, "Deploy the payroll service with key rotation")
        crafted = root / "downloads" / "crafted"
        crafted.mkdir(parents=True)
        (crafted / ".git").write_text(f"gitdir: {os.path.relpath(victim / '.git' / 'worktrees' / 'wt', crafted)}\n")
        shown = "payroll" in start("crafted-start", crafted)
        session("crafted-session", crafted, "what do you remember?")
        import sqlite3

        with sqlite3.connect(root / "memory.db") as conn:
            owners = dict(conn.execute("SELECT id, resource_id FROM threads").fetchall())
        shared = "payroll" in start("worktree-start", root / "wt")
    print(
        f"\ncrafted .git file (gitdir: ../../victim/.git/worktrees/wt): the victim's session shown at SessionStart:"
        f" {'yes' if shown else 'no'}; recorded into the victim's memory:"
        f" {'yes' if owners.get('crafted-session') == str(victim) else 'no'}; a worktree git made still shares the"
        f" victim's memory: {'yes' if shared else 'no'}"
    )


# One line each; rows are run in this order.
# -- secrets: planted on every surface, then looked for in the bytes of the database file and its -wal ---------

# (class, the text planted, the secret in it that must not be stored): om_mcp/testing/secrets.py


def _stored(db: Path, secrets: list[str]) -> list[str]:
    data = b"".join(Path(f"{db}{suffix}").read_bytes() for suffix in ("", "-wal") if Path(f"{db}{suffix}").exists())
    return [secret for secret in secrets if secret.encode() in data]


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OM_")}
    env.update(HOME=str(tmp), XDG_DATA_HOME=str(tmp / "data"), XDG_CACHE_HOME=str(tmp / "cache"), **extra)
    return env


def wait_for(port: int, process: subprocess.Popen) -> None:
    """Until the server listens on `port`; a minute at most."""
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            if time.monotonic() > deadline or process.poll() is not None:
                raise SystemExit("the server did not start") from None
            time.sleep(0.05)


@asynccontextmanager
async def _server(tmp: Path, **extra: str) -> AsyncIterator[Client]:
    """`om-mcp serve --transport http` on the row's own database, and a client with the admin token."""
    port = free_port()
    env = _env(tmp, OM_SERVER__AUTH__TOKENS=json.dumps(TOKENS), OM_SERVER__HTTP__RATE_LIMIT_PER_MINUTE="0", **extra)
    command = [sys.executable, "-m", "om_mcp", "serve", "--transport", "http", "--port", str(port), "--db"]
    process = subprocess.Popen(
        [*command, str(tmp / "m.db")], cwd=REPO, env=env, stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_for(port, process)
        async with connect(f"http://127.0.0.1:{port}/mcp", ADMIN) as client:
            yield client
    finally:
        process.terminate()
        process.wait(timeout=15)


async def secrets_in_tool_calls(tmp: Path) -> tuple[str, int, list[str]]:
    """Messages, tool arguments and results under `url`/`data`, message and thread metadata."""
    async with _server(tmp, OM_OBSERVATIONAL_MEMORY="false") as client:
        for i, (_, text, _secret) in enumerate(PLANTS):
            call = {"type": "tool-call", "tool_name": "WebFetch", "tool_call_id": f"c{i}", "args": {"url": text}}
            result = {"type": "tool-result", "tool_name": "WebFetch", "tool_call_id": f"c{i}", "result": {"data": text}}
            messages = [
                {"role": "user", "content": text},
                {"role": "assistant", "content": [call], "metadata": {"url": text, "data": {"note": text}}},
                {"role": "tool", "content": [result]},
            ]
            metadata = {"ci": {"url": text}}
            await tool(
                client, "append_messages", {"thread_id": f"t{i}", "messages": messages, "thread_metadata": metadata}
            )
    return (
        "MCP tools: messages, tool args/results, metadata",
        5 * len(PLANTS),
        _stored(tmp / "m.db", [p[2] for p in PLANTS]),
    )


async def secrets_in_titles_and_working_memory(tmp: Path) -> tuple[str, int, list[str]]:
    async with _server(tmp, OM_OBSERVATIONAL_MEMORY="false") as client:
        for i, (_, text, _secret) in enumerate(PLANTS):
            thread = {"thread_id": f"t{i}"}
            title = {"title": text} if "\n" not in text else {}
            await tool(client, "append_messages", {**thread, "messages": [note(1, "hi")], "thread_metadata": title})
            if title:
                await tool(client, "update_thread", {**thread, "title": f"again {text}", "metadata": {"k": text}})
            await tool(client, "update_working_memory", {**thread, "memory": f"# Notes\n- {text}"})
    planted = 3 * len(ONE_LINE) + len(PLANTS)
    return "MCP tools: titles, thread metadata, working memory", planted, _stored(tmp / "m.db", [p[2] for p in PLANTS])


def _transcript(path: Path, session: str) -> None:
    from om_mcp.testing.transcripts import ClaudeTranscript

    transcript = ClaudeTranscript(path, session, str(path.parent))
    for _, text, _secret in PLANTS:
        transcript.user(text)
        call = transcript.tool_call("WebFetch", {"url": text, "prompt": "read it"})
        transcript.tool_result(call, text)
        call = transcript.tool_call("Bash", {"command": text})
        transcript.tool_result(call, "ok")
        transcript.assistant(f"noted: {text}")


def secrets_through_the_hook_and_ingest(tmp: Path) -> tuple[str, int, list[str]]:
    env = _env(tmp, OM_DB_PATH=str(tmp / "m.db"), OM_MODEL="openai/gpt-4o-mini")
    _transcript(tmp / "hooked.jsonl", "hooked")
    event = {"session_id": "hooked", "transcript_path": str(tmp / "hooked.jsonl"), "cwd": str(tmp)}
    hook = [sys.executable, "-m", "om_mcp", "hook", "claude-code", "--no-worker"]
    subprocess.run(
        hook, input=json.dumps({**event, "hook_event_name": "UserPromptSubmit"}).encode(), env=env, check=True
    )
    _transcript(tmp / "ingested.jsonl", "ingested")
    ingest = [sys.executable, "-m", "om_mcp", "ingest", str(tmp / "ingested.jsonl"), "--no-worker"]
    subprocess.run(ingest, env=env, check=True, capture_output=True)
    planted = 2 * 5 * len(PLANTS)  # hook and ingest: prompt, tool args twice, result, reply
    return "host hook and om-mcp ingest (a Claude Code session)", planted, _stored(tmp / "m.db", [p[2] for p in PLANTS])


async def secrets_through_an_import(tmp: Path) -> tuple[str, int, list[str]]:
    """An om-mcp export made with privacy off: messages, titles, thread metadata, working memory,
    observation text, tasks and extracted values, imported into a memory with privacy on."""
    from om_mcp.config import load_config
    from om_mcp.engine import Memory
    from om_mcp.testing import ScriptedModel

    everything = " ".join(p[1].replace("\n", " ") for p in ONE_LINE)
    log = "\n".join(f"* 🔴 (10:00) {p[1]}" for p in ONE_LINE)
    reply = (
        f"<observations>\nDate: Mar 2, 2026\n{log}\n</observations>\n<current-task>{everything}</current-task>\n"
        f"<suggested-response>{everything}</suggested-response>\n<secret>{everything}</secret>"
    )
    old = load_config(
        env={
            "OM_DB_PATH": str(tmp / "old.db"),
            "OM_MODEL": "default",
            "OM_PRIVACY__ENABLED": "false",
            "OM_OBSERVATIONAL_MEMORY__SCOPE": "thread",
            "OM_OBSERVATIONAL_MEMORY__OBSERVATION__BUFFER_TOKENS": "false",
            "OM_OBSERVATIONAL_MEMORY__OBSERVATION__EXTRACT": json.dumps([{"name": "secret"}]),
        }
    )
    async with await Memory.open(old, client=ScriptedModel(lambda messages, target: reply)) as memory:
        messages = [{"role": "user", "content": p[1]} for p in PLANTS] + [{"role": "assistant", "content": "ok"}]
        await memory.append_messages("t", messages, thread_metadata={"title": everything[:400], "ci": everything})
        await memory.update_working_memory("t", f"# Notes\n- {everything}")
        await memory.observe("t")
        with (tmp / "export.jsonl").open("w", encoding="utf-8") as out:
            await memory.export_to(out)
    command = [sys.executable, "-m", "om_mcp", "import", str(tmp / "export.jsonl")]
    subprocess.run(command, env=_env(tmp, OM_DB_PATH=str(tmp / "m.db")), check=True, capture_output=True)
    planted = len(PLANTS) + 6 * len(ONE_LINE)  # messages; title, metadata, memory, log, task, extracted
    return "om-mcp import of an export made with privacy off", planted, _stored(tmp / "m.db", [p[2] for p in PLANTS])


async def secrets_the_observer_decodes(tmp: Path) -> tuple[str, int, list[str]]:
    """The user pastes each secret base64-encoded (no detector reads it); the Observer decodes it
    into its log, the task, the suggested response and the thread's title."""
    import base64

    from om_mcp.testing.fake_server import FakeLLMServer, request_text

    def decode(request: dict[str, Any]) -> str:
        found = re.findall(r"encoded: ([A-Za-z0-9+/=]+)", request_text(request))
        said = [base64.b64decode(x).decode().replace("\n", " ") for x in dict.fromkeys(found)] or ["nothing"]
        lines = "\n".join(f"* 🔴 (10:00) the user's {x}" for x in said)
        return (
            f"<observations>\nDate: Mar 2, 2026\n{lines}\n</observations>\n<current-task>use {said[0]}</current-task>\n"
            f"<suggested-response>try {said[-1]}</suggested-response>\n<thread-title>{said[0][:80]}</thread-title>"
        )

    with FakeLLMServer(decode) as llm:
        model = json.dumps({"model": "openai/fake", "api_base": llm.base_url})
        title = {"OM_OBSERVATIONAL_MEMORY__OBSERVATION__THREAD_TITLE": "true"}
        async with _server(tmp, OM_MODEL=model, OM_OBSERVATIONAL_MEMORY__SCOPE="thread", **title) as client:
            for i, (_, text, _secret) in enumerate(PLANTS):
                encoded = base64.b64encode(text.encode()).decode()
                messages = [note(1, f"encoded: {encoded}"), {"id": "m2", "role": "assistant", "content": "ok"}]
                await tool(client, "append_messages", {"thread_id": f"t{i}", "messages": messages})
                await tool(client, "observe", {"thread_id": f"t{i}"})
    return (
        "what the Observer writes (decoded from base64)",
        4 * len(PLANTS),
        _stored(tmp / "m.db", [p[2] for p in PLANTS]),
    )


def _observing(request: dict[str, Any]) -> str:
    """The fake model's answer to the Observer and the Reflector alike: one harmless line."""
    return "<observations>\nDate: Mar 2, 2026\n* 🔴 (10:00) the user talked about a garden\n</observations>"


def _sent(llm: FakeLLMServer) -> list[str]:
    """The secrets any request to the model held."""
    return [p[2] for p in PLANTS if any(p[2] in json.dumps(request) for request in llm.requests)]


async def secrets_through_every_way_to_remember(tmp: Path) -> tuple[str, int, list[str]]:
    """`om-mcp remember` with --thread, --resource, --user, --user --working-memory; the update_thread
    tool's `remember`; a `<remember>` span through the tools, the hook and `om-mcp ingest`; then the model
    reads the log (observe and reflect with an --instruction holding the secret too): a secret in the
    file or in any request the model got counts."""
    with FakeLLMServer(_observing) as llm:
        model = json.dumps({"model": "openai/fake", "api_base": llm.base_url})
        settings = dict(
            OM_MODEL=model,
            OM_OBSERVATIONAL_MEMORY__SCOPE="resource",
            OM_OBSERVATIONAL_MEMORY__USER__ENABLED="true",
            OM_OBSERVATIONAL_MEMORY__OBSERVATION__BUFFER_TOKENS="false",
        )
        env = _env(tmp, OM_DB_PATH=str(tmp / "m.db"), **settings)
        om = [sys.executable, "-m", "om_mcp"]
        subprocess.run([*om, "remember", "first", "--resource", "r"], env=env, capture_output=True)
        transcript = ClaudeTranscript(tmp / "s.jsonl", "s", str(tmp))
        for _, text, _secret in ONE_LINE:
            transcript.turn(f"<remember>{text}</remember>", "noted")
            for where in (["--resource", "r"], ["--user"], ["--user", "--working-memory"]):
                subprocess.run([*om, "remember", text, *where], env=env, capture_output=True)
        subprocess.run([*om, "ingest", str(transcript.path), "--no-worker"], env=env, capture_output=True)
        hooked = ClaudeTranscript(tmp / "h.jsonl", "h", str(tmp))
        for _, text, _secret in ONE_LINE:
            hooked.turn(f"<remember>{text}</remember>", "noted")
        event = {"session_id": "h", "transcript_path": str(hooked.path), "cwd": str(tmp), "hook_event_name": "Stop"}
        subprocess.run([*om, "hook", "claude-code", "--no-worker"], input=json.dumps(event).encode(), env=env)
        for _, text, _secret in ONE_LINE:
            subprocess.run([*om, "remember", text, "--thread", "s"], env=env, capture_output=True)
        served = {k: v for k, v in settings.items() if "__USER__" not in k}  # a server with tenants: no person layer
        async with _server(tmp, **served) as client:
            for i, (_, text, _secret) in enumerate(ONE_LINE):
                await tool(client, "update_thread", {"thread_id": "s", "remember": text})
                span = [note(1, f"<remember>{text}</remember>"), {"id": "m2", "role": "assistant", "content": "ok"}]
                await tool(client, "append_messages", {"thread_id": f"t{i}", "resource_id": "r", "messages": span})
            instruction = " ".join(p[1].replace("\n", " ") for p in ONE_LINE)
            await tool(client, "observe", {"thread_id": "s", "instruction": instruction})
            await tool(client, "reflect", {"thread_id": "s", "instruction": instruction})
        subprocess.run([*om, "observe", "t0", "--instruction", instruction], env=env, capture_output=True)
        sent = _sent(llm)
    planted = 9 * len(ONE_LINE) + 2
    stored = _stored(tmp / "m.db", [p[2] for p in PLANTS])
    return "every way to remember, and --instruction (the file; the model)", planted, sorted({*stored, *sent})


def _planted(schema: dict[str, Any], text: str) -> Any:
    """`text` as an argument of that JSON schema carries it (a string, messages, an object)."""
    kinds = {schema.get("type")} | {s.get("type") for s in schema.get("anyOf", [])}
    if "string" in kinds:
        return text
    if "array" in kinds:
        return [note(1, text), {"id": "m2", "role": "assistant", "content": f"noted: {text}"}]
    if "object" in kinds:
        return {"note": text, "working_memory": text, "title": text.splitlines()[0]}
    return None


async def secrets_in_every_tool_argument(tmp: Path) -> tuple[str, int, list[str]]:
    """Every argument of every tool the server lists (ids aside: names the client chooses, docs/privacy.md),
    given each class; observe and reflect reach the fake model meanwhile."""
    with FakeLLMServer(_observing) as llm:
        model = json.dumps({"model": "openai/fake", "api_base": llm.base_url})
        planted = 0
        settings = dict(OM_MODEL=model, OM_OBSERVATIONAL_MEMORY__OBSERVATION__BUFFER_TOKENS="false")
        async with _server(tmp, OM_OBSERVATIONAL_MEMORY__SCOPE="thread", **settings) as client:
            await tool(client, "append_messages", {"thread_id": "t", "user": "the garden", "assistant": "ok"})
            for listed in (await client.list_tools()).tools:
                properties = listed.input_schema.get("properties", {})
                for name, schema in properties.items():
                    if name.endswith("_id"):
                        continue
                    for _, text, _secret in PLANTS:
                        value = _planted(schema, text)
                        if value is None:
                            continue
                        arguments = {"thread_id": "t", name: value}
                        if name == "text":  # a line to correct
                            line, _ = await tool(client, "update_thread", {"thread_id": "t", "remember": "a garden"})
                            arguments["observation_id"] = json.loads(line)["remembered"]["id"]
                        if name == "thread_metadata":
                            arguments["user"] = "hello"
                        if listed.name == "observe":
                            await tool(client, "append_messages", {"thread_id": "t", "user": "the garden again"})
                        await tool(client, listed.name, arguments)
                        planted += 1
        sent = _sent(llm)
    stored = _stored(tmp / "m.db", [p[2] for p in PLANTS])
    return "every argument of every tool (the file; the model)", planted, sorted({*stored, *sent})


# Each a surface; (what, secrets planted, those found in the database file's bytes afterwards)
SECRET_ROWS: list[Callable[[Path], Any]] = [
    secrets_through_every_way_to_remember,
    secrets_in_every_tool_argument,
    secrets_in_tool_calls,
    secrets_in_titles_and_working_memory,
    secrets_through_the_hook_and_ingest,
    secrets_through_an_import,
    secrets_the_observer_decodes,
]


def secrets() -> None:
    """Per surface: the plants (each class written in each place it reaches), and the classes whose
    secret is anywhere in the bytes of that surface's database file or its -wal afterwards (goal: 0)."""
    print(
        f"\nsecrets: {len(PLANTS)} classes planted on each surface, then looked for in the bytes of the database"
        " file and its -wal"
    )
    header = f"{'surface':<58} {'plants':>6} {'classes stored':>14}"
    print(header)
    print("-" * len(header))
    plants = stored = 0
    for row in SECRET_ROWS:
        with tempfile.TemporaryDirectory(prefix="om-secrets-") as tmp:
            if inspect.iscoroutinefunction(row):
                what, planted, found = anyio.run(row, Path(tmp))
            else:
                what, planted, found = row(Path(tmp))
        plants, stored = plants + planted, stored + len(found)
        print(f"{what:<58} {planted:>6} {len(found):>9} of {len(PLANTS)}" + (f"  {found}" if found else ""))
    print(f"{'all':<58} {plants:>6} {stored:>9} of {len(PLANTS) * len(SECRET_ROWS)}")


ATTACKS: dict[str, Callable[[], object]] = {
    "cross_tenant": cross_tenant,
    "tenant_matrix": attacks_tenancy.tenant_matrix,
    "model_health_excerpt": model_health_excerpt,
    "legacy_subscriptions": legacy_subscriptions,
    "idle_connections": idle_connections,
    "slow_bodies": slow_bodies,
    "abandoned_sessions": abandoned_sessions,
    "auth_guessing": auth_guessing,
    "huge_body": huge_body,
    "crafted_gitdir": crafted_gitdir,
    "forget": attacks_forget.forgotten_text_back,
    "spend": attacks_spend.spend_over_cap,
    "meter": attacks_meter.meter_row,
    "secrets": secrets,
    "random_keys": attacks_text.random_keys,
    "injection": attacks_text.injection,
}


def main(names: list[str]) -> int:
    unknown = [n for n in names if n not in ATTACKS]
    if unknown:
        print(f"unknown rows {', '.join(unknown)}; the rows: {', '.join(ATTACKS)}", file=sys.stderr)
        return 2
    for name in names or list(ATTACKS):
        ATTACKS[name]()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
