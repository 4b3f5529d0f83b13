"""One ModelClient over several backends, chosen by the target's model string:
`claude-cli/...` -> ClaudeCliClient, `sampling` / `sampling/...` -> SamplingClient,
anything else -> litellm. The router above stays provider-blind.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from om_mcp.models.base import Completion, ModelClient, ModelError
from om_mcp.models.claude_cli import PREFIX as CLAUDE_CLI
from om_mcp.models.claude_cli import ClaudeCliClient
from om_mcp.models.sampling import PREFIX as SAMPLING
from om_mcp.models.sampling import SamplingBroker, SamplingClient
from om_mcp.models.settings import ModelSettings, ModelTarget


def backend_of(model: str) -> str:
    """"claude-cli", "sampling" or "litellm"."""
    for prefix in (CLAUDE_CLI, SAMPLING):
        if model == prefix or model.startswith(prefix + "/"):
            return prefix
    return "litellm"


class DispatchClient:
    def __init__(
        self,
        *,
        litellm: ModelClient | None = None,
        claude_cli: ModelClient | None = None,
        broker: SamplingBroker | None = None,
        models: Iterable[str] | None = None,
    ) -> None:
        """`models` (the configured model strings, when known) lets warm-up skip
        litellm's slow import when no target needs it."""
        self._litellm = litellm
        self.claude_cli = claude_cli or ClaudeCliClient()
        self.sampling = SamplingClient(broker) if broker is not None else None
        self._needs_litellm = models is None or any(backend_of(m) == "litellm" for m in models)

    @property
    def litellm(self) -> ModelClient:
        if self._litellm is None:
            from om_mcp.models.litellm_client import LiteLLMClient  # no litellm import here

            self._litellm = LiteLLMClient()
        return self._litellm

    async def warm_up(self) -> None:
        warm = getattr(self.litellm, "warm_up", None) if self._needs_litellm else None
        if warm is not None:
            await warm()

    async def complete(
        self, messages: list[dict[str, Any]], target: ModelTarget, settings: ModelSettings, timeout: float
    ) -> Completion:
        backend = backend_of(target.model)
        if backend == CLAUDE_CLI:
            return await self.claude_cli.complete(messages, target, settings, timeout)
        if backend == SAMPLING:
            if self.sampling is None:
                raise ModelError("the sampling model needs the MCP server (no sampling broker here)", model=target.model)
            return await self.sampling.complete(messages, target, settings, timeout)
        return await self.litellm.complete(messages, target, settings, timeout)
