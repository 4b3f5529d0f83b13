"""The memory engine: messages, token counts, observation, reflection, recall.

Nothing here knows about MCP or transports; `Memory` is the library entry point.
"""
