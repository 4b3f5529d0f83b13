"""Readers that turn other tools' conversation files into om-mcp messages."""

from om_mcp.importers.openai_messages import ImportFormatError, parse_openai_messages, read_openai_messages

__all__ = ["ImportFormatError", "parse_openai_messages", "read_openai_messages"]
