"""Forgetting a phrase everywhere it was copied: the rules both backends apply.

`om-mcp forget --match` deletes the messages and observation lines that hold a phrase
(the engine works out which). What the models derived from them can quote it too: a
thread's current task and suggested response, extracted values (on the record and in
thread metadata under `om`), a thread's title, the events of the cycles that wrote them,
and the working memory. Those are scrubbed here, value by value, so the phrase leaves
the file without the rest of the memory going with it.

Matching is by `casefold`, so it ignores case in any script; the SQL only preselects
rows (`Tx.contains`) and every row is checked here.
"""

from __future__ import annotations

import json
from typing import Any


def needle(phrase: str) -> str:
    return phrase.casefold()


def holds(value: Any, found: str) -> bool:
    """Does any string in a JSON value contain the (casefolded) phrase? Keys count too."""
    if isinstance(value, str):
        return found in value.casefold()
    if isinstance(value, dict):
        return any(holds(k, found) or holds(v, found) for k, v in value.items())
    if isinstance(value, list):
        return any(holds(v, found) for v in value)
    return False


def without(value: dict[str, Any], found: str) -> tuple[dict[str, Any], int]:
    """A JSON object without the entries that hold the phrase (at any depth); how many went."""
    out: dict[str, Any] = {}
    removed = 0
    for key, item in value.items():
        if holds(key, found) or (not isinstance(item, dict) and holds(item, found)):
            removed += 1
            continue
        if isinstance(item, dict):
            item, n = without(item, found)
            removed += n
        out[key] = item
    return out, removed


def text_without(text: str, found: str) -> tuple[str, int]:
    """Working memory without the phrase: a JSON object loses the entries holding it, Markdown
    the lines holding it. Returns the new text and how many entries or lines went."""
    if found not in text.casefold():
        return text, 0
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        cleaned, removed = without(parsed, found)
        return json.dumps(cleaned, ensure_ascii=False), removed
    kept = [line for line in text.splitlines() if found not in line.casefold()]
    return "\n".join(kept), len(text.splitlines()) - len(kept)
