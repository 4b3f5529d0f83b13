"""Recall: the raw messages behind the observations, the user's threads, and search."""

from om_mcp.engine.recall.query import RecallOut, RecallQuery

__all__ = ["RecallOut", "RecallQuery"]
