"""Claude Code hook input: the JSON object a hook command reads on stdin.

Every event carries `session_id`, `transcript_path`, `cwd` and
`hook_event_name` (most also `permission_mode` and `prompt_id`); each event
adds its own fields. Shapes checked against the hooks reference and against
what Claude Code 2.1.197 actually sent (see tests/fixtures/claude_code/hooks/).
Unknown events and unknown fields are accepted, never an error: Claude Code
adds both often, and a hook must not break a session over them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from om_mcp.hosts.claude_code.adapter import HOST
from om_mcp.hosts.common import HookInputError, HookPlan, Project, find_project, parse_with


class HookInput(BaseModel):
    """Fields common to every event."""

    model_config = ConfigDict(extra="allow")

    session_id: str = Field(min_length=1)
    hook_event_name: str = Field(min_length=1)
    transcript_path: str | None = None
    cwd: str | None = None
    permission_mode: str | None = None
    prompt_id: str | None = None
    agent_id: str | None = Field(default=None, description="set when the event fired inside a subagent")
    agent_type: str | None = None

    def project(self) -> Project:
        """The project (resource) of this session: the git root of `cwd`, else `cwd`."""
        if not self.cwd:
            raise HookInputError("hook input: cwd is missing, so the project is unknown")
        return find_project(self.cwd)


class SessionStartInput(HookInput):
    source: str | None = Field(default=None, description="startup | resume | clear | compact")
    model: str | None = None


class UserPromptSubmitInput(HookInput):
    prompt: str = ""


class StopInput(HookInput):
    stop_hook_active: bool = False
    last_assistant_message: str | None = None


class SubagentStartInput(HookInput):
    pass


class SubagentStopInput(StopInput):
    agent_transcript_path: str | None = None


class PreCompactInput(HookInput):
    trigger: str | None = Field(default=None, description="manual | auto")
    custom_instructions: str | None = None


class PostCompactInput(HookInput):
    trigger: str | None = None
    compact_summary: str | None = None


class SessionEndInput(HookInput):
    reason: str | None = Field(default=None, description="clear | logout | prompt_input_exit | other | ...")


class ToolHookInput(HookInput):
    """PreToolUse, PostToolUse and PostToolUseFailure."""

    tool_name: str = ""
    tool_input: Any = None
    tool_use_id: str | None = None
    tool_response: Any = None
    error: str | None = None


class NotificationInput(HookInput):
    message: str | None = None
    notification_type: str | None = None


EVENT_MODELS: dict[str, type[HookInput]] = {
    "SessionStart": SessionStartInput,
    "UserPromptSubmit": UserPromptSubmitInput,
    "Stop": StopInput,
    "SubagentStart": SubagentStartInput,
    "SubagentStop": SubagentStopInput,
    "PreCompact": PreCompactInput,
    "PostCompact": PostCompactInput,
    "SessionEnd": SessionEndInput,
    "PreToolUse": ToolHookInput,
    "PostToolUse": ToolHookInput,
    "PostToolUseFailure": ToolHookInput,
    "Notification": NotificationInput,
}


def parse_hook_input(data: str | bytes | Mapping[str, Any]) -> HookInput:
    """The typed input of one hook call; HookInputError (one line, naming the field) if unusable."""
    return parse_with(data, EVENT_MODELS, HookInput)


def plan_for(hook: HookInput) -> HookPlan:
    """SessionStart: catch up (a resumed or compacted session has turns on
    disk) and print the context; the ingest events: catch up; others: nothing."""
    return HOST.plan(hook.hook_event_name)
