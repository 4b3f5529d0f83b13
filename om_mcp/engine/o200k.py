"""o200k_base token counts from a prebuilt table: exact, ready in milliseconds, a few MiB.

tiktoken builds o200k_base from its 200,000-line rank file in about 0.3 s and keeps
46 MiB for it, which every server process paid at start and the first append waited
for. The counts only need each token's bytes and rank, so they are kept in one file
(`o200k_base.table`, made from the same rank file by `build_table`) that is memory-mapped,
not parsed: an open-addressing hash of every token's bytes (CRC-32, linear probing) to
its rank, the ranks' offsets, and the bytes themselves. Opening it is an mmap and one
regex compile.

Counting is tiktoken's own algorithm: split the text with the o200k pattern (the `regex`
module, which tiktoken depends on, reads it as tiktoken does), then count each piece:
one token if the piece is a token, else byte-pair merges by rank, lowest rank first and
leftmost among equals. The test suite checks the counts against tiktoken's.

The rank file is OpenAI's o200k_base (tiktoken, MIT licence), as litellm bundles it;
`python -m om_mcp.engine.o200k` writes the table again from it.
"""

from __future__ import annotations

import array
import binascii
import heapq
import mmap
import re
import struct
import zlib
from collections.abc import Callable
from pathlib import Path

TABLE = Path(__file__).with_name("o200k_base.table")
MAGIC = b"O200"
_HEADER = struct.Struct("<4sIII")  # magic, tokens, slots, bytes
EMPTY = 0xFFFFFFFF
SLOTS = 1 << 19  # 200k tokens in 512k slots: short probes, for misses too (most pair lookups miss)
NO_RANK = 1 << 40
LONG_PIECE = 64  # bytes: longer pieces merge with a heap (a long run of punctuation, say)
CACHE_PIECES = 32768  # pieces remembered with their counts; words repeat, merges are the slow part

# On ASCII text the same pattern with its classes spelled out (\p{L} is [A-Za-z], \p{N} is [0-9],
# \s is Unicode's White_Space: not \x1c-\x1f, which Python's \s takes): Python's re runs it
# two or three times as fast as the regex module runs the Unicode one. The tests hold the two alike.
_WS, _NOT_WS = r"[\t\n\x0b\x0c\r ]", r"[^\t\n\x0b\x0c\r ]"
_CONTRACTIONS = "(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
ASCII_PATTERN = "|".join(
    [
        rf"[^\r\nA-Za-z0-9]?[A-Z]*[a-z]+{_CONTRACTIONS}",
        rf"[^\r\nA-Za-z0-9]?[A-Z]+[a-z]*{_CONTRACTIONS}",
        r"[0-9]{1,3}",
        r" ?[^\t\n\x0b\x0c\r A-Za-z0-9]+[\r\n/]*",
        rf"{_WS}*[\r\n]+",
        rf"{_WS}+(?!{_NOT_WS})",
        rf"{_WS}+",
    ]
)

# The o200k_base split pattern; it must match the one the ranks were trained with.
PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)


