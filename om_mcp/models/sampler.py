"""The `sampling` model: a prompt run by a connected MCP client instead of a provider.

Models and the engine know only this protocol; the MCP server supplies the one
implementation (`om_mcp.server.sampling.SamplingBroker`), which keeps the sessions of
clients that offer sampling and asks them in turn. A process without a server (the
CLI, the hooks' worker) has no such client: its `sampling` target is `NoSampler`, whose
answer says what to do instead.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from om_mcp.config.models import ModelSettings, ModelTarget
from om_mcp.models.base import Completion, ModelClient
from om_mcp.models.errors import ModelUnavailable

NO_CLIENT = (
    "no connected client offers sampling (it needs a client that declares the sampling "
    "capability on a 2025-11-25 or older connection, such as stdio); configure a model instead"
)


@runtime_checkable
class Sampler(ModelClient, Protocol):
    """A model client for the `sampling` and `sampling/<model hint>` targets that can tell,
    without a call, whether a client is there to ask. `complete` raises `ModelUnavailable`
    (permanent: a cycle stays pending with that status) when none is, and a transient
    `ModelError` when the client timed out or declined."""

    @property
    def available(self) -> bool: ...


class NoSampler:
    """The `sampling` target of a process that serves no MCP client."""

    available = False

    async def complete(
        self, messages: list[dict[str, Any]], target: ModelTarget, settings: ModelSettings, timeout: float
    ) -> Completion:
        raise ModelUnavailable(NO_CLIENT, model=target.model)
