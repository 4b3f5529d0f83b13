"""observation.manage_working_memory: the Observer keeps the working memory."""

import json

import pytest

from om_mcp.config import load_config
from om_mcp.engine import Memory
from om_mcp.testing import ScriptedModel
from support.backends import location

# Every test runs on SQLite and on PostgreSQL (support/backends.py).
pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("store_location")]

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
    await memory.append_messages("t", [{"role": "user", "content": "I moved to Porto"}, {"role": "assistant", "content": "Nice"}])
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
