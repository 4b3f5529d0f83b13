"""Forgetting a phrase everywhere it was copied: the rules both backends apply.

`om-mcp forget --match` deletes the messages and observation lines that hold a phrase
(the engine works out which). What the models derived from them can quote it too: a
thread's current task and suggested response, extracted values (on the record and in
thread metadata under `om`), a thread's title, the events of the cycles that wrote them,
the working memory and the model-health excerpt of an unusable answer. Those are scrubbed
here, value by value, so the phrase leaves the file without the rest of the memory going
with it.

Matching is on folded text (`fold`: Unicode NFC after case folding), so it ignores case in
any script and a precomposed "é" matches an "e" followed by a combining accent. The SQL only
preselects rows (`Tx.contains`, on `preselect`'s needle) and every row is checked here on
every string it stores: at any depth of a JSON value, keys included, and the text inside a
file part's base64 data.
"""

from __future__ import annotations

import base64
import binascii
import json
import unicodedata
from collections.abc import Iterator
from typing import Any

MIN_PRESELECT = 3  # a shorter needle preselects too much to be worth an index scan


def fold(text: str) -> str:
    """The form text is compared in: case folded, then NFC (Unicode's canonical caseless match)."""
    return unicodedata.normalize("NFC", unicodedata.normalize("NFD", text).casefold())


def needle(phrase: str) -> str:
    return fold(phrase)


# ASCII characters that folding makes out of other characters (the Kelvin sign into k, ß into ss,
# ﬁ into fi, ẚ into a...): a database's ASCII lowering does not, so an SQL needle holding one could
# miss a row that folds to it. Derived from Python's Unicode tables (a test recomputes it).
FOLDED_INTO_ASCII = frozenset(";`afiklnst")
# What a JSON column spells differently from the text it holds (escaped): not in an SQL needle on one.
_ESCAPED_IN_JSON = frozenset('"\\')


def preselect(found: str, *, exact: bool, json_column: bool = False) -> str | None:
    """The needle the SQL looks for (`Tx.contains`), so that it finds at least every row that holds
    the folded phrase: the phrase itself where the backend folds exactly (SQLite, with our function)
    and the column is plain text; else the longest run of it the column and the backend spell as
    the phrase does (no JSON escapes; on PostgreSQL, ASCII that folding cannot make out of another
    character). None when no run is long enough: every row in scope is then checked here."""
    if exact and not json_column:
        return found

    def fits(char: str) -> bool:
        if char in _ESCAPED_IN_JSON or ord(char) < 0x20:
            return False
        return exact or (char.isascii() and char not in FOLDED_INTO_ASCII)

    runs, run = [], []
    for char in found:
        if fits(char):
            run.append(char)
        else:
            runs.append("".join(run))
            run = []
    runs.append("".join(run))
    best = max(runs, key=len)
    return best if len(best.strip()) >= MIN_PRESELECT else None


def strings(value: Any) -> Iterator[str]:
    """Every string a JSON value holds, keys included, at any depth; a base64 `data` field also as the
    text it decodes to, when it is text (a file part's payload)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from strings(item)
            if key == "data" and isinstance(item, str):
                decoded = decoded_text(item)
                if decoded is not None:
                    yield decoded
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def decoded_text(data: str) -> str | None:
    """The UTF-8 text a base64 payload (or a data: URL) holds, else None (an image, not base64)."""
    payload = data.split(",", 1)[1] if data.startswith("data:") and "," in data else data
    try:
        raw = base64.b64decode(payload, validate=False)
        return raw.decode("utf-8")
    except (binascii.Error, ValueError, UnicodeDecodeError):
        return None


def holds(value: Any, found: str) -> bool:
    """Does any string in a JSON value contain the (folded) phrase? Keys and decoded payloads count too."""
    return any(found in fold(s) for s in strings(value))


def holds_json(text: str | None, found: str) -> bool:
    """`holds` on a JSON column's text (a value that is not JSON is checked as it is)."""
    if not text:
        return False
    try:
        return holds(json.loads(text), found)
    except ValueError:
        return found in fold(text)


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
    if found not in fold(text):
        return text, 0
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        cleaned, removed = without(parsed, found)
        return json.dumps(cleaned, ensure_ascii=False), removed
    kept = [line for line in text.splitlines() if found not in fold(line)]
    return "\n".join(kept), len(text.splitlines()) - len(kept)


def without_excerpt(error: str) -> str:
    """A model-health error whose excerpt quoted forgotten text: what it says, without the quote."""
    head = error.split("; last: ", 1)[0] if "; last: " in error else ""
    note = "(an excerpt of the answer was removed: it quoted forgotten text)"
    return f"{head}; last: {note}" if head else note
