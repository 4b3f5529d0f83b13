"""Builders shared by the tests: engine configs and scripted models (engine.py),
MCP clients (mcp.py), child processes (processes.py), a throwaway PostgreSQL (postgres.py)."""