def bundled_rank_file() -> Path | None:
    """litellm's copy of the o200k_base rank file (named by the sha1 of its URL), without importing litellm."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return None
    for root in (spec.submodule_search_locations or []) if spec else []:
        path = Path(root) / "litellm_core_utils" / "tokenizers" / "fb374d419588a4632f3f557e76b4b70aebbca790"
        if path.is_file():
            return path
    return None


def build_table(rank_file: Path, out: Path) -> None:
    """Write the table for a tiktoken rank file ("<base64 token> <rank>" per line, ranks 0..n-1)."""
    fields = rank_file.read_bytes().split()
    tokens = [binascii.a2b_base64(t) for t in fields[0::2]]
    if [int(r) for r in fields[1::2]] != list(range(len(tokens))):
        raise ValueError(f"{rank_file}: ranks are not 0..{len(tokens) - 1} in order")
    offsets = array.array("I", [0] * (len(tokens) + 1))
    blob = bytearray()
    slots = array.array("I", [EMPTY] * SLOTS)
    for rank, token in enumerate(tokens):
        offsets[rank] = len(blob)
        blob += token
        slot = zlib.crc32(token) & (SLOTS - 1)
        while slots[slot] != EMPTY:
            slot = (slot + 1) & (SLOTS - 1)
        slots[slot] = rank
    offsets[len(tokens)] = len(blob)
    if slots.itemsize != 4 or struct.pack("=I", 1) != struct.pack("<I", 1):
        raise OSError("the table is written as 32-bit little-endian integers")
    with open(out, "wb") as f:
        f.write(_HEADER.pack(MAGIC, len(tokens), SLOTS, len(blob)))
        f.write(slots.tobytes())
        f.write(offsets.tobytes())
        f.write(bytes(blob))


class O200k:
    """Counts text in o200k_base tokens from the table (see the module docstring)."""

    def __init__(self, path: Path = TABLE):
        with open(path, "rb") as f:
            self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        magic, tokens, slots, size = _HEADER.unpack_from(self._map, 0)
        expected = _HEADER.size + 4 * slots + 4 * (tokens + 1) + size
        if magic != MAGIC or len(self._map) != expected or slots & (slots - 1):
            raise ValueError(f"{path} is not an o200k table")
        view = memoryview(self._map)
        start = _HEADER.size
        self._slots = view[start : start + 4 * slots].cast("I")
        start += 4 * slots
        self._offsets = view[start : start + 4 * (tokens + 1)].cast("I")
        self._base = start + 4 * (tokens + 1)
        self._mask = slots - 1
        self._split_unicode: Callable[[str], list[str]] | None = None  # see unicode(), on first need
        self._split_ascii = re.compile(ASCII_PATTERN).findall
        self._pieces: dict[str, int] = {}

    def unicode(self) -> Callable[[str], list[str]]:
        """The splitter for text beyond ASCII (the regex module: about 30 ms to import, once; a server
        does it in the background after start)."""
        if self._split_unicode is None:
            import regex  # tiktoken's dependency; Python's re has no \\p{...} classes

            self._split_unicode = regex.compile(PATTERN).findall
        return self._split_unicode

    def rank(self, piece: bytes) -> int:
        """The piece's rank, or NO_RANK when it is not a token."""
        slots, offsets, data, base = self._slots, self._offsets, self._map, self._base
        slot = zlib.crc32(piece) & self._mask
        size = len(piece)
        while (rank := slots[slot]) != EMPTY:
            start, end = offsets[rank], offsets[rank + 1]
            if end - start == size and data[base + start : base + end] == piece:
                return rank
            slot = (slot + 1) & self._mask
        return NO_RANK

    def count(self, text: str) -> int:
        pieces = self._pieces
        if text.isascii():
            found = self._split_ascii(text)
        else:
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:  # lone surrogates: tiktoken replaces them, and so do we
                text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
            found = self.unicode()(text)
        known_counts = list(map(pieces.get, found))
        if None not in known_counts:  # every piece seen before: words repeat
            return sum(known_counts)  # type: ignore[arg-type]
        total = 0
        for piece in found:
            known = pieces.get(piece)
            if known is None:
                raw = piece.encode("utf-8")
                known = 1 if self.rank(raw) != NO_RANK else self._merge(raw)
                if len(pieces) >= CACHE_PIECES:
                    pieces.clear()
                pieces[piece] = known
            total += known
        return total

    def _merge(self, piece: bytes) -> int:
        """Tokens in one piece that is not itself a token (tiktoken's _byte_pair_merge)."""
        if len(piece) > LONG_PIECE:
            return self._merge_long(piece)
        rank = self.rank
        starts = list(range(len(piece) + 1))
        ranks = [rank(piece[i : i + 2]) for i in range(len(piece) - 1)] + [NO_RANK, NO_RANK]
        while True:
            best = min(ranks[:-1])
            if best == NO_RANK:
                return len(starts) - 1
            i = ranks.index(best)  # the leftmost of the lowest rank
            # parts i and i+1 become one; its pairs with the neighbours are ranked again
            if i > 0:
                ranks[i - 1] = rank(piece[starts[i - 1] : starts[i + 2]]) if i + 2 < len(starts) else NO_RANK
            ranks[i] = rank(piece[starts[i] : starts[i + 3]]) if i + 3 < len(starts) else NO_RANK
            del starts[i + 1], ranks[i + 1]

    def _merge_long(self, piece: bytes) -> int:
        """The same merges with a heap of (rank, start) over a linked list of parts: O(n log n).
        A part is named by its first byte; `pair[s]` ranks part s joined with the next one."""
        rank, n = self.rank, len(piece)
        following = list(range(1, n + 1))  # the next part's start (n: none)
        preceding = list(range(-1, n - 1))
        pair = [rank(piece[s : s + 2]) for s in range(n - 1)] + [NO_RANK]
        heap = [(r, s) for s, r in enumerate(pair) if r != NO_RANK]
        heapq.heapify(heap)
        parts = n
        while heap:
            r, s = heapq.heappop(heap)
            if pair[s] != r:
                continue  # stale: this part was joined or re-ranked since
            joined = following[s]
            nxt = following[s] = following[joined]
            pair[joined] = NO_RANK
            parts -= 1
            if nxt < n:
                preceding[nxt] = s
                pair[s] = rank(piece[s : following[nxt]])
            else:
                pair[s] = NO_RANK
            if pair[s] != NO_RANK:
                heapq.heappush(heap, (pair[s], s))
            before = preceding[s]
            if before >= 0:
                pair[before] = rank(piece[before:nxt])
                if pair[before] != NO_RANK:
                    heapq.heappush(heap, (pair[before], before))
        return parts


if __name__ == "__main__":
    source = bundled_rank_file()
    if source is None:
        raise SystemExit("litellm's o200k_base rank file was not found")
    build_table(source, TABLE)
    print(f"wrote {TABLE} from {source}")
