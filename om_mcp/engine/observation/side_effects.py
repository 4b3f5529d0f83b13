"""What a committed cycle changes besides the log, in every mode (resource scope
included): the thread's title, extracted values at custom metadata paths, and
the working memory when the Observer keeps it. None of these can fail a cycle."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

from om_mcp.config import Config
from om_mcp.engine import working_memory as wm
from om_mcp.engine.observation.deps import CycleDeps
from om_mcp.engine.observation.events import EventType
from om_mcp.engine.observation.parsing import ParsedOutput
from om_mcp.engine.prompts.observer import (
    WORKING_MEMORY_AS_SCHEMA,
    WORKING_MEMORY_AS_TEMPLATE,
    WORKING_MEMORY_EXTRACTOR,
    WORKING_MEMORY_SLUG,
)
from om_mcp.logs import one_line

log = logging.getLogger(__name__)
TITLE_CHARS = 120


def working_memory_extractor(whole: Config) -> list[tuple[str, str]]:
    """The inline extractor that lets the Observer keep working memory, if configured."""
    config = whole.working_memory
    if not (whole.observational_memory.observation.manage_working_memory and config.enabled):
        return []
    if config.mode == "schema":
        how = WORKING_MEMORY_AS_SCHEMA.format(schema=json.dumps(config.schema_, ensure_ascii=False))
    else:
        how = WORKING_MEMORY_AS_TEMPLATE.format(template=config.effective_template or "")
    return [(WORKING_MEMORY_SLUG, WORKING_MEMORY_EXTRACTOR.format(how=how))]


async def apply(
    deps: CycleDeps,
    thread_id: str,
    resource_id: str,
    parsed: ParsedOutput,
    extracted: dict[str, Any],
    base: dict[str, Any],
) -> list[dict[str, Any]]:
    """Apply one thread's side effects; returns the events they made (already persisted)."""
    events: list[dict[str, Any]] = []
    for effect in (_retitle, _keep_working_memory):
        try:
            event = await effect(deps, thread_id, resource_id, parsed, base)
        except Exception as error:  # noqa: BLE001 - a side effect never sinks a committed cycle
            log.warning("%s after a cycle failed: %s", effect.__name__.strip("_"), one_line(error))
            continue
        if event is not None:
            events.append(event)
    paths = deps.extractors.custom_paths(extracted)
    if paths:
        await deps.store.set_thread_metadata_paths(thread_id, {f"om.{p}": v for p, v in paths.items()})
    if events:
        await deps.store.add_events(events)
    return events


async def _retitle(
    deps: CycleDeps, thread_id: str, resource_id: str, parsed: ParsedOutput, base: dict[str, Any]
) -> dict[str, Any] | None:
    title = (parsed.thread_title or "").strip()[:TITLE_CHARS]
    if not (deps.om.observation.thread_title and title):
        return None
    old, changed = await deps.store.set_generated_title(thread_id, title)
    if not changed:
        return None
    event = {
        **base,
        "type": EventType.THREAD_UPDATE,
        "thread_id": thread_id,
        "new_title": title,
        "timestamp": datetime.now(UTC).isoformat(),
    }
    if old:
        event["old_title"] = old
    return event


async def _keep_working_memory(
    deps: CycleDeps, thread_id: str, resource_id: str, parsed: ParsedOutput, base: dict[str, Any]
) -> dict[str, Any] | None:
    update = parsed.extracted.get(WORKING_MEMORY_SLUG)
    if not update or not working_memory_extractor(deps.config):
        return None
    config = deps.config.working_memory.model_copy(update={"read_only": False})
    scope = config.scope
    key = resource_id if scope == "resource" else thread_id

    def apply_update(current: str | None) -> str | None:
        value: Any = current
        if config.mode == "schema" and current:
            value = json.loads(current)
        outcome = wm.apply_update(config, value, update)
        if not outcome.changed:
            return None
        return outcome.value if isinstance(outcome.value, str) else json.dumps(outcome.value, ensure_ascii=False)

    try:
        _, changed = await deps.store.update_working_memory(scope, key, apply_update)
    except wm.WorkingMemoryError as error:  # a bad update is logged, never fatal
        log.warning("the Observer's working-memory update was refused: %s", one_line(error))
        return None
    if not changed:
        return None
    return {**base, "type": EventType.WORKING_MEMORY_UPDATE, "thread_id": thread_id, "scope": scope}
