"""The litellm-backed model client: one attempt per `complete`, errors mapped
to transient or not.

litellm takes ~2.5 s to import and, unless told otherwise, fetches its model
cost map from the network at import. So it is imported lazily, once, with the
offline settings in place, and never at module import.
"""

from __future__ import annotations

import gc
import logging
import os
import re
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anyio

from om_mcp import heap
from om_mcp.config.models import ModelSettings, ModelTarget
from om_mcp.models.base import Completion, Usage
from om_mcp.models.errors import ModelError, is_transient

# Sent when an OpenAI-compatible endpoint needs no key: litellm refuses to call
# without one, and a dummy keeps a real OPENAI_API_KEY from leaking to it.
DUMMY_API_KEY = "sk-no-key-required"

# litellm providers that talk the OpenAI wire protocol to a configured api_base.
OPENAI_COMPATIBLE_PREFIXES = ("openai/", "text-completion-openai/")

PERMANENT_ERRORS = frozenset(
    {
        "AuthenticationError",
        "PermissionDeniedError",
        "NotFoundError",
        "BadRequestError",
        "ContextWindowExceededError",
        "UnsupportedParamsError",
        "InvalidRequestError",
        "ContentPolicyViolationError",
    }
)

_import_lock = threading.Lock()
_litellm: Any = None


def load_litellm() -> Any:
    """Import litellm once (thread-safe) with network-free settings."""
    global _litellm
    if _litellm is None:
        with _import_lock:
            if _litellm is None:
                # Use the bundled cost map instead of fetching it at import.
                os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
                debug = logging.getLogger("om_mcp").isEnabledFor(logging.DEBUG)
                os.environ.setdefault("LITELLM_LOG", "DEBUG" if debug else "ERROR")
                with _in_the_background():
                    import litellm

                litellm.suppress_debug_info = True  # no "Give Feedback" banner on errors
                litellm.telemetry = False
                # litellm logs every call at INFO, twice; our own line says what matters.
                for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "litellm", "httpx"):
                    logging.getLogger(name).setLevel(logging.DEBUG if debug else logging.ERROR)
                _litellm = litellm
                heap.settle()  # litellm's 340k objects leave the full collections (a 250 ms pause)
    return _litellm


@contextmanager
def _in_the_background() -> Iterator[None]:
    """litellm's import runs beside the turns (on a worker thread): keep it from stalling them.
    Without collections during the import, no turn that happens to allocate scans the half-built
    heap (stalls of 0.2 to 0.9 s measured); with a short switch interval, a turn waits at most a
    millisecond, not five, each time it needs the interpreter back."""
    collecting, interval = gc.isenabled(), sys.getswitchinterval()
    gc.disable()
    sys.setswitchinterval(min(interval, 0.001))
    try:
        yield
    finally:
        sys.setswitchinterval(interval)
        if collecting:
            gc.enable()


class LiteLLMClient:
    """ModelClient over `litellm.acompletion`; the router does all retrying."""

    @property
    def warm(self) -> bool:
        return _litellm is not None

    async def warm_up(self) -> None:
        if _litellm is None:
            # In a worker thread so a 2.5 s import does not stall the event loop.
            try:
                await anyio.to_thread.run_sync(load_litellm)
            except ImportError as exc:
                raise ModelError(f"litellm could not be imported: {exc}") from exc

    async def complete(
        self, messages: list[dict[str, Any]], target: ModelTarget, settings: ModelSettings, timeout: float
    ) -> Completion:
        kwargs = call_arguments(messages, target, settings, timeout)
        litellm = load_litellm()
        try:
            response = await litellm.acompletion(**kwargs)
        except Exception as exc:
            raise _model_error(exc, target) from exc
        return _completion(litellm, response, target)


