"""The tenant conformance matrix, generated from what the server says it offers.

A real om-mcp HTTP app (uvicorn on a free loopback port, as `om-mcp serve --transport http` runs it)
with two bearer tokens: alice's resource holds a thread, its messages (one forgotten, one with
metadata), a title, working memory, remembered and observed lines over two generations (a line
retired between them), each with a unique marker, and a remote client she connected holds an
OAuth grant to it. Bob's token then calls

* every tool of `tools/list`, every resource template of `resources/templates/list` (and every
  listed resource), every prompt of `prompts/list`, and every route of the status page (found by
  walking the real app's Starlette routers, with the query and body inputs each route declares),
* for every argument that names something (`ARGUMENTS`, `ROUTE_INPUTS`: a thread, resource,
  message, observation line, cursor, generation, phrase, `as_of` or OAuth grant), once with each of alice's
  values and once with a value of the same shape that nobody holds, bob's own values elsewhere,
* and `subscriptions/listen` to every resource template filled with each of alice's values and
  nobody's (one of hers honoured is a read: bob would hear her changes),

and counts, over every answer: *reads* (an answer holding one of alice's markers or ids, besides the
value bob sent), *changes* (alice's rows, read from the SQLite file, differ after the call, or one of
her markers is gone from the bytes of the file and its -wal), and *differences* (the answer to
alice's value, with the value masked, differs from the answer to nobody's: an oracle). Thread ids
are one space for the server, so a thread's answers may differ (that an id is in use is what a token
may learn); everything else must not.

An argument the tables do not classify fails the matrix (`unclassified`): a new tool, template,
prompt or route is covered the day it lands, and a new argument must be classified first.
"""

from __future__ import annotations

import json
import re
import secrets
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import httpx2
import uvicorn
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from starlette.applications import Starlette
from starlette.routing import Mount, Route, Router

from om_mcp.config import Config, hash_token
from om_mcp.engine import Memory
from om_mcp.server import build_server
from om_mcp.server.http import build_http_app
from om_mcp.server.http.run import uvicorn_config
from om_mcp.server.http.ui.routes import inputs_of
from om_mcp.testing import ScriptedModel
from om_mcp.testing.ports import free_port
from support.engine import conversation_of, memory_log_of, role_of

ALICE, BOB = "om_alice-matrix-0123456789abcdef", "om_bob-matrix-0123456789abcdef"

# What each argument names. A kind with values below is varied; "inert" arguments (positions in the
# caller's own lists, choices, content the caller writes) are given bob's defaults only.
ARGUMENTS: dict[str, str] = {
    "thread_id": "thread",
    "target_thread_id": "thread",
    "resource_id": "resource",
    "message_id": "message",
    "messages": "message_list",  # the ids of the messages sent
    "cursor": "cursor",
    "observation_id": "line",
    "match": "phrase",
    "query": "phrase",
    "as_of": "as_of",
    "generation": "generation",
    "grant_id": "grant",  # a remote client's OAuth grant (the status page's /api/grants)
    **dict.fromkeys(
        (
            "user",
            "assistant",
            "thread_metadata",
            "include_status",
            "max_tokens",
            "mode",
            "anchor",
            "page",
            "limit",
            "detail",
            "part_type",
            "tool_name",
            "part_index",
            "char_offset",
            "before",  # recall's: threads created before a date
            "after",
            "scope",
            "instruction",
            "memory",
            "read_only",
            "title",
            "metadata",
            "text",
            "remember",
            "with_sources",
            "confirm",
        ),
        "inert",
    ),
}
# The status page's query parameters and body fields (`@takes` in server/http/ui/routes.py).
ROUTE_INPUTS: dict[str, str] = {
    "before": "message",  # the next page: a message id
    "id": "message",
    "q": "phrase",
    "after": "inert",  # the last event id seen: a position in the caller's own thread's events
    "limit": "inert",
    "offset": "inert",
    "title": "inert",
    "text": "inert",
    "generation": "generation",
}
# Bob's values for what a call needs besides the argument varied.
INERT_DEFAULTS: dict[str, Any] = {"memory": "# Bob's notes\n- plays chess", "title": "bob's title", "text": "corrected"}
# What an argument needs beside it to mean anything (a search needs mode="search", ...).
COMPANIONS: dict[str, dict[str, Any]] = {
    "query": {"mode": "search"},
    "cursor": {"mode": "messages"},
    "target_thread_id": {"mode": "messages"},
    "observation_id": {"text": "corrected"},
}
VARIANTS: dict[str, list[dict[str, Any]]] = {"match": [{"confirm": False}, {"confirm": True}]}


