"""Phrase tombstones: a phrase `forget --match` took out, kept as keyed hashes, found again in new text.

A phrase is compared as its words: the text is put in Unicode NFC, cut into words (runs of letters,
digits and combining marks; each Chinese, Japanese or Korean character is a word of its own, as
those scripts put no spaces between words), and each word folded (`scrub.fold`: case and Unicode
normalisation). So "My old address", "my OLD address:" and "my-old-address" are the same three
words. A phrase given to forget is matched where it stands as whole words; a phrase that starts or
ends inside a word ("ld addr") is kept as the words it has.

What is stored, per forgotten phrase (`om_tombstones`, never the text):

* kind `phrase`: a keyed BLAKE2b of the scope (the resource it was forgotten in, or `*` for every
  resource) and the phrase's words;
* kind `phrase-head`: a keyed BLAKE2b of its first word (60 hex digits) followed by how many words
  the phrase has (4 hex digits): 64 hex digits, as every tombstone; several phrases may share one.

Checking a text costs one keyed hash per distinct word (the heads are looked up in a set), and a
full hash only where a head matched; nothing at all when this database has no phrase tombstone.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field

from om_mcp.store.scrub import fold

PHRASE, HEAD = "phrase", "phrase-head"
EVERY = "*"  # the scope of a phrase forgotten in every resource
MARKER = "[forgotten]"
MAX_WORDS = 64  # a longer phrase is kept as its first MAX_WORDS words
_HEAD_BYTES = 30  # a head's hash; its word count follows in 4 hex digits

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_WORD = re.compile(rf"[{_CJK}]|(?:[^\W_{_CJK}]|[\u0300-\u036f])+")


def words(text: str) -> list[str]:
    """The folded words of a text, as a phrase tombstone compares them."""
    return [fold(w) for w in _WORD.findall(unicodedata.normalize("NFC", text))]


def _key(secret: str) -> bytes:
    return bytes.fromhex(secret)[:64]


def digest(secret: str, scope: str, said: Iterable[str]) -> str:
    data = "\x00".join((PHRASE, scope, "\x1f".join(said))).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(data, key=_key(secret), digest_size=32).hexdigest()


def head(secret: str, word: str) -> str:
    data = f"{HEAD}\x00{word}".encode("utf-8", "surrogatepass")
    return hashlib.blake2b(data, key=_key(secret), digest_size=_HEAD_BYTES).hexdigest()


def tombstones(secret: str, phrase: str, scope: str) -> list[tuple[str, str]]:
    """The (digest, kind) rows that keep `phrase` forgotten in `scope` (a resource, or EVERY)."""
    said = words(phrase)[:MAX_WORDS]
    if not said:
        return []
    return [(digest(secret, scope, said), PHRASE), (f"{head(secret, said[0])}{len(said):04x}", HEAD)]


@dataclass
class Phrases:
    """The forgotten phrases of one database, as a matcher (built from its tombstones)."""

    secret: str
    heads: dict[str, set[int]]  # first word's head -> the word counts of phrases starting with it
    digests: set[str]
    _seen: dict[str, str] = field(default_factory=dict)  # word -> its head, within this matcher

    @classmethod
    def of(cls, secret: str, rows: Iterable[tuple[str, str]]) -> Phrases | None:
        """From (digest, kind) rows; None when none is a phrase."""
        heads: dict[str, set[int]] = {}
        digests: set[str] = set()
        for value, kind in rows:
            if kind == HEAD:
                heads.setdefault(value[: 2 * _HEAD_BYTES], set()).add(int(value[2 * _HEAD_BYTES :], 16))
            elif kind == PHRASE:
                digests.add(value)
        return cls(secret, heads, digests) if heads and digests else None

    def _head(self, word: str) -> str:
        found = self._seen.get(word)
        if found is None:
            if len(self._seen) > 50_000:
                self._seen.clear()
            found = self._seen[word] = head(self.secret, word)
        return found

    def spans(self, text: str, scopes: tuple[str, ...]) -> list[tuple[int, int]]:
        """(start, end) of each forgotten phrase in the NFC form of `text` (word boundaries), in order."""
        if not text:
            return []
        normal = unicodedata.normalize("NFC", text)
        found = [(m.start(), m.end(), fold(m.group())) for m in _WORD.finditer(normal)]
        out: list[tuple[int, int]] = []
        taken = -1
        for i, (start, _end, word) in enumerate(found):
            if start < taken:
                continue
            counts = self.heads.get(self._head(word))
            if not counts:
                continue
            for n in sorted(counts, reverse=True):  # the longest phrase first
                window = found[i : i + n]
                if len(window) < n:
                    continue
                said = [w for _, _, w in window]
                if any(digest(self.secret, scope, said) in self.digests for scope in scopes):
                    out.append((start, window[-1][1]))
                    taken = window[-1][1]
                    break
        return out

    def holds(self, text: str, scopes: tuple[str, ...]) -> bool:
        return bool(self.spans(text, scopes))

    def replace(self, text: str, scopes: tuple[str, ...]) -> tuple[str, int]:
        """The text with each forgotten phrase replaced by MARKER, and how many were."""
        spans = self.spans(text, scopes)
        if not spans:
            return text, 0
        normal = unicodedata.normalize("NFC", text)
        out, position = [], 0
        for start, end in spans:
            out += [normal[position:start], MARKER]
            position = end
        out.append(normal[position:])
        return "".join(out), len(spans)
