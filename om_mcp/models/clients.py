"""Which client calls which target: litellm for provider models, the claude CLI for
`claude-cli/<model>`, the `Sampler` the engine was given (the MCP server's) for `sampling`."""

from __future__ import annotations

from om_mcp.config.models import ModelTarget
from om_mcp.models.base import ModelClient
from om_mcp.models.sampler import NoSampler, Sampler

CLAUDE_CLI = "claude-cli"
SAMPLING = "sampling"
LITELLM = "litellm"
# Every kind of client, each a way a request leaves for a model (tests/test_meter.py counts each one's).
BACKENDS = (CLAUDE_CLI, SAMPLING, LITELLM)


def backend_of(model: str) -> str:
    """ "claude-cli", "sampling" or "litellm" (by its prefix; litellm takes every other model)."""
    for prefix in BACKENDS[:-1]:
        if model == prefix or model.startswith(prefix + "/"):
            return prefix
    return LITELLM


class Clients:
    """One client per kind of target, made on first use (litellm is imported only if needed)."""

    def __init__(
        self,
        sampler: Sampler | None = None,
        *,
        litellm: ModelClient | None = None,
        claude_cli: ModelClient | None = None,
    ):
        self.sampler: Sampler = sampler or NoSampler()
        self._made: dict[str, ModelClient] = {SAMPLING: self.sampler}
        if litellm is not None:
            self._made[LITELLM] = litellm
        if claude_cli is not None:
            self._made[CLAUDE_CLI] = claude_cli

    def for_target(self, target: ModelTarget) -> ModelClient:
        kind = backend_of(target.model)
        if kind not in self._made:
            if kind == CLAUDE_CLI:
                from om_mcp.models.claude_cli import ClaudeCliClient

                self._made[kind] = ClaudeCliClient()
            else:
                from om_mcp.models.litellm_client import LiteLLMClient  # no litellm import here

                self._made[kind] = LiteLLMClient()
        return self._made[kind]
