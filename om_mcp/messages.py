"""Messages and their parts: the shapes every way in accepts (the tools, the imports, the
hooks' transcripts) and the engine stores.

A message always carries a list of parts once it is stored; a plain string
`content` becomes one text part. Parts are plain dicts in storage (JSON), and
these models are the one place that says what a valid part looks like. Below
the engine and the importers (both speak it); it imports nothing of om_mcp.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

Role = Literal["user", "assistant", "system", "tool"]


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TextPart(_Part):
    type: Literal["text"] = "text"
    text: str


class ReasoningPart(_Part):
    type: Literal["reasoning"]
    text: str


class ToolCallPart(_Part):
    type: Literal["tool-call"]
    tool_name: str = Field(min_length=1)
    args: Any = None
    tool_call_id: str | None = None


class ToolResultPart(_Part):
    type: Literal["tool-result"]
    tool_name: str = Field(min_length=1)
    result: Any = None
    tool_call_id: str | None = None
    is_error: bool = False


class _Attachment(_Part):
    mime_type: str = Field(min_length=1)
    name: str | None = None
    data: str | None = Field(default=None, description="base64 content")
    url: str | None = None
    width: int | None = Field(default=None, ge=1)
    height: int | None = Field(default=None, ge=1)


class ImagePart(_Attachment):
    type: Literal["image"]


class FilePart(_Attachment):
    type: Literal["file"]


Part = Annotated[
    TextPart | ReasoningPart | ToolCallPart | ToolResultPart | ImagePart | FilePart, Field(discriminator="type")
]


class MessageIn(BaseModel):
    """A message as a client sends it to `append_messages`."""

    model_config = ConfigDict(extra="forbid")

    id: str | None = Field(default=None, min_length=1, max_length=200)
    role: Role
    content: str | list[Part]
    created_at: datetime | None = Field(
        default=None, description="ISO-8601; the time zone is kept. Defaults to now (UTC)."
    )
    metadata: dict[str, Any] | None = None

    @field_validator("created_at")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        # A naive timestamp is read as UTC so ordering and gaps stay well defined.
        if value is not None and value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value

    def parts(self) -> list[dict[str, Any]]:
        """The content as stored: a list of part dicts."""
        if isinstance(self.content, str):
            return [{"type": "text", "text": self.content}]
        parts = [p.model_dump(exclude_none=True, exclude_defaults=False) for p in self.content]
        for p in parts:
            if p.get("type") == "tool-result" and not p.get("is_error"):
                p.pop("is_error", None)
        return parts


def derived_id(role: str, parts: list[dict[str, Any]], created_at: datetime | None, occurrence: int) -> str:
    """The id of a message sent without one: the same role, content and time (when given)
    give the same id, so a re-sent exchange is recognised and stored once. `occurrence`
    tells apart identical messages within one batch."""
    payload = json.dumps(
        [role, parts, created_at.isoformat() if created_at else None], sort_keys=True, ensure_ascii=False
    )
    digest = hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()[:20]
    return f"m-{digest}" + (f"-{occurrence}" if occurrence else "")
