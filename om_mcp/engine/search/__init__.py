"""Search over a resource's memory: words (FTS5 BM25, re-ranked) and, optionally, meaning."""

from om_mcp.engine.search.query import Query, parse_query
from om_mcp.engine.search.retrieval import Retrieval

__all__ = ["Query", "Retrieval", "parse_query"]
