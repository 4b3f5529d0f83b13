"""Working memory: the config section's checks and the pure update, merge and render rules."""

import json

import pytest
from pydantic import ValidationError

from om_mcp.config.working_memory import DEFAULT_MAX_CHARS, DEFAULT_TEMPLATE, WorkingMemoryConfig, schema_validator
from om_mcp.engine.prompts import agent
from om_mcp.engine.working_memory import (
    MEMORY_FIELD,
    UPDATE_TOOL,
    UpdateResult,
    WorkingMemoryError,
    apply_update,
    deep_merge,
    initial_value,
    is_empty,
    render_for_context,
)

PROFILE_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "preferences": {"type": "object", "properties": {"theme": {"type": "integer"}, "language": {"type": "string"}}},
    },
}


def template_config(**kwargs) -> WorkingMemoryConfig:
    return WorkingMemoryConfig(**kwargs)


def schema_config(**kwargs) -> WorkingMemoryConfig:
    return WorkingMemoryConfig(schema=PROFILE_SCHEMA, **kwargs)


# --- config -----------------------------------------------------------------


def test_defaults_select_template_mode_with_default_template():
    config = WorkingMemoryConfig()
    assert config.mode == "template"
    assert config.scope == "resource"
    assert config.effective_template == DEFAULT_TEMPLATE
    assert initial_value(config) == DEFAULT_TEMPLATE


def test_default_template_covers_the_profile_fields():
    lowered = DEFAULT_TEMPLATE.lower()
    assert DEFAULT_TEMPLATE.startswith("#")
    for field in ("name", "location", "occupation", "interests", "goals", "events", "facts", "projects"):
        assert field in lowered


def test_custom_template_is_used():
    config = template_config(template="# Task\n- Status:")
    assert config.effective_template == "# Task\n- Status:"


def test_schema_selects_schema_mode_by_alias_or_name():
    assert schema_config().mode == "schema"
    assert WorkingMemoryConfig(schema_=PROFILE_SCHEMA).mode == "schema"
    assert schema_config().effective_template is None
    assert initial_value(schema_config()) == {}


def test_template_and_schema_together_is_an_error_naming_both():
    with pytest.raises(ValidationError) as info:
        WorkingMemoryConfig(template="# T", schema=PROFILE_SCHEMA)
    text = str(info.value)
    assert "working_memory.template" in text
    assert "working_memory.schema" in text


def test_invalid_json_schema_is_rejected():
    with pytest.raises(ValidationError) as info:
        WorkingMemoryConfig(schema={"type": "object", "properties": {"a": {"type": "nonsense"}}})
    assert "working_memory.schema" in str(info.value)


def test_schema_must_describe_an_object():
    with pytest.raises(ValidationError) as info:
        WorkingMemoryConfig(schema={"type": "array"})
    assert "working_memory.schema" in str(info.value)


def test_unknown_key_is_rejected_by_name():
    with pytest.raises(ValidationError) as info:
        WorkingMemoryConfig.model_validate({"enabled": True, "read_onyl": True})
    assert "read_onyl" in str(info.value)


def test_blank_template_is_rejected():
    with pytest.raises(ValidationError) as info:
        WorkingMemoryConfig(template="  \n")
    assert "working_memory.template" in str(info.value)


# --- template mode ----------------------------------------------------------


def test_template_update_replaces_the_whole_value():
    config = template_config()
    result = apply_update(config, "# About the User\n- First name: Ana", "# Notes\n- Likes tea\n\n")
    assert result == UpdateResult(value="# Notes\n- Likes tea", changed=True, notice=None)


def test_identical_template_update_is_unchanged():
    result = apply_update(template_config(), "# Notes", "# Notes\n")
    assert result.value == "# Notes"
    assert result.changed is False


