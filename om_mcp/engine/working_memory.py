"""Working memory: the pure rules for the persistent scratchpad about a user or task.

Nothing here touches storage or MCP. The store loads the current value, calls
`apply_update`, and writes back `UpdateResult.value` only when `changed` is
true; the server calls `render_for_context` to build the block the agent sees.

Two modes, exactly one active (spec WM-03):

* template: the value is Markdown and every update replaces it whole (WM-04);
* schema:   the value is a JSON object, updates are partial and deep-merged,
            and the result must satisfy the configured JSON Schema (WM-05/06).
"""

from __future__ import annotations

import copy
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

# Written as a checklist of facts worth keeping across conversations; the agent
# fills in the blanks and may add lines under each field.
DEFAULT_TEMPLATE = """# About the User
- First name:
- Last name:
- Location:
- Occupation:
- Interests:
- Goals:
- Important events:
- Facts:
- Projects:"""

# Large enough for a detailed profile, small enough that one runaway write
# cannot flood every later context window.
DEFAULT_MAX_CHARS = 40_000

UPDATE_TOOL = "update_working_memory"

# Tool errors name this field because it is the argument the agent passed.
MEMORY_FIELD = "memory"

# How many schema violations to list in one error; more only adds noise.
_MAX_REPORTED_ERRORS = 5


class WorkingMemoryConfig(BaseModel):
    """The `[working_memory]` section of the config file."""

    # Unknown keys fail loudly so a typo such as `read_onyl` names itself
    # instead of silently leaving the default in place.
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    enabled: bool = True
    scope: Literal["resource", "thread"] = Field(
        default="resource",
        description="resource: one memory shared by all threads of a resource; "
        "thread: one memory per thread.",
    )
    template: str | None = Field(
        default=None, description="Markdown template; selects template mode."
    )
    # Named `schema_` because BaseModel already has a `schema` attribute; the
    # config file and callers still use the plain key `schema`.
    schema_: dict | None = Field(
        default=None,
        alias="schema",
        description="JSON Schema (type object); selects schema mode.",
    )
    read_only: bool = Field(
        default=False,
        description="The agent sees the memory but may not change it.",
    )

    @field_validator("template")
    @classmethod
    def _template_not_blank(cls, value: str | None) -> str | None:
        # A blank template would make every value look "empty" and give the
        # agent nothing to fill in; better to say so at startup.
        if value is not None and not value.strip():
            raise ValueError("working_memory.template must not be blank")
        return value

    @field_validator("schema_")
    @classmethod
    def _schema_is_object_schema(cls, value: dict | None) -> dict | None:
        if value is None:
            return value
        from jsonschema.exceptions import SchemaError

        try:
            _validator_class(value).check_schema(value)
        except SchemaError as exc:
            raise ValueError(
                f"working_memory.schema is not a valid JSON Schema: {exc.message}"
            ) from None
        declared = value.get("type")
        types = declared if isinstance(declared, list) else [declared]
        # Stored values are merged key by key, so the top level must be an object.
        if "object" not in types:
            raise ValueError('working_memory.schema must have "type": "object"')
        return value

    @model_validator(mode="after")
    def _one_mode_only(self) -> WorkingMemoryConfig:
        if self.template is not None and self.schema_ is not None:
            raise ValueError(
                "working_memory.template and working_memory.schema are both set; "
                "choose one"
            )
        return self

    @property
    def mode(self) -> Literal["template", "schema"]:
        return "schema" if self.schema_ is not None else "template"

    @property
    def effective_template(self) -> str | None:
        """The template in force; None in schema mode."""
        if self.mode == "schema":
            return None
        return self.template if self.template is not None else DEFAULT_TEMPLATE


class WorkingMemoryError(ValueError):
    """A rejected update. `field` names the offending tool argument."""

    def __init__(self, message: str, field: str = MEMORY_FIELD) -> None:
        super().__init__(message)
        self.field = field


class UpdateResult(BaseModel):
    """What an update produced. Persist `value` only when `changed` is true."""

    model_config = ConfigDict(frozen=True)

    value: str | dict
    changed: bool
    notice: str | None = Field(
        default=None, description="Something the agent should be told, e.g. a skipped write."
    )


def initial_value(config: WorkingMemoryConfig) -> str | dict:
    """The value a fresh memory starts from."""
    if config.mode == "schema":
        return {}
    return config.effective_template


