"""Can the configured model be called at all? Answered once at start, with no network.

A model is ready when its provider's key is in the environment (an empty or
placeholder value counts as no key), or it has an `api_base` (a local server),
or it needs no key (Ollama, the claude CLI, MCP sampling). Whether the server
answers is the circuit breaker's business, not this one's.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from om_mcp.models.auto import is_real_key
from om_mcp.models.settings import ModelTarget

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


def check(target: ModelTarget, env: Mapping[str, str] | None = None) -> Readiness:
    env = os.environ if env is None else env
    provider = provider_of(target.model)
    if target.api_key_env:
        if is_real_key(env.get(target.api_key_env)):
            return Readiness(True, f"{target.model} (key from {target.api_key_env})")
        return Readiness(False, f"{target.model} needs a key in {target.api_key_env}, which is not set")
    if target.api_base:
        return Readiness(True, f"{target.model} at {target.api_base}")
    if provider in KEYLESS or not provider:
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