def test_bare_template_does_not_overwrite_real_content():
    config = template_config()
    stored = DEFAULT_TEMPLATE.replace("First name:", "First name: Ana")
    # Extra spaces and newlines still count as the bare template.
    echoed = "\n\n" + DEFAULT_TEMPLATE.replace("\n", "\n  ") + "   \n"
    result = apply_update(config, stored, echoed)
    assert result.changed is False
    assert result.value == stored
    assert result.notice and "erase" in result.notice


@pytest.mark.parametrize("current", [None, "", "   ", DEFAULT_TEMPLATE])
def test_bare_template_is_allowed_when_nothing_is_stored(current):
    result = apply_update(template_config(), current, DEFAULT_TEMPLATE)
    assert result.value == DEFAULT_TEMPLATE
    assert result.notice is None


@pytest.mark.parametrize("update", [{"name": "Ana"}, None, 42, ["a"]])
def test_template_mode_rejects_non_strings_naming_memory(update):
    with pytest.raises(WorkingMemoryError) as info:
        apply_update(template_config(), DEFAULT_TEMPLATE, update)
    assert info.value.field == "memory"
    assert "memory" in str(info.value)


def test_template_update_over_the_size_cap_is_rejected():
    with pytest.raises(WorkingMemoryError) as info:
        apply_update(template_config(), None, "x" * 101, max_chars=100)
    assert info.value.field == "memory"
    assert "100" in str(info.value)
    assert apply_update(template_config(), None, "x" * 100, max_chars=100).changed


def test_read_only_rejects_writes():
    with pytest.raises(WorkingMemoryError) as info:
        apply_update(template_config(read_only=True), None, "# Notes")
    assert "read-only" in str(info.value)


# --- schema mode: merging ---------------------------------------------------


def test_nested_objects_merge():
    current = {"name": "Ana", "preferences": {"theme": 1, "language": "en"}}
    result = apply_update(schema_config(), current, {"preferences": {"theme": 2}})
    assert result.value == {"name": "Ana", "preferences": {"theme": 2, "language": "en"}}
    assert result.changed is True
    # The caller's value is untouched.
    assert current["preferences"]["theme"] == 1


def test_null_deletes_a_key():
    current = {"name": "Ana", "age": 30, "preferences": {"theme": 1, "language": "en"}}
    result = apply_update(schema_config(), current, {"age": None, "preferences": {"language": None}})
    assert result.value == {"name": "Ana", "preferences": {"theme": 1}}


def test_null_inside_a_new_branch_leaves_the_key_out():
    result = apply_update(schema_config(), {"name": "Ana"}, {"preferences": {"theme": 3, "language": None}})
    assert result.value == {"name": "Ana", "preferences": {"theme": 3}}


def test_nulls_for_absent_optional_fields_are_ignored():
    # Strict providers send every optional field; null on a missing key is harmless
    # even though "age" must be an integer.
    result = apply_update(schema_config(), {}, {"name": "Ana", "age": None, "tags": None})
    assert result.value == {"name": "Ana"}


def test_arrays_replace_wholesale():
    result = apply_update(schema_config(), {"tags": ["a", "b", "c"]}, {"tags": ["z"]})
    assert result.value == {"tags": ["z"]}


def test_primitives_overwrite_and_omitted_keys_are_kept():
    result = apply_update(schema_config(), {"name": "Ana", "age": 30}, {"age": 31})
    assert result.value == {"name": "Ana", "age": 31}


@pytest.mark.parametrize("update", [{}, None, "", "{}"])
def test_empty_update_is_a_no_op(update):
    current = {"name": "Ana"}
    result = apply_update(schema_config(), current, update)
    assert result.value == current
    assert result.changed is False


def test_same_values_report_unchanged():
    result = apply_update(schema_config(), {"name": "Ana"}, {"name": "Ana"})
    assert result.changed is False


def test_deep_merge_replaces_a_primitive_with_an_object():
    assert deep_merge({"a": 1}, {"a": {"b": 2}}) == {"a": {"b": 2}}


