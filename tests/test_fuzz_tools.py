"""Every tool, fuzzed: hostile arguments always get an answer, and never an internal error.

Hypothesis drives one in-process MCP client (kept open across examples through a
blocking portal) with arguments built to hurt: lone surrogates, NUL and other control
characters, huge strings, deep nesting, wrong types, unknown arguments, random JSON in
every position. Most values are near-valid (known thread ids, real roles) so calls
get past the schema into the engine and the store. Each call must be answered within
a deadline (0 missing responses) and the answer must never be an internal failure:
no "failed inside om-mcp" text, no bare "Error executing tool", no JSON-RPC internal
error. Inputs are derandomized: every run tries the same examples.

test_fuzz_stdio.py sends hostile raw lines to a real `om-mcp serve` process.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.from_thread import start_blocking_portal
from hypothesis import HealthCheck, assume, given, settings
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR
from support.hostile import ARGUMENTS, calls, sendable
from support.mcp import connect
from support.timeouts import scaled

from om_mcp.config import Config
from om_mcp.engine import Memory
from om_mcp.server import build_server
from om_mcp.testing import ScriptedModel

EXAMPLES_PER_SETUP = 1000  # two setups: 2,000 calls
ANSWER_DEADLINE = 60.0  # seconds; far above any real call, it only catches a hang
INTERNAL = ("failed inside om-mcp", "Error executing tool")


def reply(messages: list[dict], target: Any) -> str:
    """Observer and Reflector both answer with a small valid log that quotes the input's first words."""
    words = " ".join(str(messages[-1].get("content", ""))[:80].split())
    return (
        f"<observations>\nDate: Mar 2, 2026\n* 🔴 (10:00) saw {words}\n</observations>\n"
        f"<current-task>{words}</current-task>"
    )


SETUPS = {
    # thread scope, template working memory, every cycle inline
    "thread": (
        {
            "scope": "thread",
            "observation": {"message_tokens": 150, "buffer_tokens": False},
            "reflection": {"observation_tokens": 400},
        },
        {},
        False,
    ),
    # resource scope, buffering with the background worker, schema working memory
    "resource": (
        {"scope": "resource", "observation": {"message_tokens": 300}, "reflection": {"observation_tokens": 600}},
        {
            "scope": "resource",
            "schema": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}}},
            },
        },
        True,
    ),
}


class Tally:
    def __init__(self) -> None:
        self.calls = Counter[str]()
        self.errors = Counter[str]()  # clear tool errors, by tool: fine
        self.internal: list[tuple[str, Any, str]] = []
        self.missing: list[tuple[str, Any]] = []


def answer(portal, client, name: str, arguments: Any, tally: Tally) -> None:
    async def one() -> Any:
        with anyio.fail_after(scaled(ANSWER_DEADLINE)):
            if name == "read":
                template, thread = arguments
                return await client.read_resource(template.format(thread))
            return await client.call_tool(name, arguments)

    tally.calls[name] += 1
    try:
        result = portal.call(one)
    except TimeoutError:
        tally.missing.append((name, arguments))
        return
    except MCPError as error:
        if error.error.code == INTERNAL_ERROR:
            tally.internal.append((name, arguments, f"JSON-RPC {error.error.code}: {error.error.message}"))
        else:
            tally.errors[name] += 1
        return
    if name == "read":
        return
    text = result.content[0].text if result.content else ""
    if any(marker in text for marker in INTERNAL):
        tally.internal.append((name, arguments, text))
    elif result.is_error:
        tally.errors[name] += 1
        assert text and "\n" not in text, f"{name}: a tool error is one line: {text!r}"