def apply_update(
    config: WorkingMemoryConfig,
    current: str | dict | None,
    update: Any,
    max_chars: int = DEFAULT_MAX_CHARS,
) -> UpdateResult:
    """Apply one update to the current value and return the new value.

    Raises WorkingMemoryError when the update is refused; `current` is never
    modified in place, so a refused update changes nothing.
    """
    # Per spec WM-11 writes are rejected, not just hidden, in read-only mode;
    # checking here covers every caller, not only the MCP tool.
    if config.read_only:
        raise WorkingMemoryError("working memory is read-only; updates are not allowed")
    if not config.enabled:
        raise WorkingMemoryError("working memory is disabled")
    if config.mode == "schema":
        return _apply_schema_update(config, current, update, max_chars)
    return _apply_template_update(config, current, update, max_chars)


# --- template mode ----------------------------------------------------------


def _apply_template_update(
    config: WorkingMemoryConfig, current: str | dict | None, update: Any, max_chars: int
) -> UpdateResult:
    if not isinstance(update, str):
        raise WorkingMemoryError(
            f"{MEMORY_FIELD}: expected the complete Markdown as a string, "
            f"got {_json_type_name(update)}"
        )
    if len(update) > max_chars:
        raise WorkingMemoryError(
            f"{MEMORY_FIELD}: update is {len(update)} characters; the limit is {max_chars}"
        )
    template = config.effective_template
    # Models often "reset" by echoing the blank template; with replace
    # semantics that would wipe everything learned so far, so refuse it.
    if _same_text(update, template) and _has_real_content(current, template):
        return UpdateResult(
            value=current,
            changed=False,
            notice="Update skipped: it is the empty template and would erase the "
            "stored working memory. Send the full Markdown including the existing facts.",
        )
    new_value = update.rstrip()
    return UpdateResult(value=new_value, changed=new_value != current)


def _normalise_whitespace(text: str) -> str:
    # Spacing and line-ending differences should not make two texts distinct.
    return " ".join(text.split())


def _same_text(a: str, b: str) -> bool:
    return _normalise_whitespace(a) == _normalise_whitespace(b)


def _has_real_content(value: str | dict | None, template: str) -> bool:
    if isinstance(value, dict):
        return bool(value)
    if not isinstance(value, str) or not value.strip():
        return False
    return not _same_text(value, template)


# --- schema mode ------------------------------------------------------------


def _apply_schema_update(
    config: WorkingMemoryConfig, current: str | dict | None, update: Any, max_chars: int
) -> UpdateResult:
    schema = config.schema_
    base, notice = _current_object(current)
    patch = _parse_object_update(update, schema)
    if not patch:
        # Nothing to change; even a stored value that cannot be merged into is
        # left alone until a real update arrives.
        return UpdateResult(value=base, changed=False)

    merged = deep_merge(base, patch)
    _validate_against_schema(merged, schema)
    size = len(json.dumps(merged, ensure_ascii=False))
    if size > max_chars:
        raise WorkingMemoryError(
            f"{MEMORY_FIELD}: result would be {size} characters of JSON; "
            f"the limit is {max_chars}"
        )
    return UpdateResult(value=merged, changed=merged != base or notice is not None, notice=notice)


def _current_object(current: str | dict | None) -> tuple[dict, str | None]:
    """The stored value as a fresh dict, plus a notice if it had to be discarded."""
    if current is None:
        return {}, None
    if isinstance(current, dict):
        return copy.deepcopy(current), None
    if isinstance(current, str):
        if not current.strip():
            return {}, None
        try:
            parsed = json.loads(current)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            return parsed, None
    # Left over from template mode (or damaged); it cannot be merged into.
    return {}, "The stored working memory was not a JSON object and has been replaced."


def _parse_object_update(update: Any, schema: dict) -> dict:
    """Accept a dict or JSON text of one; unwrap a stray {"memory": {...}}."""
    if update is None or (isinstance(update, str) and not update.strip()):
        return {}
    patch = _as_object(update)
    properties = schema.get("properties") or {}
    # Some models nest the payload under the tool's argument name. If the
    # schema itself has no "memory" key, that wrapper cannot be real data.
    if set(patch) == {MEMORY_FIELD} and MEMORY_FIELD not in properties:
        inner = patch[MEMORY_FIELD]
        if isinstance(inner, dict) or (isinstance(inner, str) and inner.strip().startswith("{")):
            patch = _as_object(inner)
    return patch


def _as_object(update: Any) -> dict:
    if isinstance(update, str):
        try:
            update = json.loads(update)
        except ValueError as exc:
            raise WorkingMemoryError(f"{MEMORY_FIELD}: not valid JSON ({exc})") from None
    if not isinstance(update, dict):
        raise WorkingMemoryError(
            f"{MEMORY_FIELD}: expected a JSON object, got {_json_type_name(update)}"
        )
    return update


