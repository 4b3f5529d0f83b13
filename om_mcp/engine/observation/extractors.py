"""Extractors: named values the Observer or Reflector pulls out of a cycle.

An extractor without a schema is inline: the model writes `<slug>value</slug>`
in its normal output. One with a JSON schema costs a follow-up structured call
whose answer is validated. A failure is recorded for its slug and never drops
the values the other extractors produced.
"""

from __future__ import annotations

import json
import re
from typing import Any

from om_mcp.config import ObservationalMemoryConfig
from om_mcp.engine.observation.observer import AgentResult
from om_mcp.engine.prompts.observer import EXTRACT_SYSTEM
from om_mcp.engine.tokens import TokenCounter
from om_mcp.models import ModelRouter


class Extractors:
    def __init__(self, om_config: ObservationalMemoryConfig, counter: TokenCounter):
        self.by_role = {
            "observation": list(om_config.observation.extract),
            "reflection": list(om_config.reflection.extract),
        }
        self.counter = counter

    def custom_paths(self, values: dict[str, Any]) -> dict[str, Any]:
        """{dot path: value} for extracted values whose extractor names its own
        metadata_key_path (the default path is the record's extracted map)."""
        out = {}
        for extractor in (*self.by_role["observation"], *self.by_role["reflection"]):
            slug = extractor.slug
            path = extractor.metadata_key_path
            if isinstance(path, str) and path and path != f"extracted.{slug}" and slug in values:
                out[path] = values[slug]
        return out

    def inline(self, role: str) -> list[tuple[str, str]]:
        return [(e.slug, e.instructions) for e in self.by_role[role] if e.schema_ is None]

    def previous(self, stored: dict[str, Any], role: str) -> dict[str, str]:
        """Last values to show the model, for extractors that want them."""
        out = {}
        for extractor in self.by_role[role]:
            slug = extractor.slug
            if extractor.include_previous_extraction and slug in stored:
                value = stored[slug]
                out[slug] = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        return out

    async def run(
        self, role: str, result: AgentResult, stored: dict[str, Any], router: ModelRouter
    ) -> tuple[dict[str, Any], list[dict[str, str]]]:
        """Values to persist ({slug: value}) and failures ([{slug, error}])."""
        values: dict[str, Any] = {}
        failures: list[dict[str, str]] = []
        for extractor in self.by_role[role]:
            slug = extractor.slug
            try:
                if extractor.schema_ is None:
                    value = result.parsed.extracted.get(slug)
                else:
                    value = await self._structured(extractor, slug, result, stored.get(slug), router)
            except Exception as error:  # noqa: BLE001 - one extractor never sinks the cycle
                failures.append({"slug": slug, "error": str(error)})
                continue
            if value is not None and extractor.metadata_key_path is not False:
                values[slug] = value
        return values, failures

    async def _structured(self, extractor: Any, slug: str, result: AgentResult, previous: Any, router) -> Any:
        parts = [
            f"## Value to extract: {slug}",
            extractor.instructions or "(no further instructions)",
            "## JSON Schema",
            json.dumps(extractor.schema_, ensure_ascii=False),
        ]
        if extractor.include_previous_extraction and previous is not None:
            parts += ["## Previous value", json.dumps(previous, ensure_ascii=False)]
        parts += ["## Memory step output", result.text]
        messages = [{"role": "system", "content": EXTRACT_SYSTEM}, {"role": "user", "content": "\n\n".join(parts)}]
        completion = await router.complete(messages, self.counter.count_text(messages[1]["content"]))
        value = _parse_json(completion.text)
        if value is None:
            return None
        import jsonschema

        try:
            jsonschema.validate(value, extractor.schema_)
        except jsonschema.ValidationError as error:
            where = "/".join(str(p) for p in error.absolute_path) or "value"
            raise ValueError(f"{where}: {error.message}") from None
        return value


def _parse_json(text: str) -> Any:
    body = text.strip()
    fenced = re.match(r"^```(?:json)?\s*(.*?)\s*```$", body, re.DOTALL)
    if fenced:
        body = fenced.group(1)
    try:
        return json.loads(body)
    except ValueError:
        raise ValueError(f"the model did not answer with JSON: {body[:120]!r}") from None
