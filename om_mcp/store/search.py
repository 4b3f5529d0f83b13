"""What a full-text search asks of a store, and what it gets back; the same for every backend.

The engine turns a question into a `SearchPlan` (words, their forms and weights, dates) and ranks what comes
back; a store finds the candidates in its index and returns them with the messages around them in one trip.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class TextHit:
    """A message the search fetched: a match (score > 0) or the context around one (score 0)."""

    seq: int
    score: float  # candidate score of the message's own words (> 0); 0 when fetched only as context
    thread_id: str
    role: str
    created_at: str
    body: str
    metadata: str | None  # JSON text as stored


@dataclass(frozen=True)
class TermStats:
    """What IDF and length normalisation need, read from the index itself."""

    rows: int  # messages in the index
    avg_words: float  # average words per message
    df: dict[str, int]  # document frequency of each asked form that exists


class SearchPlan(Protocol):
    def forms(self) -> list[str]:
        """Every index word the query may match."""

    def date_ranges(self) -> Sequence[tuple[str, str]]:
        """[start, end) ISO times the query names: their messages join the candidates."""

    def weighted_match(self, df: dict[str, int], rows: int, budget: int = ...) -> list[tuple[str, float]]:
        """One (MATCH expression, weight) per query word, given the index's document frequencies."""
