"""Extractors: named values the Observer or Reflector pulls out of a cycle (config side)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from om_mcp.neutral import SECTION_TAGS

# Tags the Observer writes on its own; an extractor may not take their names.
BUILTIN_TAGS = ("current-task", "suggested-response", "thread-title")
# Our blocks' tags (an extractor's value is written in a block of its own slug), and a few more names we use.
RESERVED_TAGS = frozenset(SECTION_TAGS) | {"observation-group", "extracted-values", "template"}


class Extractor(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str = Field(min_length=1)
    instructions: str = ""
    schema_: dict[str, Any] | None = Field(None, alias="schema")
    include_previous_extraction: bool = True
    metadata_key_path: str | Literal[False] | None = None

    @property
    def slug(self) -> str:
        return slugify(self.name)


def slugify(name: str) -> str:
    """Lowercase letters, digits and hyphens; every other run becomes one hyphen."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def check_extractors(extractors: Iterable[Extractor]) -> None:
    """Raise ValueError for empty, duplicate, built-in or reserved slugs, or a bad schema."""
    seen: set[str] = set()
    for extractor in extractors:
        slug = extractor.slug
        if not slug:
            raise ValueError(f"extractor name {extractor.name!r} has no letters or digits")
        if slug in BUILTIN_TAGS or slug in RESERVED_TAGS:
            raise ValueError(f"extractor {extractor.name!r}: slug {slug!r} is reserved")
        if slug in seen:
            raise ValueError(f"extractor {extractor.name!r}: slug {slug!r} is used twice")
        if extractor.schema_ is not None:
            import jsonschema  # only when an extractor has a schema: it is slow to import

            try:
                jsonschema.validators.validator_for(extractor.schema_).check_schema(extractor.schema_)
            except jsonschema.SchemaError as error:
                raise ValueError(f"extractor {extractor.name!r}: invalid schema: {error.message}") from None
        seen.add(slug)
