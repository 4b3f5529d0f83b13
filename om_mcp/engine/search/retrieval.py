"""Search over a resource's memory: raw messages and observation groups, by
words always and by meaning when `retrieval.vector` is on.

Search never waits for a model: words are indexed with the message, vectors
are built by the background worker, and a query only uses what is indexed.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from om_mcp.engine.results import SearchResult
from om_mcp.engine.search.hybrid import blend
from om_mcp.engine.search.query import parse_query
from om_mcp.engine.search.rank import rank
from om_mcp.engine.text import message_text
from om_mcp.logs import one_line
from om_mcp.models.embeddings import Embedder, make_embedder
from om_mcp.store import Group, Message, Store

log = logging.getLogger(__name__)
Key = tuple[str, object]  # ("message", seq) or ("group", group id)

RRF_K = 60
FTS_HITS = 50  # index matches fetched and ranked per query, with the messages around each
GROUP_WEIGHT = 0.5  # observation groups join the messages at this weight (reciprocal-rank fusion)
EMBED_BATCH = 32


class Retrieval:
    def __init__(self, store: Store, retrieval_config, embedder: Embedder | None = None):
        self.store = store
        self.config = retrieval_config
        if embedder is None and retrieval_config is not None and retrieval_config.vector:
            embedder = make_embedder(retrieval_config.embedder)
        self.embedder = embedder

    async def index(self, resource_id: str) -> int:
        """Embed what has no vector yet (background work); returns how many."""
        if self.embedder is None:
            return 0
        done = 0
        while True:
            pending = await self.store.pending_vectors(resource_id, self.embedder.name, limit=EMBED_BATCH)
            if not pending:
                return done
            vectors = await self.embedder.embed([p.text for p in pending])
            if len(vectors) != len(pending):
                # Storing a partial answer would leave the rest pending forever: the loop would spin.
                raise RuntimeError(
                    f"embedder {self.embedder.name!r} returned {len(vectors)} vectors for {len(pending)} texts"
                )
            await self.store.put_vectors(resource_id, self.embedder.name, list(zip(pending, vectors)))
            done += len(pending)

    async def search(
        self, resource_id: str, text: str, *, thread_id: str | None = None, limit: int = 20, now: datetime | None = None
    ) -> list[SearchResult]:
        fused, group_rows = await self._ranked(resource_id, text, thread_id, limit, now, groups=True)
        return await self._results(fused[:limit], group_rows)

    async def matching_messages(
        self, resource_id: str, text: str, *, thread_id: str | None = None, limit: int = 20, now: datetime | None = None
    ) -> list[tuple[Message, float]]:
        """The stored messages this search ranks best, best first, with their scores, and no observation
        groups: for a view that shows whole messages (the status page)."""
        fused, _ = await self._ranked(resource_id, text, thread_id, limit, now, groups=False)
        seqs = [(ref, score) for (_, ref), score in fused[:limit]]
        by_seq = await self.store.messages_by_seq([seq for seq, _ in seqs]) if seqs else {}
        return [(by_seq[seq], round(score, 6)) for seq, score in seqs if seq in by_seq]

    async def _ranked(
        self, resource_id: str, text: str, thread_id: str | None, limit: int, now: datetime | None, *, groups: bool
    ) -> tuple[list[tuple[Any, float]], dict[str, Group]]:
        """The fused ranking of messages (and, with `groups`, observation groups), and the groups read."""
        # "last June" needs today's date to name a year.
        query = parse_query(text, now or datetime.now(UTC))
        if not query.terms:
            return [], {}
        hits, stats = await self.store.search_messages(
            resource_id, query, thread_id=thread_id, limit=max(FTS_HITS, limit)
        )
        lexical: list[tuple[Key, float]] = [(("message", r.hit.seq), r.score) for r in rank(hits, query, stats)]
        group_hits = (
            await self.store.search_groups(resource_id, query.match, thread_id=thread_id, limit=limit) if groups else []
        )
        group_rows = {h.group.id: h.group for h in group_hits}
        ranked: list[tuple[Key, float]] = [(("group", h.group.id), h.score) for h in group_hits]
        cosines: dict[Key, float] = {}
        if self.embedder is not None:
            try:
                [vector] = await self.embedder.embed([text], query=True)
                nearest = await self.store.nearest_vectors(resource_id, self.embedder.name, vector, thread_id=thread_id)
                cosines = {(kind, int(ref) if kind == "message" else ref): cos for kind, ref, cos in nearest}
            except Exception as error:  # noqa: BLE001 - search falls back to words alone
                log.warning("semantic search unavailable: %s", one_line(error))
        messages = [key for key, _ in blend(lexical, {k: v for k, v in cosines.items() if k[0] == "message"})]
        if not groups:
            return _fuse([(1.0, messages)]), {}
        ranked_groups = [key for key, _ in blend(ranked, {k: v for k, v in cosines.items() if k[0] == "group"})]
        return _fuse([(1.0, messages), (GROUP_WEIGHT, ranked_groups)]), group_rows

    async def _results(self, fused, group_rows: dict[str, Group]) -> list[SearchResult]:
        seqs = [ref for (kind, ref), _ in fused if kind == "message"]
        unseen = [ref for (kind, ref), _ in fused if kind == "group" and ref not in group_rows]
        # Each read is a trip to the database thread: skip the ones with nothing to fetch.
        by_seq = await self.store.messages_by_seq(seqs) if seqs else {}
        if unseen:
            group_rows = {**group_rows, **await self.store.groups_by_id(unseen)}
        results = []
        for (kind, ref), score in fused:
            if kind == "message":
                message = by_seq.get(ref)
                if message is None:
                    continue
                results.append(
                    SearchResult(
                        message_id=message.id,
                        thread_id=message.thread_id,
                        role=message.role,
                        created_at=message.created_at,
                        score=round(score, 6),
                        snippet=message_text(message.parts),
                    )
                )
            else:
                group = group_rows.get(ref)
                if group is None:
                    continue
                results.append(
                    SearchResult(
                        message_id=group.first_message_id or "",
                        thread_id=group.thread_id or "",
                        role="observation",
                        created_at=group.observed_at or group.created_at,
                        score=round(score, 6),
                        snippet=group.text,
                        source="observation",
                        range=group.range,
                        id=group.id,
                        retired=group.retired_reason if group.retired else None,
                        retired_by=group.retired_by if group.retired else None,
                    )
                )
        return results


def _fuse(lists: list[tuple[float, list]]) -> list[tuple[object, float]]:
    """Weighted reciprocal-rank fusion."""
    scores: dict[object, float] = {}
    for weight, keys in lists:
        for position, key in enumerate(keys):
            scores[key] = scores.get(key, 0.0) + weight / (RRF_K + position + 1)
    return sorted(scores.items(), key=lambda pair: -pair[1])