def hexes(n: int = 10) -> str:
    return secrets.token_hex(n)[:n]


def marker(tag: str) -> str:
    return f"zq{tag}{hexes()}"  # one word, the same shape for every tag


@dataclass
class Planted:
    """Alice's values by kind, the matching values nobody holds, and what must never reach bob."""

    db: Path
    alice_resource: str
    alice_thread: str
    bob_thread: str
    bob_line: str
    values: dict[str, list[Any]]
    nobody: dict[str, Callable[[Any], Any]]
    secrets: list[str]
    markers: list[str]
    needles: list[str]  # what marks a row as alice's (or the owner's) in the file


def observer(messages: list[dict]) -> str:
    """An Observer that writes one line per marker it reads."""
    words = list(dict.fromkeys(re.findall(r"\bzq[a-z]+[0-9a-f]{10}\b", conversation_of(messages))))
    lines = "\n".join(f"* 🔴 (10:00) noted {w}" for w in words) or "* 🟡 (10:00) nothing new"
    return f"<observations>\nDate: Mar 2, 2026\n{lines}\n</observations>"


def reflector(messages: list[dict]) -> str:
    """A Reflector that keeps every line but those it is told to drop (they go to the retired pile)."""
    kept = [
        re.sub(r" \[L\d+\]$", "", row)
        for row in memory_log_of(messages).splitlines()
        if row.lstrip().startswith("* ") and "zqdrop" not in row
    ]
    return "<observations>\nDate: Mar 2, 2026\n" + "\n".join(kept) + "\n</observations>"


def scripted() -> ScriptedModel:
    def reply(messages: list[dict], target: Any) -> str:
        return reflector(messages) if role_of(messages) == "reflector" else observer(messages)

    return ScriptedModel(reply)


def config_for(db: Path, port: int, alice: str) -> Config:
    tokens = [
        {"name": "alice", "hash": hash_token(ALICE), "resources": [alice]},
        {"name": "bob", "hash": hash_token(BOB), "resources": ["bob"]},
    ]
    return Config.model_validate(
        {
            "db_path": str(db),
            "observational_memory": {"observation": {"buffer_tokens": False}},
            "server": {
                "transport": "http",
                "host": "127.0.0.1",
                "port": port,
                "auth": {"tokens": tokens},
                # the authorization server's routes too (/authorize, /token, /register, ...)
                "oauth": {"enabled": True},
                "public_url": f"http://127.0.0.1:{port}",
            },
        }
    )


