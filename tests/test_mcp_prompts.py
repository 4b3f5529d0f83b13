"""MCP prompts a host without tool calls can use: `memory` (what a conversation starts with: a
thread's memory, or the newest one's of the resource) and `remember` (a line word for word). The
server advertises the prompts capability and lists them; a prompt's refusal is the engine's, in its
words. Tenants: the conformance matrix (`support/tenancy.py`) enumerates the prompts with the tools.

Through an in-process MCP client, both protocol eras."""

from __future__ import annotations

import pytest
from mcp.shared.exceptions import MCPError
from support.engine import Memory, Script, config, msg
from support.mcp import connect, ok

from om_mcp.server import build_server

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_prompts_bring_the_memory_in_and_remember_a_line(tmp_path, mode):
    mem = await Memory.open(config(scope="resource"), db_path=str(tmp_path / "om.db"), client=Script().model)
    async with connect(build_server(mem.config, mem), mode=mode) as client:
        listed = {p.name: p for p in (await client.list_prompts()).prompts}
        assert set(listed) == {"memory", "remember"}
        assert [(a.name, a.required) for a in listed["remember"].arguments] == [
            ("text", True),
            ("thread_id", False),
            ("resource_id", False),
        ]
        empty = await client.get_prompt("memory", {})
        assert empty.messages[0].content.text == "om-mcp holds no memory here yet."

        await mem.append_messages("t", [msg(n) for n in range(3)])
        assert (await mem.observe("t")).ran
        said = await client.get_prompt("remember", {"text": "Deploys happen on Tuesdays only"})
        assert [m.role for m in said.messages] == ["user", "assistant"]
        assert said.messages[0].content.text == "Remember this: Deploys happen on Tuesdays only"
        assert "resource:default" in said.messages[1].content.text

        newest = (await client.get_prompt("memory", {})).messages[0].content.text
        context = await ok(client, "get_context", thread_id="t")
        assert newest == context["system_text"]  # what the newest conversation goes on from
        assert "Deploys happen on Tuesdays only" in newest and "<observations>" in newest
        named = (await client.get_prompt("memory", {"thread_id": "t"})).messages[0].content.text
        assert named == newest

        with pytest.raises(MCPError, match="unknown thread 'nope'"):
            await client.get_prompt("remember", {"text": "x", "thread_id": "nope"})
        with pytest.raises(MCPError, match="resource_id"):
            await client.get_prompt("memory", {"resource_id": "r" * 300})  # the engine's words, naming the field
    await mem.close()


async def test_the_server_advertises_prompts_it_lists(tmp_path):
    mem = await Memory.open(config(), db_path=str(tmp_path / "om.db"), client=Script().model)
    async with connect(build_server(mem.config, mem)) as client:
        capabilities = client.server_capabilities
        assert capabilities.prompts is not None and (await client.list_prompts()).prompts
    await mem.close()
