"""MCP clients for tests: connect in either protocol era, call tools, read results."""

from __future__ import annotations

import json
from typing import Any

from mcp import Client


def connect(server, mode: str = "auto", **kwargs: Any) -> Client:
    """An in-process client: the 2026-07-28 era by default, the 2025-11-25 handshake in legacy."""
    if mode == "legacy":
        return Client(server, mode="legacy", **kwargs)  # raise_exceptions would raise inside the server task
    return Client(server, raise_exceptions=True, **kwargs)


def result_text(result: Any) -> str:
    return result.content[0].text if result.content else ""


async def call(client: Client, tool: str, **arguments: Any) -> str:
    """Call a tool that must succeed; returns its text."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, f"{tool} failed: {result_text(result)}"
    return result_text(result)


async def ok(client: Client, tool: str, **arguments: Any) -> Any:
    """Call a tool that must succeed; returns its JSON result decoded."""
    text = await call(client, tool, **arguments)
    return json.loads(text)


async def fail(client: Client, tool: str, **arguments: Any) -> str:
    """Call a tool that must fail; returns the error text."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, f"{tool} unexpectedly succeeded: {result_text(result)}"
    return result_text(result)


async def read_json(client: Client, uri: str) -> Any:
    result = await client.read_resource(uri)
    return json.loads(result.contents[0].text)
