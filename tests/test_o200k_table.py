"""The prebuilt o200k table: made from the rank file, and counting exactly as tiktoken does."""

from __future__ import annotations

import base64
import random
import subprocess
import sys
from pathlib import Path

import pytest

from om_mcp.engine import o200k

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def table() -> o200k.O200k:
    return o200k.O200k()


@pytest.fixture(scope="module")
def encoding():
    import tiktoken
    from tiktoken.load import read_file

    path = o200k.bundled_rank_file()
    assert path is not None
    fields = read_file(str(path)).split()
    ranks = {base64.b64decode(t): int(r) for t, r in zip(fields[0::2], fields[1::2])}
    return tiktoken.Encoding("o200k_base", pat_str=o200k.PATTERN, mergeable_ranks=ranks, special_tokens={})


def test_the_shipped_table_is_the_one_the_rank_file_makes(tmp_path):
    source = o200k.bundled_rank_file()
    assert source is not None
    built = tmp_path / "o200k.table"
    o200k.build_table(source, built)
    assert built.read_bytes() == o200k.TABLE.read_bytes()


def corpus() -> list[str]:
    rng = random.Random(7)
    texts = [p.read_text() for p in sorted((ROOT / "om_mcp" / "engine").rglob("*.py"))[:30]]
    texts += [
        "The quick brown fox jumps over the lazy dog. I'm sure they've gone; we'll see.",
        "Zürich straße naïve café — «quotes» “smart” ‘single’",
        "日本語のテキストと中文，한국어 텍스트, العربية, עברית, ελληνικά, русский текст",
        "emoji 🚀🔥👩‍👩‍👧 and numbers 1234567890 3.14159 -42 1,000,000",
        "\t\ttabs\r\nand\r\n\r\nnewlines\n\n\n   spaces   ",
        "-" * 3000 + "=" * 700 + "." * 129,  # long punctuation runs: the heap merge
        "a" * 5000,
        "".join(chr(c) for c in range(0x20, 0x3400)),
        "a lone surrogate \ud800 here",
    ]
    pieces = ["-", "=", "aa", "Ab", "1234", "  ", "\n", "é", "日本", "😀", "'s", "'LL", "/", "\r\n", ".", "x" * 90]
    texts += ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 80))) for _ in range(300)]
    return texts


@pytest.mark.slow
def test_counts_are_tiktokens(table, encoding):
    for text in corpus():
        fixed = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        assert table.count(text) == len(encoding.encode_ordinary(fixed)), text[:60]


def test_long_pieces_merge_as_short_ones_do(table):
    rng = random.Random(3)
    for _ in range(500):
        piece = "".join(rng.choice(["a", "b", "ab", "-", "=", "th", "e", "in", "ing", "é"]) for _ in range(20))
        raw = piece.encode()[: o200k.LONG_PIECE]
        assert table._merge_long(raw) == table._merge(raw), raw


def test_opening_builds_no_encoding():
    # A fresh interpreter: counting imports neither tiktoken nor litellm.
    code = (
        "import sys, om_mcp.engine.o200k as t; t.O200k().count('hi');"
        " print('tiktoken' in sys.modules, 'litellm' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.split() == ["False", "False"]


def test_a_damaged_table_is_refused(tmp_path):
    bad = tmp_path / "t"
    bad.write_bytes(o200k.TABLE.read_bytes()[:1000])
    with pytest.raises(ValueError):
        o200k.O200k(bad)


@pytest.mark.slow
def test_ascii_text_splits_as_the_unicode_pattern_splits_it(table, encoding):
    rng = random.Random(11)
    pieces = ["'s", "'S", "'LL", "'ll", "'Re", " ", "\t", "\n", "\r\n", "\x1c", "\x1f", "\x0b", "\x0c", "ab", "AB"]
    pieces += ["Ab", "aB", "12345", "--", "/", ".", "a'", "'", "x\r", " \n ", "  \n", "$%^", "e.g.", "I'm"]
    texts = ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 40))) for _ in range(3000)]
    texts += ["".join(chr(rng.randrange(128)) for _ in range(rng.randint(1, 120))) for _ in range(3000)]
    for text in texts:
        assert text.isascii()
        assert table._split_ascii(text) == table.unicode()(text), repr(text)
        assert table.count(text) == len(encoding.encode_ordinary(text)), repr(text)
