"""om-mcp: long-term memory for MCP hosts, with an Observational Memory engine on SQLite."""

__version__ = "0.1.0"

__all__ = ["__version__"]
