"""`model = "auto"`: observe with what this machine already has.

In order: a provider key in the environment (that provider's small model), the
`claude` command (Claude Code's login, run headless), then MCP sampling (the
connected client's own model). With none of them, observation is paused and the
reason says how to fix it.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from typing import Callable, Mapping

from om_mcp.models.readiness import is_real_key

# (key variable, the provider's small model), in order of preference.
SMALL_MODELS: tuple[tuple[str, str], ...] = (
    ("ANTHROPIC_API_KEY", "anthropic/claude-haiku-4-5"),
    ("OPENAI_API_KEY", "openai/gpt-4o-mini"),
    ("GEMINI_API_KEY", "gemini/gemini-2.5-flash"),
    ("GOOGLE_API_KEY", "gemini/gemini-2.5-flash"),
    ("GROQ_API_KEY", "groq/llama-3.1-8b-instant"),
    ("MISTRAL_API_KEY", "mistral/mistral-small-latest"),
    ("DEEPSEEK_API_KEY", "deepseek/deepseek-chat"),
    ("OPENROUTER_API_KEY", "openrouter/openai/gpt-4o-mini"),
)
CLAUDE_CLI_MODEL = "claude-cli/haiku"
SAMPLING_MODEL = "sampling"
NO_MODEL_REASON = (
    "no model for observation: set a provider key (e.g. ANTHROPIC_API_KEY or OPENAI_API_KEY), install and log in"
    " to Claude Code (the `claude` command), or connect a client that offers MCP sampling"
)


@dataclass(frozen=True)
class AutoChoice:
    models: tuple[str, ...]  # tried in order; sampling last when nothing else exists
    reason: str


def resolve_auto(
    env: Mapping[str, str] | None = None, which: Callable[[str], str | None] = shutil.which,
) -> AutoChoice:
    env = os.environ if env is None else env
    for variable, model in SMALL_MODELS:
        if is_real_key(env.get(variable)):
            return AutoChoice((model,), f"{model} (auto: {variable} is set)")
    if which("claude"):
        return AutoChoice((CLAUDE_CLI_MODEL, SAMPLING_MODEL), f"{CLAUDE_CLI_MODEL} (auto: the claude command is on PATH)")
    return AutoChoice((SAMPLING_MODEL,), NO_MODEL_REASON)