async def plant(memory: Memory, db: Path, alice: str) -> Planted:
    """Bob's thread first, then alice's memory (through the engine as its owner)."""
    bob_thread, alice_thread = f"tb-{hexes()}", f"ta-{hexes()}"
    await memory.append_messages(
        bob_thread,
        [
            {"id": f"b1-{hexes()}", "role": "user", "content": "bob's own words about chess"},
            {"id": f"b2-{hexes()}", "role": "assistant", "content": "noted, bob"},
        ],
        "bob",
    )
    bob_line = (await memory.remember("bob plays the French defence", thread_id=bob_thread)).id
    bob_done = datetime.now(UTC)
    marks = {tag: marker(tag) for tag in ("msg", "title", "wm", "line", "drop", "gone", "meta")}
    ids = {name: f"{name}-{hexes()}" for name in ("am1", "am2", "agone")}
    await memory.append_messages(
        alice_thread,
        [
            {"id": ids["am1"], "role": "user", "content": f"my plan is {marks['msg']} and {marks['drop']}"},
            {
                "id": ids["am2"],
                "role": "assistant",
                "content": f"noted {marks['msg']}",
                "metadata": {"note": marks["meta"]},
            },
            {"id": ids["agone"], "role": "user", "content": f"forget {marks['gone']} please"},
        ],
        alice,
    )
    await memory.update_thread(alice_thread, title=f"alice on {marks['title']}")
    await memory.update_working_memory(alice_thread, f"# Notes\n- {marks['wm']}")
    line_id = (await memory.remember(f"alice keeps {marks['line']}", thread_id=alice_thread)).id
    assert (await memory.observe(alice_thread)).ran
    assert (await memory.reflect(alice_thread)).ran
    await memory.control.forget_message(alice_thread, ids["agone"])
    await memory.grants.register("alice-client", "{}")  # a remote client alice connected (OAuth)
    await memory.grants.consent(await memory.grants.consent_code([alice]), "alice-client", [alice], {})
    (grant,) = [g.id for g in await memory.grants.list()]
    alice_done = datetime.now(UTC)
    history = await memory.observations(alice_thread, history=True)
    groups = [g["id"] for generation in history["generations"] for g in generation["groups"]]
    retired = [g["id"] for g in (await memory.observations(alice_thread))["retired"]]
    assert retired, "the reflection retired the dropped line"
    group = line_id.split(".")[0]
    midpoint = bob_done + (alice_done - bob_done) / 2
    values: dict[str, list[Any]] = {
        "thread": [alice_thread],
        "resource": [alice, "~user"],
        "message": [ids["am1"], ids["agone"]],
        "message_list": [ids["am1"], ids["agone"]],
        "cursor": [ids["am1"], group, retired[0]],
        "line": [line_id, line_id.split(".")[1], group, retired[0]],
        "phrase": [marks[tag] for tag in ("msg", "title", "wm", "line", "drop", "meta")],
        "as_of": [alice_done.isoformat()],
        "generation": [1],
        "grant": [grant],
    }
    nobody: dict[str, Callable[[Any], Any]] = {
        "thread": lambda v: f"tn-{hexes()}",
        "resource": lambda v: f"nobody-{hexes(6)}",
        "message": lambda v: f"nm-{hexes()}",
        "message_list": lambda v: f"nm-{hexes()}",
        "cursor": lambda v: hexes(16) if re.fullmatch(r"[0-9a-f]{16}", v) else f"nm-{hexes()}",
        "line": lambda v: ".".join(hexes(len(p)) for p in v.split(".")),
        "phrase": lambda v: marker("nob"),
        "as_of": lambda v: midpoint.isoformat(),
        "generation": lambda v: 97,
        "grant": lambda v: f"g_{hexes(16)}",
    }
    alice_secrets = [*marks.values(), alice_thread, alice, *ids.values(), *groups, *retired, line_id, grant]
    return Planted(
        db=db,
        alice_resource=alice,
        alice_thread=alice_thread,
        bob_thread=bob_thread,
        bob_line=bob_line,
        values=values,
        nobody=nobody,
        secrets=alice_secrets,
        markers=[m for tag, m in marks.items() if tag != "gone"],  # the forgotten one is gone already
        needles=[alice, alice_thread, "~user", grant, *marks.values()],
    )


@asynccontextmanager
async def serving(tmp: Path) -> AsyncIterator[tuple[str, Any, Planted]]:
    """The planted memory served over HTTP; yields (base URL, the HTTP app, what was planted)."""
    port, db, alice = free_port(), tmp / "om.db", f"alice-{hexes(6)}"
    config = config_for(db, port, alice)
    memory = await Memory.open(config, client=scripted())
    planted = await plant(memory, db, alice)
    app = build_http_app(build_server(config, memory), config)
    web = uvicorn.Server(uvicorn_config(app, config, host="127.0.0.1", lifespan="on"))
    async with anyio.create_task_group() as group:
        group.start_soon(web.serve)
        with anyio.fail_after(60):
            while not web.started:
                await anyio.sleep(0.01)
        try:
            yield f"http://127.0.0.1:{port}", app, planted
        finally:
            web.should_exit = True
    await memory.close()