# --- schema mode: lenient input ---------------------------------------------


def test_wrapped_payload_is_unwrapped():
    result = apply_update(schema_config(), {"name": "Ana"}, {"memory": {"age": 30}})
    assert result.value == {"name": "Ana", "age": 30}


def test_wrapper_is_kept_when_schema_has_a_memory_property():
    schema = {"type": "object", "properties": {"memory": {"type": "object"}}}
    config = WorkingMemoryConfig(schema=schema)
    result = apply_update(config, {}, {"memory": {"x": 1}})
    assert result.value == {"memory": {"x": 1}}


def test_json_string_update_is_accepted():
    result = apply_update(schema_config(), {"name": "Ana"}, json.dumps({"age": 30}))
    assert result.value == {"name": "Ana", "age": 30}


def test_stored_json_string_is_merged_into():
    result = apply_update(schema_config(), '{"name": "Ana"}', {"age": 30})
    assert result.value == {"name": "Ana", "age": 30}


@pytest.mark.parametrize("update", ["not json", "[1, 2]", 5, ["a"]])
def test_non_object_updates_are_rejected_naming_memory(update):
    with pytest.raises(WorkingMemoryError) as info:
        apply_update(schema_config(), {}, update)
    assert info.value.field == "memory"
    assert str(info.value).startswith("memory")


def test_a_stored_value_that_is_not_an_object_is_replaced_with_a_notice():
    result = apply_update(schema_config(), "# Notes left from template mode", {"name": "Ana"})
    assert result.value == {"name": "Ana"}
    assert result.changed is True
    assert result.notice and "replaced" in result.notice
    # With nothing to change, the stored value is left alone.
    assert apply_update(schema_config(), "# Notes", {}).changed is False


# --- schema mode: validation ------------------------------------------------


def test_schema_violation_names_the_path_and_changes_nothing():
    current = {"name": "Ana", "preferences": {"theme": 1}}
    snapshot = json.loads(json.dumps(current))
    with pytest.raises(WorkingMemoryError) as info:
        apply_update(schema_config(), current, {"name": "Bo", "preferences": {"theme": "x"}})
    assert "memory.preferences.theme: 'x' is not of type 'integer'" in str(info.value)
    assert info.value.field == "memory"
    assert current == snapshot


def test_array_item_violation_uses_an_index():
    with pytest.raises(WorkingMemoryError) as info:
        apply_update(schema_config(), {}, {"tags": ["ok", 7]})
    assert "memory.tags[1]" in str(info.value)


def test_required_property_violation_is_reported_at_the_root():
    schema = {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}
    config = WorkingMemoryConfig(schema=schema)
    with pytest.raises(WorkingMemoryError) as info:
        apply_update(config, {"name": "Ana"}, {"name": None})
    assert "memory: 'name' is a required property" in str(info.value)


def test_schema_result_over_the_size_cap_is_rejected():
    with pytest.raises(WorkingMemoryError) as info:
        apply_update(schema_config(), {}, {"name": "x" * 200}, max_chars=100)
    assert info.value.field == "memory"


# --- reading ----------------------------------------------------------------


def test_is_empty():
    t = template_config()
    assert is_empty(t, None)
    assert is_empty(t, "  ")
    assert is_empty(t, DEFAULT_TEMPLATE + "\n\n")
    assert not is_empty(t, "# Notes\n- Likes tea")
    s = schema_config()
    assert is_empty(s, None)
    assert is_empty(s, {})
    assert is_empty(s, "{}")
    assert not is_empty(s, {"name": "Ana"})


def _shown(block: str) -> str:
    """The one working-memory body in a rendered block."""
    assert block.count("<working-memory>") == 1 and block.count("</working-memory>") == 1
    return block.split("<working-memory>\n", 1)[1].split("\n</working-memory>", 1)[0]


