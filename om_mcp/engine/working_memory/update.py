"""Working memory updates: the pure rules, no storage, no MCP.

The engine loads the stored value, calls `apply_update`, and writes back
`UpdateResult.value` only when `changed` is true, all inside one store
transaction so concurrent updates serialise.

* template mode: the value is Markdown and every update replaces it whole;
* schema mode: the value is a JSON object, updates are partial and deep-merged,
  and the result must satisfy the configured JSON Schema.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from om_mcp.config.working_memory import DEFAULT_MAX_CHARS, WorkingMemoryConfig, schema_validator

# Tool errors name this field because it is the argument the agent passed.
MEMORY_FIELD = "memory"

# How many schema violations to list in one error; more only adds noise.
_MAX_REPORTED_ERRORS = 5


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
    notice: str | None = Field(default=None, description="Something the agent should be told, e.g. a skipped write.")


def initial_value(config: WorkingMemoryConfig) -> str | dict:
    """The value a fresh memory starts from."""
    if config.mode == "schema":
        return {}
    return config.template_text


def apply_update(
    config: WorkingMemoryConfig, current: str | dict | None, update: Any, max_chars: int = DEFAULT_MAX_CHARS
) -> UpdateResult:
    """Apply one update to the current value and return the new value.

    Raises WorkingMemoryError when the update is refused; `current` is never
    modified in place, so a refused update changes nothing.
    """
    # In read-only mode writes are rejected, not just hidden;
    # checking here covers every caller, not only the MCP tool.
    if config.read_only:
        raise WorkingMemoryError("working memory is read-only; updates are not allowed")
    if not config.enabled:
        raise WorkingMemoryError("working memory is disabled")
    if (schema := config.schema_) is not None:  # schema mode
        return _apply_schema_update(schema, current, update, max_chars)
    return _apply_template_update(config, current, update, max_chars)


# --- template mode ----------------------------------------------------------


def _apply_template_update(
    config: WorkingMemoryConfig, current: str | dict | None, update: Any, max_chars: int
) -> UpdateResult:
    if not isinstance(update, str):
        raise WorkingMemoryError(
            f"{MEMORY_FIELD}: expected the complete Markdown as a string, got {_json_type_name(update)}"
        )
    if len(update) > max_chars:
        raise WorkingMemoryError(f"{MEMORY_FIELD}: update is {len(update)} characters; the limit is {max_chars}")
    template = config.template_text
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


def _apply_schema_update(schema: dict, current: str | dict | None, update: Any, max_chars: int) -> UpdateResult:
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
        raise WorkingMemoryError(f"{MEMORY_FIELD}: result would be {size} characters of JSON; the limit is {max_chars}")
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
        raise WorkingMemoryError(f"{MEMORY_FIELD}: expected a JSON object, got {_json_type_name(update)}")
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


def _validate_against_schema(value: dict, schema: dict) -> None:
    cls = schema_validator(schema)
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


def is_empty(config: WorkingMemoryConfig, value: str | dict | None) -> bool:
    """True when nothing has been learned yet (missing, blank, or the bare template)."""
    if config.mode == "schema":
        obj, _ = _current_object(value)
        return not obj
    if isinstance(value, dict):
        return not value
    return not _has_real_content(value, config.template_text)
