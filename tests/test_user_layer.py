"""The person layer, off by default: lines remembered with `--user` and the person's working memory
reach every resource's `get_context` and the hooks' SessionStart in a block of their own, within
`[observational_memory.user] tokens`; off, nothing crosses from one project to another (0 tokens).

Through the MCP tools (in-process server), the hook's SessionStart text read from the store, and
the command; the figure of the issue is the block's tokens in a new project's context."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.engine import Memory, Script, config, msg
from support.mcp import connect, ok

from om_mcp.config import ConfigError, load_config
from om_mcp.engine.recorder import RecorderSettings
from om_mcp.engine.recorder.context import session_context
from om_mcp.engine.tokens import get_token_counter
from om_mcp.engine.user_layer import USER_RESOURCE
from om_mcp.server import build_server
from om_mcp.store.local import direct

pytestmark = pytest.mark.anyio

BLOCK = re.compile(r"<user-memory>\n.*?\n</user-memory>", re.S)


def person_config(enabled: bool, tokens: int = 300):
    return config(scope="resource", user__enabled=enabled, user__tokens=tokens)


def block_tokens(text: str) -> int:
    found = BLOCK.search(text or "")
    return get_token_counter().count_text(found.group(0)) if found else 0


async def remembered(db: Path, lines: list[str], note: str | None = None) -> None:
    mem = await Memory.open(person_config(True), db_path=str(db), client=Script().model)
    for line in lines:
        await mem.remember(line, user=True)
    if note is not None:
        await mem.set_user_working_memory(note)
    await mem.append_messages("t", [msg(0, role="user")], resource_id="project-a")
    await mem.close()


async def test_on_the_person_layer_reaches_a_new_project_within_its_budget(tmp_path: Path):
    """The figure: the person layer's tokens in a new project's context (on: within its budget)."""
    db = tmp_path / "om.db"
    await remembered(db, ["I use tabs", "Answer in French", "My name is Ada"], note="- Works on engines")
    mem = await Memory.open(person_config(True, tokens=300), db_path=str(db), client=Script().model)
    async with connect(build_server(mem.config, mem)) as client:
        fresh = await ok(client, "get_context", thread_id="new", resource_id="project-b")
        block = BLOCK.search(fresh["system_text"]).group(0)
        for said in ("- I use tabs", "- Answer in French", "- My name is Ada", "- Works on engines"):
            assert said in block
        assert "[user-stated]" not in block and 0 < block_tokens(fresh["system_text"]) <= 300
        busy = await ok(client, "get_context", thread_id="t")  # an existing project's thread too
        assert "- Answer in French" in busy["system_text"]
    await mem.close()


async def test_the_budget_keeps_the_newest_lines(tmp_path: Path):
    db = tmp_path / "om.db"
    await remembered(db, [f"preference number {n}: " + "very " * 8 + "specific" for n in range(40)])
    mem = await Memory.open(person_config(True, tokens=120), db_path=str(db), client=Script().model)
    context = await mem.get_context("new", resource_id="project-b")
    assert 0 < block_tokens(context.system_text) <= 120
    assert "preference number 39" in context.system_text and "preference number 0:" not in context.system_text
    await mem.close()
    mem = await Memory.open(person_config(True, tokens=0), db_path=str(db), client=Script().model)
    assert block_tokens((await mem.get_context("new", resource_id="project-b")).system_text) == 0
    await mem.close()


async def test_off_nothing_crosses_projects(tmp_path: Path):
    """The figure: off, 0 tokens, though lines were remembered while it was on."""
    db = tmp_path / "om.db"
    await remembered(db, ["I use tabs", "Answer in French"], note="- Works on engines")
    mem = await Memory.open(person_config(False), db_path=str(db), client=Script().model)
    async with connect(build_server(mem.config, mem)) as client:
        fresh = await ok(client, "get_context", thread_id="new", resource_id="project-b")
        busy = await ok(client, "get_context", thread_id="t")
    for context in (fresh, busy):
        text = context.get("system_text", "")
        assert block_tokens(text) == 0 and "tabs" not in text and "French" not in text and "engines" not in text
    await mem.close()


def hook_settings(db: Path, tokens: int | None) -> RecorderSettings:
    made = load_config(env={"OM_OBSERVATIONAL_MEMORY__SCOPE": "resource"})
    return RecorderSettings(
        db_path=str(db),
        observation=True,
        scope="resource",
        limits=made.observational_memory.limits(),
        working_memory="resource",
        max_message_chars=1_000_000,
        user_tokens=tokens,
    )


async def test_session_start_shows_the_block_when_on_and_nothing_when_off(tmp_path: Path):
    db = tmp_path / "om.db"
    await remembered(db, ["I use tabs", "Answer in French"])
    conn = direct.open_database(str(db))
    try:
        on = session_context(conn, hook_settings(db, 80), "s1", "/project/new", 8000)
        assert "- I use tabs" in on and "- Answer in French" in on and 0 < block_tokens(on) <= 80
        busy = session_context(conn, hook_settings(db, 80), "s2", "project-a", 8000)
        assert "- Answer in French" in busy
        off = session_context(conn, hook_settings(db, None), "s1", "/project/new", 8000)
        assert block_tokens(off) == 0 and "tabs" not in off
    finally:
        conn.close()


async def test_the_user_sees_and_forgets_a_line_and_the_layer_takes_no_messages(tmp_path: Path):
    db = tmp_path / "om.db"
    await remembered(db, ["I use tabs", "Answer in French"])
    mem = await Memory.open(person_config(True), db_path=str(db), client=Script().model)
    layer = await mem.user_layer()
    assert layer["enabled"] and layer["resource_id"] == USER_RESOURCE
    lines = {
        e["text"].split(") ", 1)[1]: e["id"] for g in layer["observations"]["groups"] for e in g["lines"] if e["id"]
    }
    await mem.control.forget_observation(lines["I use tabs [user-stated]"])
    context = await mem.get_context("new", resource_id="project-b")
    assert "tabs" not in context.system_text and "French" in context.system_text
    from om_mcp.engine import InputError

    with pytest.raises(InputError, match="person layer"):
        await mem.append_messages("x", [msg(0)], resource_id=USER_RESOURCE)
    with pytest.raises(InputError, match="one of thread, resource or user"):
        await mem.remember("x", user=True, thread_id="t")
    await mem.close()


def test_the_person_layer_is_refused_beside_tokens_bound_to_resources():
    env = {
        "OM_OBSERVATIONAL_MEMORY__USER__ENABLED": "true",
        "OM_SERVER__AUTH__TOKENS": '[{"hash": "sha256:' + "0" * 64 + '", "resources": ["alice"]}]',
    }
    with pytest.raises(ConfigError, match="observational_memory.user.enabled"):
        load_config(env=env)
    assert load_config(env={"OM_OBSERVATIONAL_MEMORY__USER__ENABLED": "true"}).observational_memory.user.enabled
