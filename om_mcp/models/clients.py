"""Which client calls which target: litellm for provider models, the claude CLI
for `claude-cli/<model>`, the connected MCP client for `sampling`."""

from __future__ import annotations

from typing import Any

from om_mcp.models.base import Completion, ModelClient
from om_mcp.models.errors import ModelUnavailable
from om_mcp.models.settings import ModelSettings, ModelTarget


class _NoSampling:
    async def complete(
        self, messages: list[dict[str, Any]], target: ModelTarget, settings: ModelSettings, timeout: float
    ) -> Completion:
        raise ModelUnavailable("no connected client offers MCP sampling")


class Clients:
    """One client per kind of target, made on first use."""

    def __init__(self, sampling: ModelClient | None = None):
        self.sampling = sampling
        self._made: dict[str, ModelClient] = {}

    def for_target(self, target: ModelTarget) -> ModelClient:
        kind = _kind(target.model)
        if kind == "sampling":
            return self.sampling or _NoSampling()
        if kind not in self._made:
            if kind == "claude-cli":
                from om_mcp.models.claude_cli import ClaudeCLIClient

                self._made[kind] = ClaudeCLIClient()
            else:
                from om_mcp.models.litellm_client import LiteLLMClient  # no litellm import here

                self._made[kind] = LiteLLMClient()
        return self._made[kind]


def _kind(model: str) -> str:
    if model == "sampling" or model.startswith("sampling/"):
        return "sampling"
    if model.startswith("claude-cli/"):
        return "claude-cli"
    return "litellm"
