"""The working-memory block the agent sees in its context.

It appears once: the stored note (or, while nothing is stored, the template to
fill in), with a short line on how to update it. The schema is shown only in
schema mode, where the agent cannot write a valid update without it.
"""

from __future__ import annotations

import json

from om_mcp.config.working_memory import WorkingMemoryConfig
from om_mcp.engine.prompts import agent
from om_mcp.engine.working_memory.update import _current_object
from om_mcp.neutral import block

UPDATE_TOOL = "update_working_memory"


def render_for_context(config: WorkingMemoryConfig, value: str | dict | None, tool_name: str = UPDATE_TOOL) -> str:
    """The block placed in the agent's context; empty when working memory is disabled."""
    if not config.enabled:
        return ""
    if config.mode == "schema":
        obj, _ = _current_object(value)
        how = agent.WORKING_MEMORY_READ_ONLY if config.read_only else agent.WORKING_MEMORY_SCHEMA_HOW
        body = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
        schema = json.dumps(config.schema_, ensure_ascii=False, separators=(",", ":"))
        return "\n".join(
            [
                agent.WORKING_MEMORY_INTRO,
                how.format(tool=tool_name),
                f"<schema>{schema}</schema>",
                block("working-memory", body),
            ]
        )
    if isinstance(value, dict):
        body = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    else:
        body = value if value and value.strip() else (config.effective_template or "")
    how = agent.WORKING_MEMORY_READ_ONLY if config.read_only else agent.WORKING_MEMORY_TEMPLATE_HOW
    return "\n".join([agent.WORKING_MEMORY_INTRO, how.format(tool=tool_name), block("working-memory", body.rstrip())])