# -- what the server offers ------------------------------------------------------------------------


def routes_of(app: Any) -> list[Route]:
    """Every Starlette route inside the real app, found by walking what each layer wraps."""
    found: list[Route] = []
    seen: set[int] = set()
    todo = [app]
    while todo:
        node = todo.pop()
        if id(node) in seen or node is None:
            continue
        seen.add(id(node))
        if isinstance(node, Starlette | Router):
            for route in node.routes:
                if isinstance(route, Mount):
                    todo.append(route.app)
                elif isinstance(route, Route) and all(route is not r for r in found):
                    found.append(route)  # a Starlette app and its router list the same routes
        for value in getattr(node, "__dict__", {}).values():
            module = type(value).__module__.split(".")[0]
            wraps = callable(value) or hasattr(value, "app") or hasattr(value, "routes")  # an app, or holds one
            if module in ("om_mcp", "starlette", "mcp") and wraps:
                todo.append(value)
    return sorted(found, key=lambda r: r.path)


@dataclass
class Surface:
    """A tool, resource template, prompt or route, and the arguments it takes."""

    kind: str  # "tool", "resource", "prompt", "route"
    name: str  # the tool or prompt's name, the template, or "METHOD path"
    arguments: dict[str, str]  # name -> kind
    required: list[str] = field(default_factory=list)
    where: dict[str, str] = field(default_factory=dict)  # a route's input -> "path", "query" or "body"


async def surfaces(client: Client, app: Any, mcp_path: str) -> tuple[list[Surface], list[str]]:
    """Every surface the server offers bob, and every argument nobody has classified."""
    out: list[Surface] = []
    unclassified: list[str] = []

    def classify(where: str, names: list[str], table: dict[str, str]) -> dict[str, str]:
        unknown = [n for n in names if n not in table]
        unclassified.extend(f"{where}: {n}" for n in unknown)
        return {n: table[n] for n in names if n in table}

    for tool in (await client.list_tools()).tools:
        schema = tool.input_schema
        names = list(schema.get("properties", {}))
        out.append(
            Surface("tool", tool.name, classify(f"tool {tool.name}", names, ARGUMENTS), schema.get("required", []))
        )
    for template in (await client.list_resource_templates()).resource_templates:
        names = re.findall(r"\{(\w+)\}", template.uri_template)
        out.append(Surface("resource", template.uri_template, classify(template.uri_template, names, ARGUMENTS), names))
    for resource in (await client.list_resources()).resources:
        out.append(Surface("resource", str(resource.uri), {}))
    if client.server_capabilities and client.server_capabilities.prompts is not None:
        for prompt in (await client.list_prompts()).prompts:
            names = [a.name for a in prompt.arguments or []]
            required = [a.name for a in prompt.arguments or [] if a.required]
            out.append(Surface("prompt", prompt.name, classify(f"prompt {prompt.name}", names, ARGUMENTS), required))
    for route in routes_of(app):
        if route.path == mcp_path:
            continue  # the MCP endpoint itself: its tools, resources and prompts are above
        inputs = inputs_of(route)
        path = list(route.param_convertors)
        for method in sorted((route.methods or {"GET"}) - {"HEAD"}):
            name = f"{method} {route.path}"
            arguments = {
                **classify(name, path, ARGUMENTS),
                **classify(name, [*inputs.query, *inputs.body], ROUTE_INPUTS),
            }
            where = {
                **dict.fromkeys(path, "path"),
                **dict.fromkeys(inputs.query, "query"),
                **dict.fromkeys(inputs.body, "body"),
            }
            out.append(Surface("route", name, arguments, path, where))
    return out, unclassified


# -- calling one ----------------------------------------------------------------------------------