def call_arguments(
    messages: list[dict[str, Any]], target: ModelTarget, settings: ModelSettings, timeout: float
) -> dict[str, Any]:
    """The keyword arguments for litellm.acompletion (no litellm import needed)."""
    kwargs: dict[str, Any] = dict(settings.provider_options)
    kwargs.update(
        model=target.model,
        messages=messages,
        timeout=timeout,
        num_retries=0,  # the router retries; the openai SDK would otherwise retry twice more
    )
    if target.api_base:
        kwargs["api_base"] = target.api_base
    api_key = _api_key(target)
    if api_key:
        kwargs["api_key"] = api_key
    if settings.temperature is not None:
        kwargs["temperature"] = settings.temperature
    if settings.max_output_tokens is not None:
        kwargs["max_tokens"] = settings.max_output_tokens
    return kwargs


def _api_key(target: ModelTarget) -> str | None:
    if target.api_key_env:
        value = os.environ.get(target.api_key_env)
        if not value:
            raise ModelError(
                f"environment variable {target.api_key_env} (api_key_env of model {target.model}) is not set or empty",
                transient=False,
                model=target.model,
            )
        return value
    if target.api_base and target.model.startswith(OPENAI_COMPATIBLE_PREFIXES):
        return DUMMY_API_KEY
    return None  # litellm reads the provider's usual variable (GEMINI_API_KEY, ...)


def _model_error(exc: Exception, target: ModelTarget) -> ModelError:
    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) else None
    name = type(exc).__name__
    # litellm's Timeout and APIConnectionError carry made-up status codes
    # (408/500); the class says what happened, so trust it first. Auth, not-found,
    # bad-request and context-length errors are permanent: retrying cannot help.
    permanent = name in PERMANENT_ERRORS or status in (400, 401, 403, 404)
    transient = not permanent and (name in ("Timeout", "APITimeoutError", "APIConnectionError") or is_transient(exc))
    text = _plain(str(exc)) or name
    if len(text) > 1000:
        text = text[:1000] + "..."
    label = f"{name} (HTTP {status})" if status and name not in ("Timeout", "APIConnectionError") else name
    timed_out = name in ("Timeout", "APITimeoutError")
    reached = status is not None and name not in ("Timeout", "APITimeoutError", "APIConnectionError")
    return ModelError(
        f"{label}: {text}",
        transient=transient,
        status_code=status,
        model=target.model,
        timed_out=timed_out,
        reached=reached,
    )


# litellm stacks class names in front of the provider's message:
# "litellm.ServiceUnavailableError: ServiceUnavailableError: OpenAIException - overloaded".
_PREFIX = re.compile(r"^(?:litellm\.)?\w*(?:Error|Exception|Timeout)(?::| -)\s*")


def _plain(text: str) -> str:
    text = " ".join(text.split())
    while match := _PREFIX.match(text):
        text = text[match.end() :]
    return text


def _completion(litellm: Any, response: Any, target: ModelTarget) -> Completion:
    choice = response.choices[0]
    text = getattr(choice.message, "content", None) or ""
    usage = getattr(response, "usage", None)
    metadata: dict[str, Any] = {
        "response_model": getattr(response, "model", None),
        "response_id": getattr(response, "id", None),
        "finish_reason": getattr(choice, "finish_reason", None),
    }
    hidden = getattr(response, "_hidden_params", None) or {}
    if hidden.get("custom_llm_provider"):
        metadata["provider"] = hidden["custom_llm_provider"]
    for detail_name, key, out in (
        ("completion_tokens_details", "reasoning_tokens", "reasoning_tokens"),
        ("prompt_tokens_details", "cached_tokens", "cached_input_tokens"),
    ):
        detail = getattr(usage, detail_name, None)
        value = getattr(detail, key, None) if detail is not None else None
        if value:
            metadata[out] = value
    return Completion(
        text=text,
        model=target.model,
        usage=Usage(
            input_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            output_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            cost=_cost(litellm, response, hidden),
            provider_metadata={k: v for k, v in metadata.items() if v is not None},
        ),
        attempts=1,
    )


def _cost(litellm: Any, response: Any, hidden: dict[str, Any]) -> float | None:
    cost = hidden.get("response_cost")
    if cost is None:
        try:
            cost = litellm.completion_cost(completion_response=response)
        except Exception:  # unknown model or price: cost is simply not known
            return None
    try:
        return float(cost)
    except (TypeError, ValueError):
        return None
