"""The `Sampler` of an MCP server: it asks a connected MCP client to run the prompt
(`sampling/createMessage`), for hosts that offer sampling and no API key.

Observation and reflection cycles run in the background, outside any tool
call, so the request has to travel on a connection's own back-channel:

* legacy-era connections (handshake protocol 2025-11-25 and older: stdio,
  stateful streamable HTTP) can receive server->client requests at any time;
  a session seen in any request is kept by the `SamplingBroker` and used later;
* 2026-07-28 connections have no back-channel outside a request (sampling is
  deprecated there, SEP-2577, and only travels inside a tool call as an
  input request), so the broker does not accept them;
* a client that did not declare the sampling capability is not accepted.

The server adapter calls `broker.register(ctx.session, ctx.client_capabilities)`
on every request of a caller that reaches every resource (cheap, idempotent: a tenant's
client, which would be shown any tenant's conversation, is never asked) and `unregister`
when a connection ends.
With no usable session, `SamplingBroker.complete` raises a permanent
`ModelUnavailable` (`models.sampler.NO_CLIENT`), so cycles stay pending with that
status until a client that can sample connects. The engine is given the broker as
its `Sampler` (`Memory.open(sampling=...)`) and knows nothing else of it.
"""

from __future__ import annotations

import warnings
from typing import Any

import anyio
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp.types import (
    ClientCapabilities,
    CreateMessageResult,
    ImageContent,
    ModelHint,
    ModelPreferences,
    SamplingMessage,
    TextContent,
)
from mcp_types.jsonrpc import CONNECTION_CLOSED
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from om_mcp.models import NO_CLIENT, Completion, ModelError, ModelSettings, ModelTarget, ModelUnavailable, Usage
from om_mcp.server.sdk import connection_of

PREFIX = "sampling"
DEFAULT_MAX_TOKENS = 8192
_GONE = (NoBackChannelError, anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream)


class SamplingBroker:
    """The live sessions whose clients can run a sampling request outside a request, and
    the `Sampler` (models/sampler.py) that asks them, newest first."""

    def __init__(self) -> None:
        self._sessions: dict[int, Any] = {}  # connection identity -> latest session proxy

    def register(self, session: Any, capabilities: ClientCapabilities | None) -> bool:
        """Remember `session` if it can be sampled later; True when it was accepted."""
        if capabilities is None or capabilities.sampling is None:
            return False
        if getattr(session, "protocol_version", None) in MODERN_PROTOCOL_VERSIONS:
            return False
        key = _connection_key(session)
        self._sessions.pop(key, None)
        self._sessions[key] = session  # newest last: the most recent client is asked first
        return True

    def unregister(self, session: Any) -> None:
        self._sessions.pop(_connection_key(session), None)

    @property
    def available(self) -> bool:
        return bool(self._sessions)

    def status(self) -> str:
        count = len(self._sessions)
        return f"{count} connected client(s) offer sampling" if count else NO_CLIENT

    def candidates(self) -> list[Any]:
        return list(reversed(self._sessions.values()))

    async def complete(
        self, messages: list[dict[str, Any]], target: ModelTarget, settings: ModelSettings, timeout: float
    ) -> Completion:
        system, sampling_messages = to_sampling(messages)
        kwargs: dict[str, Any] = {
            "messages": sampling_messages,
            "max_tokens": settings.max_output_tokens or DEFAULT_MAX_TOKENS,
            "system_prompt": system or None,
            "model_preferences": preferences(target.model),
        }
        if settings.temperature is not None:
            kwargs["temperature"] = settings.temperature
        for session in self.candidates():
            try:
                with anyio.fail_after(timeout), warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # sampling is deprecated in 2026-07-28, still right for legacy
                    result = await session.create_message(**kwargs)
            except _GONE:
                self.unregister(session)  # that client went away; try the next
                continue
            except TimeoutError:
                raise ModelError(
                    f"the client did not answer the sampling request within {timeout:.1f}s",
                    transient=True,
                    model=target.model,
                    timed_out=True,
                ) from None
            except MCPError as exc:
                if exc.code == CONNECTION_CLOSED:
                    self.unregister(session)
                    continue
                # A person may decline one request: try again later, do not pause for good.
                raise ModelError(
                    f"the client refused the sampling request: {exc}", transient=True, model=target.model, reached=True
                ) from exc
            return _completion(result, target)
        raise ModelUnavailable(NO_CLIENT, model=target.model)


def _connection_key(session: Any) -> int:
    # ServerSession is a per-request proxy; the connection behind it is what
    # lasts, so two requests of one client count as one entry.
    return id(connection_of(session) or session)


def preferences(model: str) -> ModelPreferences:
    """Memory work favours a fast, cheap model; `sampling/<name>` adds a hint."""
    hint = model[len(PREFIX) + 1 :].strip() if model.startswith(PREFIX + "/") else ""
    return ModelPreferences(
        hints=[ModelHint(name=hint)] if hint else None, cost_priority=0.7, speed_priority=0.7, intelligence_priority=0.4
    )


def to_sampling(messages: list[dict[str, Any]]) -> tuple[str, list[SamplingMessage]]:
    """(system prompt, sampling messages) from OpenAI-style chat messages.
    Sampling has user and assistant roles only; images with data URLs travel
    as image content, other attachments as a placeholder."""
    system: list[str] = []
    out: list[SamplingMessage] = []
    for message in messages:
        role = message.get("role")
        content = message.get("content")
        if role == "system":
            system.append(content if isinstance(content, str) else _joined_text(content))
            continue
        role = "assistant" if role == "assistant" else "user"
        for item in content if isinstance(content, list) else [{"type": "text", "text": content or ""}]:
            out.append(SamplingMessage(role=role, content=_content(item)))
    return "\n\n".join(s for s in system if s), out


def _content(item: Any) -> TextContent | ImageContent:
    if isinstance(item, dict) and item.get("type") == "image_url":
        url = str((item.get("image_url") or {}).get("url", ""))
        if url.startswith("data:") and ";base64," in url:
            head, data = url[5:].split(";base64,", 1)
            return ImageContent(type="image", data=data, mime_type=head or "image/png")
        return TextContent(type="text", text=f"[image: {url}]")
    if isinstance(item, dict):
        return TextContent(type="text", text=str(item.get("text", "")))
    return TextContent(type="text", text=str(item))


def _joined_text(content: Any) -> str:
    return "\n".join(str(i.get("text", "")) for i in content or [] if isinstance(i, dict))


def _completion(result: CreateMessageResult, target: ModelTarget) -> Completion:
    content = result.content
    blocks = content if isinstance(content, list) else [content]
    text = "".join(getattr(b, "text", "") for b in blocks if getattr(b, "type", None) == "text")
    metadata = {"provider": "sampling", "response_model": result.model, "stop_reason": result.stop_reason}
    return Completion(
        text=text,
        model=target.model,
        usage=Usage(provider_metadata={k: v for k, v in metadata.items() if v is not None}),
    )
