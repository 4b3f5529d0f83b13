"""A host's view of a server: start its command over stdio, as the host does, and ask
for its tools with the SDK's own client (`om-mcp setup`'s check of what it wrote)."""

from __future__ import annotations

import anyio


async def tools_over_stdio(command: str, args: list[str], env: dict[str, str], timeout: float) -> int:
    """How many tools the server started by `command args` lists; raises what went wrong."""
    from mcp import Client, StdioServerParameters  # the client side: loaded only here

    with anyio.fail_after(timeout):
        async with Client(StdioServerParameters(command=command, args=args, env=env)) as client:
            return len((await client.list_tools()).tools)