@pytest.mark.parametrize("setup", sorted(SETUPS))
@pytest.mark.slow
def test_hostile_arguments_to_every_tool_get_a_clear_answer(tmp_path: Path, setup: str) -> None:
    om, working_memory, background = SETUPS[setup]
    config = Config.model_validate(
        {"db_path": str(tmp_path / "om.db"), "observational_memory": om, "working_memory": working_memory}
    )
    tally = Tally()
    with start_blocking_portal() as portal:
        memory = portal.call(lambda: Memory.open(config, client=ScriptedModel(reply)))
        try:
            with (
                portal.wrap_async_context_manager(memory.running() if background else _idle(memory)),
                portal.wrap_async_context_manager(connect(build_server(config, memory))) as client,
            ):

                @settings(
                    max_examples=EXAMPLES_PER_SETUP,
                    deadline=None,
                    derandomize=True,
                    database=None,
                    suppress_health_check=list(HealthCheck),
                )
                @given(calls)
                def fuzz(call: tuple[str, Any]) -> None:
                    name, arguments = call
                    assume(sendable(arguments))
                    answer(portal, client, name, arguments, tally)

                fuzz()
        finally:
            portal.call(memory.close)
    assert not tally.missing, f"{len(tally.missing)} calls got no answer, first: {tally.missing[0]}"
    assert not tally.internal, f"{len(tally.internal)} internal errors, first: {tally.internal[0]}"
    # The fuzz reached every tool, and not only to be refused.
    assert set(tally.calls) == {*ARGUMENTS, "read"}, tally.calls
    assert sum(tally.calls.values()) >= EXAMPLES_PER_SETUP * 0.9
    succeeded = {name for name in ARGUMENTS if tally.calls[name] > tally.errors[name]}
    assert succeeded == set(ARGUMENTS), f"never succeeded: {set(ARGUMENTS) - succeeded}"


class _idle:
    """No background worker: every cycle runs inline in the call that makes it due."""

    def __init__(self, memory: Memory) -> None:
        self.memory = memory

    async def __aenter__(self) -> Memory:
        return self.memory

    async def __aexit__(self, *exc: object) -> None:
        return None


BAD_TEXT = [
    ("update_working_memory", {"thread_id": "t", "memory": "notes\x00hidden"}, "memory contains a NUL character"),
    ("update_working_memory", {"thread_id": "t", "memory": "lone \ud800"}, "memory contains invalid Unicode"),
    ("update_thread", {"thread_id": "t", "title": "two\nlines"}, "title must be one line of text"),
    ("update_thread", {"thread_id": "t", "title": "nul\x00"}, "title must be one line of text"),
    ("update_thread", {"thread_id": "t", "metadata": {"note": "a\x00b"}}, "metadata.note contains a NUL character"),
    ("update_thread", {"thread_id": "t", "metadata": {"k\x00": 1}}, "metadata contains a NUL character"),
    ("update_thread", {"thread_id": "t", "metadata": {"big": "x" * 20_000}}, "metadata is 20011 characters of JSON"),
    (
        "append_messages",
        {"thread_id": "t", "user": "x", "thread_metadata": {"title": "a\rb"}},
        "thread_metadata.title must be one line of text",
    ),
    (
        "append_messages",
        {"thread_id": "t", "messages": [{"role": "user", "content": "x", "metadata": {"k": "\x00"}}]},
        "messages[0].metadata.k contains a NUL character",
    ),
    ("append_messages", {"thread_id": "t\x00", "user": "x"}, "thread_id contains control characters"),
]


@pytest.mark.anyio
@pytest.mark.parametrize("tool, arguments, says", BAD_TEXT, ids=[f"{t}-{i}" for i, (t, _, _) in enumerate(BAD_TEXT)])
async def test_bad_text_in_ids_titles_metadata_and_working_memory_is_refused_by_name(server, tool, arguments, says):
    async with connect(server) as client:
        await client.call_tool("append_messages", {"thread_id": "t", "user": "hello"})
        before = (await client.read_resource("om://threads/t/status")).contents[0].text
        result = await client.call_tool(tool, arguments)
        after = (await client.read_resource("om://threads/t/status")).contents[0].text
        threads = (await client.read_resource("om://resources/default/threads")).contents[0].text
    assert result.is_error and says in result.content[0].text, result.content[0].text
    assert after == before and "\\u0000" not in threads  # nothing changed
