"""Test doubles shipped with the package: a scripted in-process model and a
scripted OpenAI-compatible HTTP server on loopback (for litellm's real path), and a throwaway
PostgreSQL server for tests and benchmarks (postgres_server.py)."""

from om_mcp.testing.scripted import ScriptedCall, ScriptedModel

__all__ = ["ScriptedCall", "ScriptedModel"]
