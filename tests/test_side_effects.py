"""observation.manage_working_memory: the Observer keeps the working memory."""

import json

import pytest
from support.backends import location

from om_mcp.config import load_config
from om_mcp.engine import Memory
from om_mcp.testing import ScriptedModel

# On SQLite: what the engine relies on of each backend is tests/test_store_conformance.py's.
pytestmark = pytest.mark.anyio

LOG = "<observations>\nDate: Jan 1, 2026\n* 🔴 (10:00) user lives in Porto\n</observations>\n"


def _env(**extra: str) -> dict[str, str]:
    return {
        "OM_OBSERVATIONAL_MEMORY__OBSERVATION__MANAGE_WORKING_MEMORY": "true",
        "OM_OBSERVATIONAL_MEMORY__OBSERVATION__BUFFER_TOKENS": "false",
        "OM_OBSERVATIONAL_MEMORY__SCOPE": "thread",
        "OM_MODEL": "default",
        **extra,
    }


async def _observe(config, reply: str) -> tuple[Memory, list]:
    prompts = []
    replies = [reply]

    def respond(messages, target):
        prompts.append(messages[0]["content"])
        return replies[-1]

    memory = await Memory.open(config, db_path=location(), client=ScriptedModel(respond))
    await memory.append_messages(
        "t", [{"role": "user", "content": "I moved to Porto"}, {"role": "assistant", "content": "Nice"}]
    )
    assert (await memory.observe("t")).ran
    memory.replies = replies  # a test can queue the next reply
    return memory, prompts


async def test_template_mode_replaces_the_note():
    memory, prompts = await _observe(
        load_config(env=_env()), LOG + "<working-memory>\n# About the User\n- Location: Porto\n</working-memory>"
    )
    try:
        assert "<working-memory>" in prompts[0]
        assert (await memory.get_working_memory("t")).memory == "# About the User\n- Location: Porto"
        # the value is working memory, not an extracted value stored twice
        assert "working-memory" not in (await memory.observations("t"))["extracted"]
    finally:
        await memory.close()


async def test_schema_mode_merges_and_a_bad_update_changes_nothing():
    schema = {"type": "object", "properties": {"city": {"type": "string"}, "age": {"type": "integer"}}}
    env = _env(OM_WORKING_MEMORY__SCHEMA=json.dumps(schema))
    memory, prompts = await _observe(load_config(env=env), LOG + '<working-memory>{"city": "Porto"}</working-memory>')
    try:
        assert '"city"' in prompts[0]
        assert (await memory.get_working_memory("t")).memory == {"city": "Porto"}
        await memory.append_messages("t", [{"role": "user", "content": "more"}, {"role": "assistant", "content": "ok"}])
        memory.replies.append(LOG + '<working-memory>{"age": "old"}</working-memory>')
        await memory.observe("t")
        assert (await memory.get_working_memory("t")).memory == {"city": "Porto"}
    finally:
        await memory.close()


async def test_off_by_default_no_tag_requested():
    memory, prompts = await _observe(
        load_config(env={"OM_OBSERVATIONAL_MEMORY__OBSERVATION__BUFFER_TOKENS": "false"}),
        LOG + "<working-memory>\n- Location: Porto\n</working-memory>",
    )
    try:
        assert "<working-memory>" not in prompts[0]
        assert "Porto" not in str((await memory.get_working_memory("t")).memory)
    finally:
        await memory.close()


async def test_an_extractor_with_its_own_metadata_key_path(tmp_path):
    config_file = tmp_path / "om.toml"
    config_file.write_text(
        "[observational_memory.observation]\nbuffer_tokens = false\n"
        "[[observational_memory.observation.extract]]\n"
        'name = "Mood"\ninstructions = "the user\'s mood"\nmetadata_key_path = "profile.mood"\n'
    )
    memory, prompts = await _observe(load_config(config_file, env={}), LOG + "<mood>cheerful</mood>")
    try:
        assert "<mood>" in prompts[0]
        thread = await memory.store.get_thread("t")
        assert thread.metadata["om"]["profile"]["mood"] == "cheerful"
        assert (await memory.observations("t"))["extracted"]["mood"] == "cheerful"
    finally:
        await memory.close()


async def test_resource_scope_with_buffering_writes_every_side_effect():
    """Parity: in resource scope, through buffering and activation, each thread gets its title and extracted
    value, the Observer keeps the resource's working memory, and no message is lost or observed twice."""
    import re

    import anyio

    def respond(messages, target):
        blocks = re.findall(r'<thread id="([^"]+)">(.*?)</thread>', messages[-1]["content"], re.S)
        sections = "\n".join(
            f'<thread id="{label}">\n* 🔴 (10:00) planning a trip; seen {" ".join(re.findall(r"[ab][0-9]+[ua]", body))}'
            f"\n<thread-title>Trip {label}</thread-title>\n<mood>eager</mood>\n</thread>"
            for label, body in blocks
        )
        return (
            f"<observations>\nDate: Jan 1, 2026\n{sections}\n</observations>\n"
            "<working-memory>\n# About the User\n- Goals: a trip to Porto\n</working-memory>"
        )

    env = {
        "OM_OBSERVATIONAL_MEMORY__SCOPE": "resource",
        "OM_OBSERVATIONAL_MEMORY__OBSERVATION__MESSAGE_TOKENS": "300",
        "OM_OBSERVATIONAL_MEMORY__OBSERVATION__THREAD_TITLE": "true",
        "OM_OBSERVATIONAL_MEMORY__OBSERVATION__MANAGE_WORKING_MEMORY": "true",
        "OM_OBSERVATIONAL_MEMORY__OBSERVATION__EXTRACT": '[{"name": "mood", "instructions": "one word",'
        ' "metadata_key_path": "profile.mood"}]',
        "OM_MODEL": "default",
    }
    config = load_config(env=env)
    memory = await Memory.open(config, db_path=":memory:", client=ScriptedModel(respond))
    words = "we compare trains and flights to Porto for the spring " * 3
    async with memory.running():
        for turn in range(12):
            for thread in ("a", "b"):
                await memory.append_messages(
                    thread,
                    [
                        {"id": f"{thread}{turn}u", "role": "user", "content": f"{thread}{turn}u: {words}"},
                        {"id": f"{thread}{turn}a", "role": "assistant", "content": f"{thread}{turn}a: noted"},
                    ],
                )
                await memory.get_context(thread)
            await anyio.sleep(0.01)
    try:
        types = {e.type for t in ("a", "b") for e in await memory.store.events(thread_id=t, limit=1000)}
        assert {"data-om-buffering-end", "data-om-activation"} <= types  # the buffered path ran
        for thread in ("a", "b"):
            stored = await memory.store.get_thread(thread)
            assert stored.title and stored.title.startswith("Trip ")
            assert stored.metadata["om"]["profile"]["mood"] == "eager"  # the thread's own copy
        assert (await memory.observations("a"))["extracted"]["mood"] == "eager"  # the record's
        assert "Porto" in (await memory.get_working_memory("a")).memory
        # every message is either observed once or still raw: the recorded ids cover the rest exactly
        log = "\n".join(g.text for g in await memory.store.groups("resource:default"))
        raw = {m.id for t in ("a", "b") for m in await memory.store.unobserved("resource:default", t)}
        seen = set(re.findall(r"\b[ab]\d+[ua]\b", log))
        every = {f"{t}{n}{r}" for t in ("a", "b") for n in range(12) for r in "ua"}
        assert seen | raw == every and not seen & raw
    finally:
        await memory.close()