def test_render_template_mode_shows_the_note_once():
    block = render_for_context(template_config(), "# Notes\n- Likes tea\n")
    assert block.startswith(agent.WORKING_MEMORY_INTRO)
    assert "`update_working_memory`" in block
    assert "replaces the note" in block
    assert _shown(block) == "# Notes\n- Likes tea"
    assert block.endswith("</working-memory>")
    # The template is not repeated next to a stored note.
    assert "First name:" not in block
    assert "<schema>" not in block


@pytest.mark.parametrize("stored", [None, "", "  \n"])
def test_render_template_mode_without_data_shows_the_template(stored):
    block = render_for_context(template_config(), stored)
    assert _shown(block) == DEFAULT_TEMPLATE
    custom = render_for_context(template_config(template="# Task\n- Status:"), stored)
    assert _shown(custom) == "# Task\n- Status:"


def test_render_template_mode_is_short():
    # One intro line, one how-to line, then the block: nothing read every turn without need.
    block = render_for_context(template_config(), "# Notes")
    assert block.split("\n")[:2] == [
        agent.WORKING_MEMORY_INTRO,
        agent.WORKING_MEMORY_TEMPLATE_HOW.format(tool=UPDATE_TOOL),
    ]
    assert len(block.split("\n")) == 5


def test_render_schema_mode_is_compact_json():
    block = render_for_context(schema_config(), {"name": "Ana", "tags": ["a", "b"]})
    assert "`update_working_memory`" in block
    assert "null deletes" in block
    schema = block.split("<schema>", 1)[1].split("</schema>", 1)[0]
    assert schema == json.dumps(PROFILE_SCHEMA, separators=(",", ":"))
    assert json.loads(schema) == PROFILE_SCHEMA
    data = _shown(block)
    assert data == '{"name":"Ana","tags":["a","b"]}'
    assert block.index("<schema>") < block.index("<working-memory>")


@pytest.mark.parametrize("stored", [None, "", "not json", "[1]"])
def test_render_schema_mode_without_an_object_shows_an_empty_one(stored):
    assert _shown(render_for_context(schema_config(), stored)) == "{}"


def test_render_schema_mode_reads_a_stored_json_string():
    assert json.loads(_shown(render_for_context(schema_config(), '{"name": "Ana"}'))) == {"name": "Ana"}


def test_render_keeps_non_ascii_as_is():
    assert _shown(render_for_context(schema_config(), {"name": "Zoë"})) == '{"name":"Zoë"}'


@pytest.mark.parametrize("config", [template_config(read_only=True), schema_config(read_only=True)])
def test_render_read_only(config):
    block = render_for_context(config, None)
    assert "read-only" in block
    assert "update_working_memory" not in block
    assert "<working-memory>" in block


def test_render_can_name_another_tool():
    for config in (schema_config(), template_config()):
        block = render_for_context(config, {}, tool_name="set_working_memory")
        assert "`set_working_memory`" in block
        assert "update_working_memory" not in block


def test_render_disabled_is_empty():
    assert render_for_context(template_config(enabled=False), "# Notes") == ""
    assert render_for_context(schema_config(enabled=False), {"name": "Ana"}) == ""


# --- disabled ----------------------------------------------------------------


def test_disabled_rejects_writes():
    with pytest.raises(WorkingMemoryError) as info:
        apply_update(template_config(enabled=False), None, "# Notes")
    assert "disabled" in str(info.value)


def test_defaults_and_validator():
    assert MEMORY_FIELD == "memory"
    assert DEFAULT_MAX_CHARS == 40_000
    with pytest.raises(WorkingMemoryError):
        apply_update(template_config(), None, "x" * (DEFAULT_MAX_CHARS + 1))
    # An explicit $schema is honoured; without one the current draft applies.
    import jsonschema

    assert schema_validator({"type": "object"}) is jsonschema.Draft202012Validator
    draft7 = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"}
    assert schema_validator(draft7) is jsonschema.Draft7Validator
