"""Recall: a query sent to its mode (browse, threads, search), within the configured retrieval scope."""

from __future__ import annotations

from collections.abc import Callable

from om_mcp.config import Config
from om_mcp.engine.errors import InputError, translated
from om_mcp.engine.observation.lines import GROUP_ID
from om_mcp.engine.recall.browse import browse
from om_mcp.engine.recall.query import RecallOut, RecallQuery
from om_mcp.engine.recall.render import fit_to_budget
from om_mcp.engine.recall.search import search
from om_mcp.engine.recall.threads import list_threads
from om_mcp.engine.search import Retrieval
from om_mcp.neutral import neutralise, neutralise_inline
from om_mcp.store import Group, Store


def thread_only(config: Config) -> bool:
    """Retrieval limited to the asking thread (retrieval.scope 'thread')."""
    retrieval = config.observational_memory.retrieval_config
    return retrieval is not None and retrieval.scope == "thread"


def scoped(config: Config, query: RecallQuery) -> RecallQuery:
    """The query within the retrieval scope: with scope 'thread', asking for other threads is
    an error rather than an answer that silently leaves them out."""
    if not thread_only(config):
        return query
    if query.mode == "threads":
        raise InputError("mode 'threads' is off: retrieval.scope is 'thread'", field="mode")
    if query.target_thread_id not in (None, "current", query.thread_id):
        raise InputError("other threads are off: retrieval.scope is 'thread'", field="target_thread_id")
    return query.model_copy(update={"scope": "thread"})


async def recall(
    store: Store,
    retrieval: Retrieval,
    config: Config,
    count: Callable[[str], int],
    query: RecallQuery,
    resource_id: str,
) -> RecallOut:
    """Browse raw messages, list threads, or search, within the output token budget. What the agent
    reads is neutral (anyone's messages, titles and a model's lines: `om_mcp/neutral.py`), its lines
    as written: a recalled file or snippet keeps its markup."""
    out = await _recall(store, retrieval, config, count, scoped(config, query), resource_id)
    return out.model_copy(update={"text": neutralise_inline(out.text)})


async def _recall(
    store: Store,
    retrieval: Retrieval,
    config: Config,
    count: Callable[[str], int],
    query: RecallQuery,
    resource_id: str,
) -> RecallOut:
    budget = min(query.max_tokens or config.output_token_budget, config.output_token_budget)
    if query.mode == "threads":
        return await list_threads(store, query, resource_id, budget, count)
    if query.mode == "search":
        if not query.query:
            raise InputError("mode 'search' needs a query", field="query")
        return await search(retrieval, query, resource_id, budget, count)
    if query.cursor and (archived := await retired_group(store, query.cursor.strip(), resource_id)) is not None:
        return read_retired(archived, budget, count)
    return await translated(browse(store, query, resource_id, budget, count))


async def retired_group(store: Store, group_id: str, resource_id: str) -> Group | None:
    """The retired group (an archived day, a retired line) a cursor names, if it is this resource's."""
    if not GROUP_ID.match(group_id):
        return None
    found = (await store.groups_by_id([group_id])).get(group_id)
    if found is None or not found.retired:
        return None
    record = await store.record((await store.group_records([group_id]))[group_id])
    return found if record is not None and record.resource_id == resource_id else None


def read_retired(group: Group, budget: int, count: Callable[[str], int]) -> RecallOut:
    """An archived day (or a retired line), whole, marked as out of the log."""
    head = (
        f"Retired observations ({group.retired_reason} by generation {group.retired_by})"
        + (f", range {group.range}" if group.range else "")
        + "; they are no longer in the log, so a newer fact may replace them:"
    )
    kept, truncated, _ = fit_to_budget([head, neutralise(group.text.strip())], budget, count)
    return RecallOut(mode="messages", text="\n".join(kept), count=1, truncated=truncated)
