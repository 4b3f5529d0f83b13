"""Does a value read as words (`accessTokenValue`, `user_api_key`, `DEFAULT_TOKEN`) or as a random key?

After `API_KEY=`, `userApiKeyValue` names a variable and `ztS8OkaF9Lx4` is a key. A pattern
for identifiers cannot tell them apart: one in ten random base62 values of 12-32 characters has
the shape of a camel-case name (`zt` `S8` `Oka` `F9` `Lx4`). So the question is asked as a
likelihood ratio. A small model writes identifiers: parts that are words (the letter tokens of
OpenAI's o200k_base vocabulary, most frequent first: `words.txt`) or any letters, in lower case,
Title case or upper case, joined by a case step, `_` or `-`, each followed now and then by a few
digits. A random key draws each character uniformly from the smallest alphabet keys are written
in that holds the value (hex, lower case, upper case with digits, base62, base64url, ...).
`evidence` is log2 of how much more likely the first is than the second (the likeliest way of
writing the value, which only understates it).

Under the second, E[2 ** evidence] <= 1 for a value of any length, so by Markov's inequality a
random key reaches `READS_AS_WORDS` bits with probability at most 2 ** -16, about 1 in 65,000,
whatever its length and alphabet; what is measured is far below that (tests/test_privacy.py draws
random keys of every documented assignment shape: none kept). Identifiers of 10 characters and
more that real code assigns to a secret-named variable read as words in 93-96 % of cases
(camel-case and snake-case names from installed packages); the rest are redacted, which costs a
variable's name, never a secret.

The list is loaded the first time a value needs it: the host hook is a new process on every
prompt and seldom meets a `key = ...` at all. `build` writes it again from the o200k_base rank file
(litellm's copy, `om_mcp.engine.o200k.bundled_rank_file()`; tests/test_privacy.py checks the file).
"""

from __future__ import annotations

import math
import string
from functools import cache, lru_cache
from pathlib import Path

WORDS = Path(__file__).with_name("words.txt")
WORD_COUNT = 30_000  # the most frequent letter tokens of o200k_base kept in words.txt
READS_AS_WORDS = 16.0  # bits: a random key passes with probability at most 2 ** -16

_LOG2 = math.log2
_ALPHABETS = tuple(
    (frozenset(chars), _LOG2(len(chars)))
    for chars in (
        string.digits,
        string.digits + "abcdef",
        string.digits + "ABCDEF",
        string.ascii_lowercase,
        string.ascii_uppercase,
        string.ascii_lowercase + string.digits,
        string.ascii_uppercase + string.digits,
        string.ascii_letters,
        string.ascii_letters + string.digits,
        string.ascii_letters + string.digits + "-_",
    )
)
_MAX_PART = 24


