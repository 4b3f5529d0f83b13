"""Full-text search: what a message contributes to the index, and how any
user string becomes a safe FTS5 query.

Every query word is quoted, so FTS5 syntax characters in user input (quotes,
`*`, `-`, `NEAR`, `AND`, parentheses, column filters) are plain text.
"""

from __future__ import annotations

import re
from datetime import datetime

from om_mcp.engine.messages import message_text

_WORD = re.compile(r"[\w']+", re.UNICODE)

STOP_WORDS = frozenset(
    """a about above after again against all am an and any are aren't as at be because been before being
    below between both but by can can't cannot could couldn't did didn't do does doesn't doing don't down
    during each few for from further had hadn't has hasn't have haven't having he he'd he'll he's her here
    here's hers herself him himself his how how's i i'd i'll i'm i've if in into is isn't it it's its itself
    let's me more most mustn't my myself no nor not of off on once only or other ought our ours ourselves
    out over own same shan't she she'd she'll she's should shouldn't so some such than that that's the their
    theirs them themselves then there there's these they they'd they'll they're they've this those through
    to too under until up very was wasn't we we'd we'll we're we've were weren't what what's when when's
    where where's which while who who's whom why why's with won't would wouldn't you you'd you'll you're
    you've your yours yourself yourselves""".split()
)


def query_terms(query: str) -> list[str]:
    """Distinct searchable words of a query, in order, stop words removed."""
    seen: list[str] = []
    for raw in _WORD.findall(query.lower()):
        word = raw.strip("'_")
        if word.endswith("'s"):
            word = word[:-2]
        if not word or word in STOP_WORDS or word in seen:
            continue
        seen.append(word)
    return seen


def fts_match(terms: list[str]) -> str:
    """An FTS5 MATCH expression OR-ing the quoted terms ('' when there are none)."""
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


def index_text(parts: list[dict], metadata: dict | None = None) -> str:
    text = message_text(parts)
    speaker = (metadata or {}).get("speaker")
    return f"{speaker}: {text}" if speaker else text


def index_dates(created_at: str) -> str:
    """Date words for a message's time, so 'May 2023' or 'on a Sunday' can match."""
    dt = datetime.fromisoformat(created_at)
    return f"{dt:%B} {dt.year} {dt:%A} {dt.day}"
