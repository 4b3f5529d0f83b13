"""`model = "auto"`: pick a model that can run here without more setup.

In order: a provider API key in the environment (the provider's small, cheap
model); else the Claude Code CLI on PATH (`claude-cli/haiku`, the person's own
login); else MCP sampling when a connected client offers it; else nothing,
with a reason that says how to fix it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

# (environment variable, model). Gemini first: it is the project's default
# model (long context, low price); the others follow by how common they are.
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
HOW_TO_FIX = (
    "no model is available: set a provider key (for example GEMINI_API_KEY or ANTHROPIC_API_KEY), "
    "install and log in to Claude Code (the `claude` command), or connect an MCP client that offers "
    "sampling; or set observation.model in the config"
)

# Values copied from a README or an .env template, not keys.
_PLACEHOLDER = re.compile(
    r"^(?:|(?:sk-(?:ant-|proj-)?)?(?:x+|\*+|\.+|0+|<.*>)|-+|none|null|nil|undefined|changeme|change-me|placeholder|todo|test|dummy|fake|"
    r"secret|key|api[-_ ]?key|your.*|enter.*|insert.*|replace.*|paste.*|sk-|sk-\.\.\.|\$\{?[a-z_]+\}?)$",
    re.IGNORECASE,
)
MIN_KEY_LENGTH = 12


@dataclass(frozen=True)
class AutoChoice:
    model: str | None
    reason: str
    api_key_env: str | None = None  # pin the variable that holds the key (litellm may prefer another)


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


def resolve_auto(env: Mapping[str, str], which: Callable[[str], str | None], sampling_available: bool) -> AutoChoice:
    for name, model in PROVIDER_KEYS:
        if is_real_key(env.get(name)):
            return AutoChoice(model, f"{name} is set: using {model}", api_key_env=name)
    claude = which("claude")
    if claude:
        return AutoChoice(CLAUDE_CLI_MODEL, f"no provider key; the Claude Code CLI is at {claude}: using {CLAUDE_CLI_MODEL}")
    if sampling_available:
        return AutoChoice(SAMPLING_MODEL, "no provider key and no claude CLI: asking the connected MCP client (sampling)")
    return AutoChoice(None, HOW_TO_FIX)