class _Model:
    """How identifiers are written, as log2 probabilities (each choice sums to one)."""

    KNOWN = 0.9  # a part is a known word (by its rank: Zipf's law), else any letters
    OFFSET = 10.0

    def __init__(self, words: list[str]):
        self.rank = dict(zip(words, range(1, len(words) + 1)))
        total = math.log(len(words) + self.OFFSET + 0.5) - math.log(self.OFFSET + 0.5)  # sum of 1/(rank + offset)
        self.known_bits = _LOG2(self.KNOWN / total)
        self.stop, self.more = _LOG2(0.25), _LOG2(0.75)  # after a part: the end, or another part
        self.joins = {"": _LOG2(0.5), "_": _LOG2(0.35), "-": _LOG2(0.15)}
        self.first = {"lower": _LOG2(0.55), "title": _LOG2(0.3), "upper": _LOG2(0.15)}
        self.stepped = {"title": _LOG2(0.75), "upper": _LOG2(0.15), "lower": _LOG2(0.1)}  # after a case step
        self.same, self.other = _LOG2(0.85), _LOG2(0.075)  # after `_` or `-`: the same case, or another
        self.digits = [_LOG2(0.9)] + [_LOG2(0.1 / 3) - n * _LOG2(10) for n in (1, 2, 3)]
        self.edges = [_LOG2(0.9), _LOG2(0.07), _LOG2(0.03)]  # 0, 1, 2 underscores before and after: _x, __x__
        # any letters: a length (geometric, 0.3), then each of 26 letters
        unknown = _LOG2(1 - self.KNOWN) + _LOG2(0.3)
        self.unknown = [unknown + (n - 1) * _LOG2(0.7) - n * _LOG2(26) for n in range(_MAX_PART + 1)]

    def parts(self, core: str, start: int) -> list[tuple[int, tuple[str, ...], float]]:
        """Every part that can start at `start`: (its end, its cases, log2 P of its letters)."""
        out = []
        for end in range(start + 1, min(len(core), start + _MAX_PART) + 1):
            char = core[end - 1]
            if not char.isascii() or not char.isalpha():
                break
            letters = core[start:end]
            cases = _cases(letters)
            if not cases:
                continue
            rank = self.rank.get(letters.lower())
            bits = self.unknown[end - start]
            if rank is not None:
                bits = max(bits, self.known_bits - _LOG2(rank + self.OFFSET))
            out.append((end, cases, bits))
        return out

    def likelihood(self, value: str) -> float:
        """log2 of the likeliest way the model writes `value` (-inf: it never does)."""
        lead, trail = len(value) - len(value.lstrip("_")), len(value) - len(value.rstrip("_"))
        if lead > 2 or trail > 2 or lead + trail >= len(value):
            return -math.inf
        core = value[lead : len(value) - trail]
        n = len(core)
        # best[i][case]: the likeliest writing of core[:i] that ends a part (its digits too) in that case
        best: list[dict[str, float]] = [{} for _ in range(n + 1)]
        for i in range(n):
            if i == 0:
                starts: list[tuple[int, str | None, str, float]] = [(0, None, "", 0.0)]
            else:
                starts = [
                    (i + len(join), case, join, bits + self.more + join_bits)
                    for case, bits in best[i].items()
                    for join, join_bits in self.joins.items()
                    if not join or core[i] == join
                ]
            found: dict[int, list[tuple[int, tuple[str, ...], float]]] = {}
            for start, before, join, bits in starts:
                if start not in found:
                    found[start] = self.parts(core, start)
                for end, cases, word in found[start]:
                    for case in cases:
                        if before is None:
                            case_bits = self.first[case]
                        elif not join:
                            case_bits = self.stepped[case]
                        else:
                            case_bits = self.same if case == before else self.other
                        total = bits + case_bits + word
                        for count in range(4):
                            last = end + count
                            if last > n or (count and not core[last - 1].isdigit()):
                                break
                            if total + self.digits[count] > best[last].get(case, -math.inf):
                                best[last][case] = total + self.digits[count]
        return max(best[n].values(), default=-math.inf) + self.stop + self.edges[lead] + self.edges[trail]


def _cases(letters: str) -> tuple[str, ...]:
    if letters.islower():
        return ("lower",)
    if letters.isupper():
        return ("upper", "title") if len(letters) == 1 else ("upper",)
    if letters[0].isupper() and letters[1:].islower():
        return ("title",)
    return ()


@cache
def _model() -> _Model:
    return _Model(WORDS.read_text(encoding="ascii").split())


@lru_cache(maxsize=4096)
def evidence(value: str) -> float:
    """log2(P(written as an identifier) / P(drawn at random)); -inf for a value no identifier is."""
    chars = set(value)
    for alphabet, bits in _ALPHABETS:
        if chars <= alphabet:
            return _model().likelihood(value) + len(value) * bits
    return -math.inf


def reads_as_words(value: str) -> bool:
    """Is `value` a name made of words (`accessTokenValue`), not a random key (`ztS8OkaF9Lx4`)?"""
    return evidence(value) >= READS_AS_WORDS


def build(rank_file: Path, out: Path = WORDS) -> None:
    """Write words.txt: the letter tokens (two letters or more, a leading space dropped, lower-cased)
    of a tiktoken rank file, in rank order, each once."""
    import base64
    import re

    letters = re.compile(rb" ?([A-Za-z]{2,})")
    seen: dict[str, None] = {}
    for line in rank_file.read_bytes().splitlines():
        token = base64.b64decode(line.split()[0])
        if (found := letters.fullmatch(token)) is not None:
            seen.setdefault(found.group(1).decode().lower(), None)
        if len(seen) >= WORD_COUNT:
            break
    out.write_text("\n".join(seen) + "\n", encoding="ascii")
