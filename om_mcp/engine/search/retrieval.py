"""Search over a resource's memory: raw messages and observation groups, by
words always and by meaning when `retrieval.vector` is on.

Search never waits for a model: words are indexed with the message, vectors
are built by the background worker, and a query only uses what is indexed.
"""

from __future__ import annotations

import logging
from datetime import datetime, timezone

from om_mcp.engine.messages import message_text
from om_mcp.engine.results import SearchResult
from om_mcp.engine.search.query import CANDIDATES, Candidate, parse_query, rerank
from om_mcp.models.embeddings import Embedder, make_embedder
from om_mcp.store import Group, Store

log = logging.getLogger(__name__)

RRF_K = 60
# Dense retrieval is weaker than BM25 on conversational memory (LoCoMo: R@10 64 vs 80),
# so it is a bonus on top of the normalised word score, not an equal vote.
DENSE_WEIGHT = 0.3
GROUP_WEIGHT = 0.5
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
        self, resource_id: str, text: str, *, thread_id: str | None = None, limit: int = 20,
        now: datetime | None = None,
    ) -> list[SearchResult]:
        # "last June" needs today's date to name a year.
        query = parse_query(text, now or datetime.now(timezone.utc))
        hits = await self.store.search_messages(resource_id, query.match, thread_id=thread_id, limit=CANDIDATES)
        by_seq = await self.store.messages_by_seq([h.seq for h in hits])
        candidates = [
            Candidate(
                key=h.seq, score=h.score, thread_id=by_seq[h.seq].thread_id,
                created_at=datetime.fromisoformat(by_seq[h.seq].created_at),
                text=message_text(by_seq[h.seq].parts), author=by_seq[h.seq].metadata.get("speaker"),
            )
            for h in hits if h.seq in by_seq
        ]
        lexical = {("message", c.key): score for c, score in rerank(candidates, query)}
        group_hits = await self.store.search_groups(resource_id, query.match, thread_id=thread_id, limit=limit)
        group_rows = {h.group.id: h.group for h in group_hits}
        group_scores = {("group", h.group.id): h.score for h in group_hits}
        dense: dict[tuple[str, object], float] = {}
        if self.embedder is not None and query.terms:
            try:
                [vector] = await self.embedder.embed([text], query=True)
                nearest = await self.store.nearest_vectors(resource_id, self.embedder.name, vector,
                                                           thread_id=thread_id)
                dense = _dense_bonus([((k, int(r) if k == "message" else r), cos) for k, r, cos in nearest])
            except Exception as error:  # noqa: BLE001 - search falls back to words alone
                log.warning("semantic search unavailable: %s", error)
        messages = _blend(lexical, {k: v for k, v in dense.items() if k[0] == "message"})
        ranked_groups = _blend(group_scores, {k: v for k, v in dense.items() if k[0] == "group"})
        fused = _fuse([(1.0, messages), (GROUP_WEIGHT, ranked_groups)]) if ranked_groups else [
            (key, 1.0 / (RRF_K + i + 1)) for i, key in enumerate(messages)
        ]
        return await self._results(fused[:limit], by_seq, group_rows)

    async def _results(self, fused, by_seq, group_rows: dict[str, Group]) -> list[SearchResult]:
        missing = [ref for (kind, ref), _ in fused if kind == "message" and ref not in by_seq]
        by_seq = {**by_seq, **await self.store.messages_by_seq(missing)}
        unseen = [ref for (kind, ref), _ in fused if kind == "group" and ref not in group_rows]
        group_rows = {**group_rows, **await self.store.groups_by_id(unseen)}
        results = []
        for (kind, ref), score in fused:
            if kind == "message":
                message = by_seq.get(ref)
                if message is None:
                    continue
                results.append(SearchResult(
                    message_id=message.id, thread_id=message.thread_id, role=message.role,
                    created_at=message.created_at, score=round(score, 6), snippet=message_text(message.parts),
                ))
            else:
                group = group_rows.get(ref)
                if group is None:
                    continue
                results.append(SearchResult(
                    message_id=group.first_message_id or "", thread_id=group.thread_id or "", role="observation",
                    created_at=group.observed_at or group.created_at, score=round(score, 6), snippet=group.text,
                    source="observation", range=group.range,
                ))
        return results


def _dense_bonus(scored: list[tuple[object, float]]) -> dict[object, float]:
    """Cosines rescaled to [0, 1] between the median and the best: only the
    clearly-better-than-typical neighbours earn a bonus."""
    if not scored:
        return {}
    values = sorted(cos for _, cos in scored)
    median, best = values[len(values) // 2], values[-1]
    span = (best - median) or 1.0
    return {key: min(max((cos - median) / span, 0.0), 1.0) for key, cos in scored}


def _blend(lexical: dict[object, float], dense: dict[object, float]) -> list[object]:
    """Keys ranked by word score / best word score + DENSE_WEIGHT x dense bonus."""
    top = max(lexical.values(), default=0.0) or 1.0
    scores = {key: score / top for key, score in lexical.items()}
    for key, bonus in dense.items():
        scores[key] = scores.get(key, 0.0) + DENSE_WEIGHT * bonus
    return [key for key, score in sorted(scores.items(), key=lambda pair: -pair[1]) if score > 0]


def _fuse(lists: list[tuple[float, list]]) -> list[tuple[object, float]]:
    """Weighted reciprocal-rank fusion."""
    scores: dict[object, float] = {}
    for weight, keys in lists:
        for rank, key in enumerate(keys):
            scores[key] = scores.get(key, 0.0) + weight / (RRF_K + rank + 1)
    return sorted(scores.items(), key=lambda pair: -pair[1])
