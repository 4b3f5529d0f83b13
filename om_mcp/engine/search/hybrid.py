"""Blending word ranking with vector similarity (`retrieval.vector = true`).

Dense retrieval alone is weaker than words on conversational memory, and its
cosines and BM25 scores live on different scales: each list is turned into
z-scores over its own candidates, and the dense one is added at DENSE_WEIGHT.
A message only the vectors found enters below every word match's floor plus
its dense z-score, so a clear semantic match can still rise into the top.
"""

from __future__ import annotations

import statistics
from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

DENSE_WEIGHT = 1.0
K = TypeVar("K", bound=Hashable)


def _z(values: Mapping[K, float]) -> dict[K, float]:
    if not values:
        return {}
    mean = statistics.fmean(values.values())
    spread = statistics.pstdev(values.values()) if len(values) > 1 else 0.0
    return {k: (v - mean) / (spread or 1.0) for k, v in values.items()}


def blend(
    lexical: Sequence[tuple[K, float]], cosines: Mapping[K, float], weight: float = DENSE_WEIGHT
) -> list[tuple[K, float]]:
    """Keys best first by z(word score) + weight x z(cosine).

    `lexical` is the ranked word list (key, score); `cosines` the similarity of
    the query to every candidate vector of the same scope (key -> cosine).
    """
    if not cosines:
        return list(lexical)
    words = _z(dict(lexical))
    dense = _z(cosines)
    floor = min(words.values(), default=0.0) - 1.0
    keys = set(words) | set(dense)
    scored = {k: words.get(k, floor) + weight * dense.get(k, 0.0) for k in keys}
    return sorted(scored.items(), key=lambda pair: (-pair[1], str(pair[0])))