@dataclass
class Case:
    surface: Surface
    argument: str | None  # the argument varied (None: the surface called once, bob's values only)
    arguments: dict[str, Any]  # bob's values, with the varied one filled in by `with_value`
    variant: str = ""

    @property
    def label(self) -> str:
        return f"{self.surface.kind} {self.surface.name} [{self.argument or '-'}{self.variant}]"


def bob_value(kind: str, name: str, planted: Planted) -> Any:
    return {
        "thread": planted.bob_thread,
        "resource": "bob",
        "line": planted.bob_line,
        "message_list": [{"role": "user", "content": "probe"}],
    }.get(kind, INERT_DEFAULTS.get(name, "probe"))


def cases(surface: Surface, planted: Planted) -> list[Case]:
    """One case per varied argument (and variant), each with bob's values for the rest."""
    base = {name: bob_value(surface.arguments.get(name, "inert"), name, planted) for name in surface.required}
    varied = [n for n, kind in surface.arguments.items() if kind != "inert"]
    if not varied:
        return [Case(surface, None, base)]
    out = []
    for name in varied:
        extra = {k: v for k, v in COMPANIONS.get(name, {}).items() if k in surface.arguments}
        for variant in VARIANTS.get(name, [{}]):
            label = "".join(f" {k}={v}" for k, v in variant.items())
            out.append(Case(surface, name, {**base, **extra, **variant}, label))
    return out


def with_value(case: Case, value: Any) -> dict[str, Any]:
    kind = case.surface.arguments[case.argument] if case.argument else None
    if kind == "message_list":
        # Stored: each on a thread of bob's own, so his other cases read the same thread throughout.
        value = [{"id": value, "role": "user", "content": "probe"}]
        return {**case.arguments, "thread_id": f"tw-{hexes()}", case.argument: value}
    return {**case.arguments, **({case.argument: value} if case.argument else {})}


async def call(client: Client, http: httpx2.AsyncClient, base: str, case: Case, arguments: dict[str, Any]) -> str:
    """The answer, as text: what it says, and whether it is an error."""
    surface = case.surface
    try:
        if surface.kind == "tool":
            result = await client.call_tool(surface.name, arguments)
            text = "".join(getattr(c, "text", "") for c in result.content)
            return f"{'error' if result.is_error else 'ok'}: {text}"
        if surface.kind == "resource":
            uri = surface.name
            for name, value in arguments.items():
                uri = uri.replace(f"{{{name}}}", quote(str(value), safe=""))
            result = await client.read_resource(uri)
            return "ok: " + "".join(getattr(c, "text", "") for c in result.contents)
        if surface.kind == "prompt":
            got = await client.get_prompt(surface.name, {k: str(v) for k, v in arguments.items()})
            return "ok: " + json.dumps(got.model_dump(mode="json"), ensure_ascii=False)
    except MCPError as error:
        return f"error: {error}"
    method, path = surface.name.split(" ", 1)
    query, body = {}, {}
    for name, value in arguments.items():
        where = surface.where.get(name)
        if where == "path":
            path = re.sub(r"\{" + name + r"(:\w+)?\}", quote(str(value), safe=""), path)
        elif where == "query":
            query[name] = value
        elif where == "body":
            body[name] = value
    sent: dict[str, Any] = {"params": query}
    if method in ("PUT", "POST"):
        sent["json"] = body
    answer = await http.request(method, base + path, **sent)
    return f"{answer.status_code}: {answer.text}"


# -- what the file holds of alice ---------------------------------------------------------------------


class FileWatch:
    """What the file holds of alice, read again only when the file changed: a commit by any connection
    moves SQLite's `data_version` (read on one connection kept open), a write of any kind moves the
    size or time of the file or its -wal. Most of bob's calls write nothing, so their check is one
    pragma and two stats, not a read of every table."""

    def __init__(self, planted: Planted):
        self.planted = planted
        self.conn = sqlite3.connect(f"file:{planted.db}?mode=ro", uri=True)
        self.stamp: tuple[Any, ...] = ()
        self.rows: list[str] = []
        self.gone: list[str] = []
        self.reads = 0  # how many times the tables were read (the checks that were not free)

    def close(self) -> None:
        self.conn.close()

    def now(self) -> tuple[list[str], list[str]]:
        """(alice's rows, her markers gone from the file's bytes), as they are now."""
        stamp = (self.conn.execute("PRAGMA data_version").fetchall()[0][0], *map(_stat, files_of(self.planted)))
        if stamp != self.stamp:
            self.rows, self.gone = alice_rows(self.planted, self.conn), gone_markers(self.planted)
            self.stamp, self.reads = stamp, self.reads + 1
        return self.rows, self.gone


