"""Gemini CLI hook input: the typed models of each event (see gemini_cli.py).

Kept apart from the transcript reader so that the hook command, which reads
only a few fields (`om_mcp.hosts.events`), does not load pydantic.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from om_mcp.hosts.common import HookInputError, HookPlan, Project, find_project, parse_with
from om_mcp.hosts.gemini_cli import HOST


class GeminiHookInput(BaseModel):
    model_config = ConfigDict(extra="allow")

    session_id: str = Field(min_length=1)
    hook_event_name: str = Field(min_length=1)
    transcript_path: str | None = None
    cwd: str | None = None
    timestamp: str | None = None

    def project(self) -> Project:
        if not self.cwd:
            raise HookInputError("hook input: cwd is missing, so the project is unknown")
        return find_project(self.cwd)


class GeminiSessionStart(GeminiHookInput):
    source: str | None = Field(default=None, description="startup | resume | clear")


class GeminiSessionEnd(GeminiHookInput):
    reason: str | None = Field(default=None, description="exit | clear | logout | prompt_input_exit | other")


class GeminiBeforeAgent(GeminiHookInput):
    prompt: str = ""


class GeminiAfterAgent(GeminiHookInput):
    prompt: str = ""
    prompt_response: str | None = None
    stop_hook_active: bool = False


class GeminiPreCompress(GeminiHookInput):
    trigger: str | None = Field(default=None, description="auto | manual")


class GeminiToolHook(GeminiHookInput):
    tool_name: str = ""
    tool_input: Any = None
    tool_response: Any = None
    mcp_context: Any = None


class GeminiNotification(GeminiHookInput):
    notification_type: str | None = None
    message: str | None = None
    details: Any = None


EVENT_MODELS: dict[str, type[GeminiHookInput]] = {
    "SessionStart": GeminiSessionStart,
    "SessionEnd": GeminiSessionEnd,
    "BeforeAgent": GeminiBeforeAgent,
    "AfterAgent": GeminiAfterAgent,
    "PreCompress": GeminiPreCompress,
    "BeforeTool": GeminiToolHook,
    "AfterTool": GeminiToolHook,
    "Notification": GeminiNotification,
}


def parse_hook_input(data: str | bytes | dict[str, Any]) -> GeminiHookInput:
    """The typed input of one Gemini CLI hook call; HookInputError if unusable."""
    return parse_with(data, EVENT_MODELS, GeminiHookInput)


def plan_for(hook: GeminiHookInput) -> HookPlan:
    """SessionStart: catch up and print the context; AfterAgent and SessionEnd:
    ingest the finished turn; PreCompress: ingest, holding back the open reply."""
    return HOST.plan(hook.hook_event_name)
