"""`model = "auto"`: observe with what this machine already has.

In order: a provider API key in the environment (that provider's small, cheap
model); else the Claude Code CLI on PATH when it reports a login
(`claude-cli/haiku`, the person's own login; `claude auth status`, no network),
with MCP sampling as its fallback; else MCP sampling alone, which works only
while a connected client offers it. With none of them, observation is paused
and the reason says how to fix it (an installed but logged-out `claude` says
so: run `claude auth login`).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from om_mcp.models.claude_login import NOT_LOGGED_IN, Login, claude_login

# (environment variable, model). Gemini first: it is the project's default model
# (long context, low price); the others follow by how common they are.
PROVIDER_KEYS: tuple[tuple[str, str], ...] = (
    ("GEMINI_API_KEY", "gemini/gemini-2.5-flash"),
    ("GOOGLE_API_KEY", "gemini/gemini-2.5-flash"),
    ("ANTHROPIC_API_KEY", "anthropic/claude-haiku-4-5"),
    ("OPENAI_API_KEY", "openai/gpt-4o-mini"),
    ("DEEPSEEK_API_KEY", "deepseek/deepseek-chat"),
    ("MISTRAL_API_KEY", "mistral/mistral-small-latest"),
    ("GROQ_API_KEY", "groq/openai/gpt-oss-20b"),
    ("OPENROUTER_API_KEY", "openrouter/google/gemini-2.5-flash"),
)
CLAUDE_CLI_MODEL = "claude-cli/haiku"
SAMPLING_MODEL = "sampling"
NO_MODEL_REASON = (
    "no model for observation: set a provider key (for example GEMINI_API_KEY or ANTHROPIC_API_KEY), install and"
    " log in to Claude Code (the `claude` command), or connect an MCP client that offers sampling; or set"
    " observational_memory.model in the config"
)

# Values copied from a README or an .env template, not keys.
_PLACEHOLDER = re.compile(
    r"^(?:|(?:sk-(?:ant-|proj-)?)?(?:x+|\*+|\.+|0+|<.*>)|-+|none|null|nil|undefined|changeme|change-me|placeholder"
    r"|todo|test|dummy|fake|secret|key|api[-_ ]?key|your.*|enter.*|insert.*|replace.*|paste.*|sk-|sk-\.\.\.|"
    r"\$\{?[a-z_]+\}?)$",
    re.IGNORECASE,
)
MIN_KEY_LENGTH = 12


@dataclass(frozen=True)
class AutoChoice:
    targets: tuple[dict[str, Any], ...]  # model targets, tried in order
    reason: str

    @property
    def models(self) -> tuple[str, ...]:
        return tuple(t["model"] for t in self.targets)


def is_real_key(value: str | None) -> bool:
    """False for unset, empty and placeholder values such as "your-key-here", "sk-...", "<key>"."""
    if value is None:
        return False
    value = value.strip().strip("'\"")
    if len(value) < MIN_KEY_LENGTH or "..." in value or "…" in value or " " in value:
        return False
    if value.startswith("<") and value.endswith(">"):
        return False
    return not _PLACEHOLDER.match(value)


def resolve_auto(
    env: Mapping[str, str] | None = None,
    which: Callable[[str], str | None] = shutil.which,
    login: Callable[[str, Mapping[str, str]], Login] | None = None,
) -> AutoChoice:
    """`login` asks whether the `claude` found is logged in (default: `claude auth status`, cached)."""
    env = os.environ if env is None else env
    for name, model in PROVIDER_KEYS:
        if is_real_key(env.get(name)):
            # Pinned: litellm may read another variable of the provider first (GOOGLE_ before GEMINI_).
            return AutoChoice(({"model": model, "api_key_env": name},), f"{model} (auto: {name} is set)")
    claude = which("claude")
    if claude:
        found = (login or claude_login)(claude, env)
        if found.logged_in:
            return AutoChoice(
                ({"model": CLAUDE_CLI_MODEL}, {"model": SAMPLING_MODEL}),
                f"{CLAUDE_CLI_MODEL} (auto: the Claude Code CLI at {claude} is logged in)",
            )
        why = NOT_LOGGED_IN if found.detail in (NOT_LOGGED_IN, "timeout") else found.detail
        return AutoChoice(({"model": SAMPLING_MODEL},), f"{why} (at {claude}); or {NO_MODEL_REASON}")
    return AutoChoice(({"model": SAMPLING_MODEL},), NO_MODEL_REASON)
