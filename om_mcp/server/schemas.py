"""Tool argument types: what the model sees in tools/list, kept small.

Parts are one flat object here (the engine's `MessageIn` checks each part type's
fields strictly, and its errors name the field), because a discriminated union of
six part models costs the model well over a thousand tokens on every session.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from om_mcp.server import descriptions as text

ThreadId = Annotated[str, Field(min_length=1, max_length=200, description=text.THREAD_ID)]
ResourceId = Annotated[str | None, Field(None, min_length=1, max_length=200, description=text.RESOURCE_ID)]


class Part(BaseModel):
    model_config = ConfigDict(extra="allow", json_schema_extra={"additionalProperties": True})

    type: Literal["text", "tool-call", "tool-result", "reasoning", "image", "file"]
    text: str | None = None
    tool_name: str | None = None
    args: Any = None
    result: Any = None
    tool_call_id: str | None = None
    mime_type: str | None = None


class Message(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: Literal["user", "assistant", "system", "tool"]
    content: str | list[Part]
    id: str | None = None
    created_at: str | None = Field(None, description="ISO-8601")


def message_dicts(messages: list[Message]) -> list[dict[str, Any]]:
    """Back to plain dicts, unset fields dropped, for the engine's strict validation."""
    out = []
    for message in messages:
        data = message.model_dump(exclude_unset=True)
        if isinstance(message.content, list):
            data["content"] = [p.model_dump(exclude_unset=True) for p in message.content]
        out.append(data)
    return out


# What the model reads on every session without needing it: the length limits of strings and the
# far numeric bounds (the arguments are still checked against them, and a value out of bounds is
# refused naming the field), the defaults that say what leaving an argument out says anyway (off,
# zero, none), and `additionalProperties: true` (what an object allows unless it says otherwise).
UNREAD = ("maxLength", "minLength")
IMPLIED_DEFAULTS = (None, False, 0)
FAR = 1000  # numeric bounds this far out only catch nonsense (page 1,000, a million-token budget): unread too


def slim(schema: Any) -> Any:
    """A JSON Schema without what pydantic adds for documentation: titles, `null` branches
    of optional values (leaving them out says the same), implied defaults (`null`, `false`, 0),
    `additionalProperties: true`, string lengths (UNREAD) and bounds at FAR or beyond."""
    if isinstance(schema, list):
        return [slim(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if (
            key == "title"
            and isinstance(value, str)
            or key in UNREAD
            or key == "additionalProperties"
            and value is True
        ):
            continue
        if key == "default" and any(value is d or (value == d and type(value) is type(d)) for d in IMPLIED_DEFAULTS):
            continue
        if key in ("maximum", "minimum") and isinstance(value, int) and abs(value) >= FAR:
            continue
        if key == "properties":
            out[key] = {name: slim(prop) for name, prop in value.items()}
            continue
        out[key] = slim(value)
    branches = out.get("anyOf")
    if isinstance(branches, list) and {"type": "null"} in branches:
        rest = [b for b in branches if b != {"type": "null"}]
        del out["anyOf"]
        if len(rest) == 1:
            out = {**rest[0], **out}
        else:
            out["anyOf"] = rest
    return out
