"""Memory as of a day: `get_context` with `as_of` returns the log and working memory as they were
then, and no message made after it; `om-mcp show THREAD --as-of DATE` shows the same, and
`--diff N` what generation N changed against N-1.

Times are taken between the steps (the store stamps what it writes), never waited for."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest
from mcp import MCPError
from support.backends import location
from support.engine import Memory, Script, config, conversation_of
from support.mcp import connect, fail, ok

from om_mcp.server import build_server

pytestmark = pytest.mark.anyio

LATE = datetime(2030, 1, 1, tzinfo=UTC)  # the messages' own times: after every step of the test


def observer(messages: list[dict]) -> str:
    ids = list(dict.fromkeys(re.findall(r"\bm\d+\b", conversation_of(messages))))
    return (
        "<observations>\nDate: Mar 2, 2026\n" + "\n".join(f"* 🔴 (10:00) heard {i}" for i in ids) + "\n</observations>"
    )


def reflector(messages: list[dict]) -> str:
    return "<observations>\nDate: Mar 2, 2026\n* 🔴 (10:00) condensed everything heard so far\n</observations>"


def now() -> str:
    return datetime.now(UTC).isoformat()


async def test_get_context_as_of_shows_what_was_believed_then():
    mem = await Memory.open(config(), db_path=location(), client=Script(observer=observer, reflector=reflector).model)
    async with connect(build_server(mem.config, mem)) as client:
        empty = now()
        first = [{"id": f"m{n}", "role": "user", "content": f"m{n} hi", "created_at": empty} for n in range(3)]
        await ok(client, "append_messages", thread_id="t", messages=first)
        await ok(client, "update_working_memory", thread_id="t", memory="# About the User\n- Name: Ada")
        assert (await ok(client, "observe", thread_id="t"))["ran"]
        observed = now()
        await ok(client, "update_working_memory", thread_id="t", memory="# About the User\n- Name: Ada Byron")
        assert (await ok(client, "reflect", thread_id="t"))["ran"]
        late = [{"id": "m9", "role": "user", "content": "m9 much later", "created_at": LATE.isoformat()}]
        await ok(client, "append_messages", thread_id="t", messages=late)

        before = await ok(client, "get_context", thread_id="t", as_of=empty)
        assert "heard" not in before.get("system_text", "")
        assert [m["id"] for m in before["messages"]] == ["m0", "m1", "m2"]  # made by then, not yet observed

        then = await ok(client, "get_context", thread_id="t", as_of=observed)
        assert "heard m0" in then["system_text"] and "condensed everything" not in then["system_text"]
        assert "- Name: Ada\n" in then["system_text"] + "\n" and "Byron" not in then["system_text"]
        assert then.get("messages") is None  # observed by then; m9 was not made yet

        current = await ok(client, "get_context", thread_id="t")
        assert "condensed everything" in current["system_text"] and "heard m0" not in current["system_text"]
        assert "Ada Byron" in current["system_text"]
        future = await ok(client, "get_context", thread_id="t", as_of=LATE.isoformat())
        assert "condensed everything" in future["system_text"] and future["messages"][-1]["id"] == "m9"

        # A day means its end (UTC); a date-time without a zone is UTC; nonsense names the argument.
        day = await ok(client, "get_context", thread_id="t", as_of=(LATE - timedelta(days=1)).date().isoformat())
        assert "m9" not in json.dumps(day)
        assert "as_of" in await fail(client, "get_context", thread_id="t", as_of="last tuesday")
        # An empty one: test_every_tool_prompt_template_and_route_taking_as_of_refuses_an_empty_one.
    await mem.close()


@pytest.fixture
def om(monkeypatch, capsys, tmp_path) -> Callable[..., subprocess.CompletedProcess]:
    """`om-mcp ARGS` through the CLI's own entry point, in this process (a process each cost seconds on a
    loaded machine), in a clean environment of the test's own: its exit code, stdout and stderr."""
    from support.processes import use_clean_env

    from om_mcp import cli, logs

    monkeypatch.setattr(logs, "configure", lambda *args, **kwargs: None)  # keep pytest's log capture
    use_clean_env(monkeypatch, tmp_path, OM_OBSERVATIONAL_MEMORY__SCOPE="thread")

    def run(*args: str) -> subprocess.CompletedProcess:
        capsys.readouterr()
        code = cli.main(list(args))
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(args, code, out, err)

    return run


def test_show_as_of_and_diff(tmp_path: Path, om):
    db = tmp_path / "om.db"

    def keep_two(messages: list[dict]) -> str:
        from support.engine import memory_log_of

        kept = [r for r in memory_log_of(messages).splitlines() if "m0" in r or "m1" in r]
        rows = [re.sub(r" \[L\d+\]$", "", r) for r in kept]
        return "<observations>\nDate: Mar 2, 2026\n" + "\n".join(rows) + "\n* 🔴 (10:00) new summary\n</observations>"

    async def remember() -> str:
        mem = await Memory.open(config(), db_path=str(db), client=Script(observer=observer, reflector=keep_two).model)
        await mem.append_messages("t", [{"id": f"m{n}", "role": "user", "content": f"m{n} hi"} for n in range(4)])
        assert (await mem.observe("t")).ran
        observed = now()
        assert (await mem.reflect("t")).ran
        await mem.close()
        return observed

    observed = anyio.run(remember)
    shown = om("show", "t", "--as-of", observed, "--json", "--db", str(db))
    assert shown.returncode == 0, shown.stderr
    then = json.loads(shown.stdout)
    assert then["generation"] == 0 and "heard m3" in then["text"] and "new summary" not in then["text"]
    text = om("show", "t", "--as-of", observed, "--db", str(db))
    assert "as of" in text.stdout and "heard m3" in text.stdout

    diff = json.loads(om("show", "t", "--diff", "1", "--json", "--db", str(db)).stdout)
    assert [line["text"] for line in diff["added"]] == ["* 🔴 (10:00) new summary"]
    assert sorted(line["text"] for line in diff["removed"]) == ["* 🔴 (10:00) heard m2", "* 🔴 (10:00) heard m3"]
    assert {line["reason"] for line in diff["removed"]} == {"dropped"} and diff["kept"] == 2
    printed = om("show", "t", "--diff", "1", "--db", str(db)).stdout
    assert "+ * 🔴 (10:00) new summary" in printed and "- * 🔴 (10:00) heard m3  (dropped)" in printed
    missing = om("show", "t", "--diff", "7", "--db", str(db))
    assert missing.returncode == 4 and "generation 7" in missing.stderr


