"""The tools, one module each; `register` adds them all to a server."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

from om_mcp.server.tools import context, cycles, messages, recall, threads, working_memory


def register(server: MCPServer) -> None:
    for module in (messages, context, recall, cycles, working_memory, threads):
        module.register(server)
