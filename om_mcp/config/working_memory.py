"""The `[working_memory]` section: a persistent scratchpad about a user or task.

The rules for applying updates live in `om_mcp.engine.working_memory`. Two modes, exactly one active
(setting both is an error; with neither, the default template applies):

* template: the value is Markdown and every update replaces it whole
            (an update equal to the empty template never overwrites real data);
* schema:   the value is a JSON object, updates are partial and deep-merged,
            and the result must satisfy the configured JSON Schema
            (nulls a strict provider sends for optional fields are stripped first).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

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


class WorkingMemoryConfig(BaseModel):
    """The `[working_memory]` section of the config file."""

    # Unknown keys fail loudly so a typo such as `read_onyl` names itself
    # instead of silently leaving the default in place.
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    enabled: bool = True
    scope: Literal["resource", "thread"] = Field(
        default="resource",
        description="resource: one memory shared by all threads of a resource; thread: one memory per thread.",
    )
    template: str | None = Field(default=None, description="Markdown template; selects template mode.")
    # Named `schema_` because BaseModel already has a `schema` attribute; the
    # config file and callers still use the plain key `schema`.
    schema_: dict | None = Field(
        default=None, alias="schema", description="JSON Schema (type object); selects schema mode."
    )
    read_only: bool = Field(default=False, description="The agent sees the memory but may not change it.")

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
            schema_validator(value).check_schema(value)
        except SchemaError as exc:
            raise ValueError(f"working_memory.schema is not a valid JSON Schema: {exc.message}") from None
        declared = value.get("type")
        types = declared if isinstance(declared, list) else [declared]
        # Stored values are merged key by key, so the top level must be an object.
        if "object" not in types:
            raise ValueError('working_memory.schema must have "type": "object"')
        return value

    @model_validator(mode="after")
    def _one_mode_only(self) -> WorkingMemoryConfig:
        if self.template is not None and self.schema_ is not None:
            raise ValueError("working_memory.template and working_memory.schema are both set; choose one")
        return self

    @property
    def mode(self) -> Literal["template", "schema"]:
        return "schema" if self.schema_ is not None else "template"

    @property
    def effective_template(self) -> str | None:
        """The template in force; None in schema mode."""
        if self.mode == "schema":
            return None
        return self.template_text

    @property
    def template_text(self) -> str:
        """The template template mode uses: the configured one, or the default."""
        return self.template if self.template is not None else DEFAULT_TEMPLATE


def schema_validator(schema: dict) -> type[Validator]:
    # Imported here: jsonschema costs ~0.2 s, and start-up must stay quick.
    import jsonschema

    # Honour an explicit $schema; otherwise use the current draft.
    return jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