# -- an empty as_of, wherever one is taken ----------------------------------------------------------------

UNREADABLE = "as_of: cannot read {!r}; give an ISO date (2026-03-02) or date-time (2026-03-02T14:30)"


async def test_every_tool_prompt_template_and_route_taking_as_of_refuses_an_empty_one(make_config):
    """Found from tools/list, prompts/list, resources/templates/list and the status page's routes, not
    listed here: each that takes `as_of` refuses "" and blanks in the words any unreadable value gets
    (an empty one used to mean "now"), on a thread that exists and one that does not."""
    from starlette.testclient import TestClient
    from support.tenancy import routes_of

    from om_mcp.server.http import build_http_app
    from om_mcp.server.http.ui.routes import inputs_of

    config = make_config()
    mem = await Memory.open(config, client=Script().model)
    await mem.append_messages("t", [{"id": "m1", "role": "user", "content": "hello"}])
    refused: list[str] = []
    async with connect(build_server(config, mem)) as client:
        for tool in (await client.list_tools()).tools:
            if "as_of" not in tool.input_schema.get("properties", {}):
                continue
            for thread in ("t", "unseen"):
                for blank in ("", "   "):
                    fills = {name: thread for name in tool.input_schema.get("required", [])}
                    assert await fail(client, tool.name, **{**fills, "as_of": blank}) == UNREADABLE.format(blank)
            refused.append(f"tool {tool.name}")
        for prompt in (await client.list_prompts()).prompts:
            names = [a.name for a in prompt.arguments or []]
            if "as_of" in names:
                for blank in ("", "   "):
                    fills = {a.name: "t" for a in prompt.arguments or [] if a.required}
                    with pytest.raises(MCPError, match=re.escape(UNREADABLE.format(blank))):
                        await client.get_prompt(prompt.name, {**fills, "as_of": blank})
                refused.append(f"prompt {prompt.name}")
        for template in (await client.list_resource_templates()).resource_templates:
            if "{as_of}" in template.uri_template:
                uri = re.sub(r"\{as_of\}", "", template.uri_template)
                with pytest.raises(MCPError, match=re.escape(UNREADABLE.format(""))):
                    await client.read_resource(re.sub(r"\{\w+\}", "t", uri))
                refused.append(f"template {template.uri_template}")
    app = build_http_app(build_server(config, mem), config)
    routes = [r for r in routes_of(app) if "as_of" in (*inputs_of(r).query, *inputs_of(r).body)]
    if routes:
        with TestClient(app, headers={"Host": "127.0.0.1"}) as http:
            for route in routes:
                path = re.sub(r"\{\w+(:\w+)?\}", "t", route.path)
                for method in sorted((route.methods or {"GET"}) - {"HEAD"}):
                    where = "json" if "as_of" in inputs_of(route).body else "params"
                    answer = http.request(method, path, **{where: {"as_of": ""}})
                    assert answer.status_code == 400 and UNREADABLE.format("") in answer.text, answer.text
                refused.append(f"route {route.path}")
    assert await mem.thread("unseen") is None  # refused before anything was made
    await mem.close()
    assert "tool get_context" in refused, refused  # the enumeration found what it must


def test_every_command_taking_as_of_refuses_an_empty_one(tmp_path, om):
    """Found from the CLI's own parser: every command with an `--as-of` option exits 2 on "" naming the
    field, printing nothing on stdout (`om-mcp show t --as-of ""` showed the memory as it is now)."""
    import argparse

    from om_mcp import cli

    db = tmp_path / "om.db"
    anyio.run(make_thread, db)
    commands = next(a for a in cli.parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    refused = []
    for name, sub in commands.items():
        for action in sub._actions:
            if action.dest != "as_of":
                continue
            positionals = ["t" for a in sub._actions if not a.option_strings and a.nargs in (None, "?")]
            for blank in ("", "   "):
                got = om(name, *positionals, action.option_strings[0], blank, "--db", str(db))
                assert got.returncode == 2 and got.stdout == "" and UNREADABLE.format(blank) in got.stderr, got
            refused.append(f"{name} {action.option_strings[0]}")
    assert "show --as-of" in refused, refused  # the enumeration found what it must


async def make_thread(db: Path) -> None:
    mem = await Memory.open(config(), db_path=str(db), client=Script().model)
    await mem.append_messages("t", [{"id": "m1", "role": "user", "content": "hello"}])
    await mem.close()
