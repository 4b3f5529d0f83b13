"""Search over a resource's memory: words always, meaning when `retrieval.vector` is on.

A question becomes weighted words (query.py, with related terms from expand.py); the store's index finds the
candidates and the messages around them (om_mcp.store.search); rank.py orders them (BM25F over a message and
the two before it, thread, date, author and answer-shape signals); hybrid.py blends in vector similarity;
retrieval.py puts messages and observation groups together for `recall`.
"""

from om_mcp.engine.search.query import Query, parse_query
from om_mcp.engine.search.retrieval import Retrieval

__all__ = ["Query", "Retrieval", "parse_query"]