def files_of(planted: Planted) -> tuple[Path, Path]:
    return planted.db, Path(f"{planted.db}-wal")


def _stat(path: Path) -> tuple[int, int] | None:
    try:
        found = path.stat()
    except FileNotFoundError:
        return None
    return found.st_size, found.st_mtime_ns


def alice_rows(planted: Planted, conn: sqlite3.Connection) -> list[str]:
    """Every row of every table that names alice (her resource, her thread, a marker) or the owner's
    person layer, read from the SQLite file as another process would."""
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    rows = []
    for table in tables:
        try:
            found = conn.execute(f'SELECT * FROM "{table}"').fetchall()
        except sqlite3.Error:
            continue  # a virtual table's shadow the build cannot read
        rows += [f"{table}: {r!r}" for r in found if any(n in repr(r) for n in planted.needles)]
    return sorted(rows)


def file_bytes(planted: Planted) -> bytes:
    return b"".join(p.read_bytes() for p in files_of(planted) if p.exists())


def gone_markers(planted: Planted) -> list[str]:
    held = file_bytes(planted)
    return [m for m in planted.markers if m.encode() not in held]


# -- the matrix ---------------------------------------------------------------------------------------


@dataclass
class Tally:
    calls: int = 0
    cases: int = 0
    reads: list[str] = field(default_factory=list)
    changes: list[str] = field(default_factory=list)
    differences: list[str] = field(default_factory=list)
    thread_differences: int = 0  # allowed: that a thread id is in use
    written: set[str] = field(default_factory=set)  # ids bob stored his own messages under
    by_kind: dict[str, int] = field(default_factory=dict)
    file_reads: int = 0  # calls after which alice's rows and the file's bytes were read again (it changed)

    def summary(self, surfaces: list[Surface]) -> str:
        kinds = {k: sum(1 for s in surfaces if s.kind == k) for k in ("tool", "resource", "prompt", "route")}
        arguments = sum(len(s.arguments) for s in surfaces)
        return (
            f"tenant matrix: {len(surfaces)} surfaces ({kinds['tool']} tools, {kinds['resource']} resources,"
            f" {kinds['prompt']} prompts, {kinds['route']} routes) x {arguments} arguments"
            f" ({sum(1 for s in surfaces for k in s.arguments.values() if k != 'inert')} naming something)"
            f" = {self.cases} cases, {self.calls} calls by bob's token with alice's values and nobody's"
            f" (a subscriptions/listen to {self.by_kind.get('listen', 0)} URIs of hers among them);"
            f" reads {len(self.reads)}, changes {len(self.changes)}, answers that differ {len(self.differences)}"
            f" (thread ids, which may: {self.thread_differences}); the file changed after {self.file_reads - 1}"
            " calls and was read again"
        )


