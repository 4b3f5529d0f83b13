"""Can the configured model be called at all? Answered once at start, with no network.

A model is ready when its provider's key is in the environment (an empty or
placeholder value counts as no key), or it has an `api_base` (a local server),
or it needs no key (Ollama, MCP sampling), or it is `claude-cli/...` and the
`claude` command reports a login (`models/claude_login.py`). A model string
without a known provider prefix is looked up in litellm's offline model map:
one litellm does not know ("nonsense") is not ready. Whether the server
answers is the circuit breaker's business, not this one's.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from om_mcp.config.models import ModelTarget
from om_mcp.models.auto import is_real_key
from om_mcp.models.claude_login import Login, claude_login

# litellm provider prefix -> the variables litellm reads the key from (any one will do).
PROVIDER_KEYS: dict[str, tuple[str, ...]] = {
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "openai": ("OPENAI_API_KEY",),
    "azure": ("AZURE_API_KEY",),
    "mistral": ("MISTRAL_API_KEY",),
    "groq": ("GROQ_API_KEY",),
    "deepseek": ("DEEPSEEK_API_KEY",),
    "xai": ("XAI_API_KEY",),
    "openrouter": ("OPENROUTER_API_KEY",),
    "together_ai": ("TOGETHERAI_API_KEY", "TOGETHER_API_KEY"),
    "fireworks_ai": ("FIREWORKS_API_KEY", "FIREWORKS_AI_API_KEY"),
    "cohere": ("COHERE_API_KEY",),
    "perplexity": ("PERPLEXITYAI_API_KEY",),
    "vertex_ai": ("GOOGLE_APPLICATION_CREDENTIALS",),
    "bedrock": ("AWS_ACCESS_KEY_ID",),
}
# Providers that run locally or borrow the host's model: no key to check.
KEYLESS = ("ollama", "ollama_chat", "hosted_vllm", "lm_studio", "llamafile", "claude-cli", "sampling")
CLAUDE_CLI = "claude-cli"


@dataclass(frozen=True)
class Readiness:
    ready: bool
    reason: str  # one line: which model observes, or why observation is paused and how to fix it


def provider_of(model: str) -> str:
    provider, sep, _ = model.partition("/")
    return provider if sep else ""


def key_variables(target: ModelTarget) -> tuple[str, ...]:
    if target.api_key_env:
        return (target.api_key_env,)
    return PROVIDER_KEYS.get(provider_of(target.model), ())


def check(
    target: ModelTarget,
    env: Mapping[str, str] | None = None,
    *,
    which: Callable[[str], str | None] = shutil.which,
    login: Callable[[str, Mapping[str, str]], Login] | None = None,
) -> Readiness:
    env = os.environ if env is None else env
    provider = provider_of(target.model)
    if target.api_key_env:
        if is_real_key(env.get(target.api_key_env)):
            return Readiness(True, f"{target.model} (key from {target.api_key_env})")
        return Readiness(False, f"{target.model} needs a key in {target.api_key_env}, which is not set")
    if target.api_base:
        return Readiness(True, f"{target.model} at {target.api_base}")
    if provider == CLAUDE_CLI:
        return claude_cli_readiness(target.model, env, which, login)
    if provider in KEYLESS or target.model in KEYLESS:
        return Readiness(True, target.model)
    if provider not in PROVIDER_KEYS:
        known = litellm_provider(target.model)
        if known is None:
            return Readiness(
                False,
                f"litellm does not know the model {target.model!r}: give it a provider prefix"
                " (for example gemini/gemini-2.5-flash or openai/gpt-4o-mini), see docs.litellm.ai/docs/providers",
            )
        provider = known
    if provider in KEYLESS:
        return Readiness(True, target.model)
    names = PROVIDER_KEYS.get(provider)
    if names is None:
        return Readiness(True, f"{target.model} (its key is not checked before the first call)")
    if any(is_real_key(env.get(name)) for name in names):
        return Readiness(True, target.model)
    return Readiness(
        False,
        f"{target.model} needs {names[0]} in the server's environment (set it, or choose another model with OM_MODEL)",
    )


def check_all(targets: list[ModelTarget], env: Mapping[str, str] | None = None) -> Readiness:
    """Ready when any enabled target of a fallback list is."""
    results = [check(t, env) for t in targets if t.enabled]
    for result in results:
        if result.ready:
            return result
    return results[0] if results else Readiness(False, "no enabled model is configured")


def check_each(targets: list[ModelTarget], env: Mapping[str, str] | None = None) -> list[tuple[str, Readiness]]:
    """Every candidate of a fallback list with its own readiness, in order (disabled ones say so)."""
    return [
        (t.model, check(t, env) if t.enabled else Readiness(False, f"{t.model} is disabled (enabled = false)"))
        for t in targets
    ]


def claude_cli_readiness(
    model: str,
    env: Mapping[str, str],
    which: Callable[[str], str | None] = shutil.which,
    login: Callable[[str, Mapping[str, str]], Login] | None = None,
) -> Readiness:
    """`claude-cli/...` is ready when the `claude` command is found and reports a login."""
    claude = which("claude")
    if not claude:
        return Readiness(False, f"{model} needs the Claude Code CLI (`claude`), which is not on PATH")
    found = (login or claude_login)(claude, env)
    if not found.logged_in:
        return Readiness(False, found.detail if found.detail != "timeout" else f"`{claude} auth status` timed out")
    return Readiness(True, f"{model} (the Claude Code CLI at {claude}, {found.detail})")


def litellm_provider(model: str) -> str | None:
    """The provider litellm routes `model` to, from its offline model map; None when it knows none.
    Imports litellm (about 2.5 s): only for a model string with no provider prefix we know."""
    from om_mcp.models.litellm_client import load_litellm

    litellm = load_litellm()
    try:
        return str(litellm.get_llm_provider(model)[1])
    except Exception:  # noqa: BLE001 - litellm raises BadRequestError, and others for malformed names
        return None