def deep_merge(base: dict, patch: dict) -> dict:
    """Merge `patch` into a copy of `base`.

    Objects merge key by key, null deletes a key, arrays and primitives
    replace, keys absent from the patch are kept. A null for a key that does
    not exist simply drops out; this is also what makes the nulls strict
    providers send for unset optional fields harmless, at any depth.
    """
    result = copy.deepcopy(base)
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            existing = result.get(key)
            result[key] = deep_merge(existing if isinstance(existing, dict) else {}, value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def _validator_class(schema: dict) -> type:
    # Imported here: jsonschema costs ~0.2 s, and start-up must stay quick.
    import jsonschema

    # Honour an explicit $schema; otherwise use the current draft.
    return jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)


def _validate_against_schema(value: dict, schema: dict) -> None:
    cls = _validator_class(schema)
    validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
    errors = sorted(validator.iter_errors(value), key=lambda e: [str(p) for p in e.absolute_path])
    if not errors:
        return
    lines = [f"{_path_label(e.absolute_path)}: {e.message}" for e in errors[:_MAX_REPORTED_ERRORS]]
    if len(errors) > _MAX_REPORTED_ERRORS:
        lines.append(f"... and {len(errors) - _MAX_REPORTED_ERRORS} more")
    raise WorkingMemoryError("; ".join(lines))


def _path_label(path: Any) -> str:
    # Paths start at the tool argument so the agent can find the bad value.
    label = MEMORY_FIELD
    for part in path:
        label += f"[{part}]" if isinstance(part, int) else f".{part}"
    return label


def _json_type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, str):
        return "string"
    return type(value).__name__


# --- reading ----------------------------------------------------------------


def is_empty(config: WorkingMemoryConfig, value: str | dict | None) -> bool:
    """True when nothing has been learned yet (missing, blank, or the bare template)."""
    if config.mode == "schema":
        obj, _ = _current_object(value)
        return not obj
    if isinstance(value, dict):
        return not value
    return not _has_real_content(value, config.effective_template)


def render_for_context(
    config: WorkingMemoryConfig, value: str | dict | None, tool_name: str = UPDATE_TOOL
) -> str:
    """The instruction block placed in the agent's context. Empty when disabled.

    `tool_name` exists because state-signal delivery (WM-13) names the tool
    set_working_memory.
    """
    if not config.enabled:
        return ""
    if config.mode == "schema":
        return _render_schema(config, value, tool_name)
    return _render_template(config, value, tool_name)


_INTRO = (
    "Below is your working memory: a persistent record of what you know about "
    "the user and the task at hand. It survives across conversations, so treat "
    "it as your notes and rely on it instead of asking again for things it already holds."
)

_READ_ONLY = (
    "This working memory is read-only for you. Use it, but do not try to change it."
)

_TEMPLATE_HOW = (
    "When you learn something worth keeping, call the `{tool}` tool with "
    "the complete updated Markdown. Each call replaces the whole memory, so "
    "always include the facts that are already there, not just the new ones."
)

_SCHEMA_HOW = (
    "When you learn something worth keeping, call the `{tool}` tool with "
    "a JSON object holding only the fields that changed; it is merged into the "
    "stored data. Nested objects merge, arrays are replaced whole, and setting "
    "a field to null deletes it. The result must match the schema below."
)


def _render_template(
    config: WorkingMemoryConfig, value: str | dict | None, tool_name: str
) -> str:
    how = _READ_ONLY if config.read_only else _TEMPLATE_HOW.format(tool=tool_name)
    if isinstance(value, dict):
        data = json.dumps(value, indent=2, ensure_ascii=False)
    else:
        data = value if value and value.strip() else config.effective_template
    return "\n\n".join(
        [
            _INTRO,
            how,
            f"Template:\n<template>\n{config.effective_template}\n</template>",
            f"<working_memory>\n{data.rstrip()}\n</working_memory>",
        ]
    )


def _render_schema(
    config: WorkingMemoryConfig, value: str | dict | None, tool_name: str
) -> str:
    how = _READ_ONLY if config.read_only else _SCHEMA_HOW.format(tool=tool_name)
    obj, _ = _current_object(value)
    schema_text = json.dumps(config.schema_, indent=2, ensure_ascii=False)
    data = json.dumps(obj, indent=2, ensure_ascii=False)
    return "\n\n".join(
        [
            _INTRO,
            how,
            f"Schema:\n<schema>\n{schema_text}\n</schema>",
            f"<working_memory>\n{data}\n</working_memory>",
        ]
    )