def masked(text: str, value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return re.sub(rf"(?<![\w.]){value}(?![\w.])", "<V>", text)
    return text.replace(str(value), "<V>").replace(quote(str(value), safe=""), "<V>")


def read_of(planted: Planted, answer: str, sent: Any, written: set[str]) -> str | None:
    """One of alice's secrets in an answer, besides the value bob sent himself and the ids he stored
    messages under (an id of alice's he sent as his own message's)."""
    shown = masked(answer, sent)
    return next((s for s in planted.secrets if s in shown and s not in written), None)


async def run_matrix(
    tmp: Path, *, progress: Callable[[str], None] | None = None
) -> tuple[Tally, list[Surface], list[str]]:
    """Serve, plant, enumerate and call everything; returns the tally, the surfaces and the
    arguments nobody classified."""
    tally = Tally()
    async with serving(tmp) as (base, app, planted):
        headers = {"Authorization": f"Bearer {BOB}"}
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
            async with Client(streamable_http_client(f"{base}/mcp", http_client=http)) as client:
                found, unclassified = await surfaces(client, app, "/mcp")
                watch = FileWatch(planted)
                try:
                    before_rows, before_gone = watch.now()
                    assert not before_gone, before_gone
                    every = [case for surface in found for case in cases(surface, planted)]
                    # Cases that store messages of bob's under alice's ids go last: before, a cursor naming
                    # one of them would find bob's own copy.
                    every.sort(key=lambda c: c.surface.arguments.get(c.argument or "") == "message_list")
                    for case in every:
                        surface = case.surface
                        tally.cases += 1
                        kind = surface.arguments.get(case.argument or "", "none")
                        tally.by_kind[kind] = tally.by_kind.get(kind, 0) + 1
                        theirs_values = planted.values.get(kind, [None]) if case.argument else [None]
                        for value in theirs_values:
                            nobodys = planted.nobody[kind](value) if case.argument else None
                            answers = []
                            for sent in (value, nobodys) if case.argument else (None,):
                                answer = await call(client, http, base, case, with_value(case, sent))
                                tally.calls += 1
                                answers.append(answer)
                                if kind == "message_list":
                                    tally.written.add(sent)
                                what = f"{case.label} = {sent!r}: {answer[:200]}"
                                if (secret := read_of(planted, answer, sent, tally.written)) is not None:
                                    tally.reads.append(f"{what} (holds {secret})")
                                rows, gone = watch.now()
                                if rows != before_rows or gone != before_gone:  # what this call changed
                                    tally.changes.append(f"{what} (alice's rows changed; gone from the file: {gone})")
                                    before_rows, before_gone = rows, gone
                            if case.argument is None:
                                continue
                            theirs, nobody = masked(answers[0], value), masked(answers[1], nobodys)
                            if theirs != nobody:
                                if kind == "thread":
                                    tally.thread_differences += 1
                                else:
                                    tally.differences.append(f"{case.label}: {theirs[:200]!r} vs {nobody[:200]!r}")
                        if progress:
                            progress(case.label)
                    await listen(client, found, planted, tally)
                finally:
                    tally.file_reads = watch.reads
                    watch.close()
    return tally, found, unclassified


async def listen(client: Client, found: list[Surface], planted: Planted, tally: Tally) -> None:
    """`subscriptions/listen` to every resource template filled with each of alice's values and with
    nobody's, in one stream: a URI of hers honoured is a read whatever it names, a thread included (bob
    would hear every change of it); hers and nobody's must be honoured alike (neither)."""
    theirs: list[str] = []
    nobodys: list[str] = []
    for surface in found:
        if surface.kind != "resource":
            continue
        for name, kind in surface.arguments.items():
            if kind == "inert":
                continue
            for value in planted.values.get(kind, []):
                for sent, into in ((value, theirs), (planted.nobody[kind](value), nobodys)):
                    uri = surface.name
                    for other, its in surface.arguments.items():
                        filled = sent if other == name else bob_value(its, other, planted)
                        uri = uri.replace(f"{{{other}}}", quote(str(filled), safe=""))
                    into.append(uri)
    async with client.listen(resource_subscriptions=theirs + nobodys) as stream:
        honored = set(stream.honored.resource_subscriptions or ())  # None: none honoured
    tally.cases += 1
    tally.calls += 1
    tally.by_kind["listen"] = len(theirs)
    tally.reads += [
        f"subscriptions/listen {uri}: honoured (bob hears alice's changes)" for uri in theirs if uri in honored
    ]
    tally.differences += [f"subscriptions/listen {uri}: honoured (nobody's)" for uri in nobodys if uri in honored]


def lines(items: list[str], limit: int = 30) -> Iterator[str]:
    yield from items[:limit]
    if len(items) > limit:
        yield f"... and {len(items) - limit} more"
