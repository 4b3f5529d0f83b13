"""Token counting: offline o200k load, part rules, overheads and the per-part cache."""

from __future__ import annotations

import base64
import json
import math
import os
import socket
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from om_mcp.engine import o200k, tokens
from om_mcp.engine.tokens import (
    FILE_FALLBACK,
    IMAGE_FALLBACK,
    PER_CONVERSATION,
    PER_MESSAGE,
    TokenCounter,
    get_token_counter,
    openai_image_tokens,
)


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return get_token_counter()


@pytest.fixture(scope="module")
def encoding():
    """The reference encoding, built independently of the module's loader."""
    import tiktoken
    from tiktoken.load import read_file

    path = o200k.bundled_rank_file()
    assert path is not None
    fields = read_file(str(path)).split()
    ranks = {base64.b64decode(t): int(r) for t, r in zip(fields[0::2], fields[1::2])}
    special = {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}
    return tiktoken.Encoding("o200k_base", pat_str=o200k.PATTERN, mergeable_ranks=ranks, special_tokens=special)


def _round(x: float) -> int:
    return math.floor(x + 0.5)


# -- loading ------------------------------------------------------------------


def test_loads_o200k_offline_without_litellm_or_env(monkeypatch):
    def no_network(*args, **kwargs):
        raise AssertionError("network used")

    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(socket.socket, "connect", no_network)
    before = dict(os.environ)
    fresh = TokenCounter()
    assert fresh.name == "o200k_base"
    assert fresh.cache_key == f"o200k_base@{fresh.version}"
    assert f"+c{tokens.CACHE_VERSION}" in fresh.version
    assert fresh.count_text("hello world") == 2
    assert dict(os.environ) == before


def test_import_is_lazy():
    # A fresh interpreter: importing the module must neither build the encoding nor import litellm.
    code = (
        "import sys, om_mcp.engine.tokens as t; "
        "print('tiktoken' in sys.modules, 'litellm' in sys.modules, t._counter is None)"
    )
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root)
    assert out.stdout.split() == ["False", "False", "True"]


def test_missing_file_falls_back_deterministically(tmp_path):
    fallback = TokenCounter(tmp_path / "nope")
    assert fallback.name == "fallback-chars"
    assert fallback.count_text("abcdefgh") == 2
    assert fallback.count_text("abcdefghi") == 3
    assert fallback.count_text("日本") == 2  # 6 UTF-8 bytes
    assert fallback.count_text("") == 0


def test_damaged_file_falls_back(tmp_path):
    bad = tmp_path / "o200k"
    bad.write_bytes(b"aGVsbG8= 0\n")
    assert TokenCounter(bad).name == "fallback-chars"


def test_shared_instance():
    assert get_token_counter() is get_token_counter()


# -- text -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "hello world",
        "The quick brown fox jumps over the lazy dog.",
        "Zürich straße naïve café — «quotes»",
        "日本語のテキストと中文",
        "def f(x):\n    return {'a': [1, 2, 3]}\n",
        "emoji 🚀🔥 and numbers 1234567890",
    ],
)
def test_count_text_matches_encoding(counter, encoding, text):
    assert counter.count_text(text) == len(encoding.encode_ordinary(text))


def test_special_token_text_is_ordinary(counter, encoding):
    text = "before <|endoftext|> after"
    assert counter.count_text(text) == len(encoding.encode_ordinary(text))
    assert counter.count_text(text) > 3  # not collapsed into one special token


def test_known_counts(counter):
    assert counter.count_text("") == 0
    assert counter.count_text("hello world") == 2
    assert counter.count_observations("hello world") == 2


# -- parts ------------------------------------------------------------------------


def test_text_and_reasoning(counter):
    assert counter.count_part({"type": "text", "text": "hello world"}) == 2
    assert counter.count_part({"type": "reasoning", "text": "a long chain of thought " * 50}) == 0


def test_unknown_and_data_parts_are_zero(counter):
    assert counter.count_part({"type": "data-om-status", "data": {"x": 1}}) == 0
    assert counter.count_part({"type": "mystery"}) == 0


def test_tool_call(counter):
    args = {"query": "weather in Paris tomorrow morning", "units": "metric", "days": [1, 2, 3]}
    encoded = json.dumps(args, ensure_ascii=False, sort_keys=True)
    expected = counter.count_text("get_weather") + counter.count_text(encoded) - tokens.JSON_DISCOUNT
    part = {"type": "tool-call", "tool_name": "get_weather", "args": args}
    assert counter.count_part(part) == expected > counter.count_text("get_weather")
    # string args are counted as they are, with no JSON discount
    as_string = {"type": "tool-call", "tool_name": "get_weather", "args": encoded}
    assert counter.count_part(as_string) == counter.count_text("get_weather") + counter.count_text(encoded)
    # tiny JSON never makes the part smaller than its name
    tiny = {"type": "tool-call", "tool_name": "get_weather", "args": {}}
    assert counter.count_part(tiny) == counter.count_text("get_weather")


def test_tool_result_and_its_overhead(counter):
    text_result = {"type": "tool-result", "tool_name": "search", "result": "three results found"}
    part_tokens = counter.count_text("search") + counter.count_text("three results found")
    assert counter.count_part(text_result) == part_tokens
    assert counter.part_overhead(text_result) == PER_MESSAGE

    message = {"role": "tool", "parts": [text_result]}
    total, _ = counter.count_message(message)
    assert total == _round(counter.count_text("tool") + part_tokens + 2 * PER_MESSAGE)

    long_json = {"items": [{"id": i, "title": f"result number {i}"} for i in range(20)]}
    json_part = {"type": "tool-result", "tool_name": "search", "result": long_json}
    encoded = json.dumps(long_json, ensure_ascii=False, sort_keys=True)
    assert counter.count_part(json_part) == (
        counter.count_text("search") + counter.count_text(encoded) - tokens.JSON_DISCOUNT
    )


def _png(width: int, height: int) -> str:
    header = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + struct.pack(">II", width, height)
    return base64.b64encode(header + b"\x08\x02\x00\x00\x00" + b"\x00" * 40).decode()


def test_image_rules(counter):
    sized = {"type": "image", "mime_type": "image/png", "url": "https://x/y.png", "width": 1024, "height": 1024}
    # 1024x1024 -> shortest side 768 -> 768x768 -> 2x2 tiles
    assert counter.count_part(sized) == 85 + 170 * 4
    assert openai_image_tokens(4096, 2048) == 85 + 170 * 6  # -> 2048x1024 -> 1536x768 -> 3x2
    assert openai_image_tokens(100, 100) == 85 + 170
    unsized = {"type": "image", "mime_type": "image/jpeg", "url": "https://x/y.jpg"}
    assert counter.count_part(unsized) == IMAGE_FALLBACK
    assert counter.count_part(dict(unsized)) == counter.count_part(unsized)
    half_sized = {"type": "image", "mime_type": "image/jpeg", "data": "AAAA", "width": 300}
    assert counter.count_part(half_sized) == IMAGE_FALLBACK
    empty = {"type": "image", "mime_type": "image/png"}
    assert counter.count_part(empty) == 0


def test_image_size_read_from_png_header(counter):
    part = {"type": "image", "mime_type": "image/png", "data": _png(1600, 400)}
    assert counter.count_part(part) == openai_image_tokens(1600, 400)
    as_data_url = {"type": "image", "mime_type": "image/png", "data": "data:image/png;base64," + _png(1600, 400)}
    assert counter.count_part(as_data_url) == openai_image_tokens(1600, 400)


def test_file_rules(counter):
    body = "name,age\nada,36\ngrace,45\n"
    text_file = {"type": "file", "mime_type": "text/csv", "data": base64.b64encode(body.encode()).decode()}
    assert counter.count_part(text_file) == counter.count_text(body)
    payload = json.dumps({"a": [1, 2, 3]})
    json_file = {"type": "file", "mime_type": "application/json", "data": base64.b64encode(payload.encode()).decode()}
    assert counter.count_part(json_file) == counter.count_text(payload)
    pdf = {"type": "file", "mime_type": "application/pdf", "data": base64.b64encode(b"%PDF-1.7 ...").decode()}
    assert counter.count_part(pdf) == FILE_FALLBACK
    linked_text = {"type": "file", "mime_type": "text/plain", "url": "https://x/notes.txt"}
    assert counter.count_part(linked_text) == FILE_FALLBACK
    image_file = {"type": "file", "mime_type": "image/png", "data": _png(512, 512)}
    assert counter.count_part(image_file) == openai_image_tokens(512, 512)


# -- messages and overheads ---------------------------------------------------------------


def test_message_overhead_arithmetic(counter):
    message = {"role": "user", "parts": [{"type": "text", "text": "hi"}]}
    total, cache = counter.count_message(message)
    role, hi = counter.count_text("user"), counter.count_text("hi")
    assert total == _round(role + hi + PER_MESSAGE)
    assert cache == {"tokenizer": counter.cache_key, "parts": [hi]}

    two = [message, {"role": "assistant", "parts": [{"type": "text", "text": "hello there"}]}]
    second = _round(counter.count_text("assistant") + counter.count_text("hello there") + PER_MESSAGE)
    assert counter.count_messages(two) == total + second + PER_CONVERSATION


def test_rounding_is_per_message(counter):
    # 3.8 + whole numbers always ends in .8, so each message rounds up on its own:
    # two messages give 2 * round(x + 3.8), not round(2x + 7.6).
    message = {"role": "user", "parts": [{"type": "text", "text": "hi"}]}
    base = counter.count_text("user") + counter.count_text("hi")
    assert counter.count_messages([message, message]) == 2 * (base + 4) + PER_CONVERSATION


def test_empty_list_and_empty_message(counter):
    assert counter.count_messages([]) == 0
    total, cache = counter.count_message({"role": "user", "parts": []})
    assert total == _round(counter.count_text("user") + PER_MESSAGE)
    assert cache["parts"] == []


def test_plain_content_message(counter):
    total, cache = counter.count_message({"role": "user", "content": "hello world"})
    assert cache["parts"] == [2]
    assert total == _round(counter.count_text("user") + 2 + PER_MESSAGE)


def test_reasoning_part_in_message(counter):
    message = {
        "role": "assistant",
        "parts": [{"type": "reasoning", "text": "thinking " * 100}, {"type": "text", "text": "done"}],
    }
    total, cache = counter.count_message(message)
    assert cache["parts"][0] == 0
    assert total == _round(counter.count_text("assistant") + counter.count_text("done") + PER_MESSAGE)


# -- the per-part cache -----------------------------------------------------------------------


def _message() -> dict:
    return {
        "role": "assistant",
        "parts": [
            {"type": "text", "text": "Let me look that up for you."},
            {"type": "tool-call", "tool_name": "search", "args": {"q": "sqlite fts5 bm25 ranking"}},
            {"type": "tool-result", "tool_name": "search", "result": "bm25() returns lower for better"},
        ],
    }


def _forbid_encoding(counter: TokenCounter, monkeypatch) -> None:
    """Make any further encode fail; role counts are memoized by the first count."""

    def boom(text: str) -> int:
        raise AssertionError(f"re-encoded {text!r}")

    monkeypatch.setattr(counter, "_count", boom)


def test_cache_is_reused_without_encoding(counter, monkeypatch):
    message = _message()
    total, cache = counter.count_message(message)
    stored = json.loads(json.dumps(cache))  # as it would come back from SQLite
    _forbid_encoding(counter, monkeypatch)
    again, same = counter.count_message(message, stored)
    assert again == total
    assert same["parts"] == cache["parts"]


def test_cache_with_other_key_is_recomputed(counter):
    message = _message()
    total, cache = counter.count_message(message)
    stale = {"tokenizer": "fallback-chars@bytes4+c0", "parts": [999, 999, 999]}
    recount, fresh = counter.count_message(message, stale)
    assert recount == total
    assert fresh == cache


def test_cache_with_wrong_length_or_junk_is_recomputed(counter):
    message = _message()
    total, cache = counter.count_message(message)
    short = {"tokenizer": counter.cache_key, "parts": [999]}
    assert counter.count_message(message, short) == (total, cache)
    junk = {"tokenizer": counter.cache_key, "parts": ["a", None, -1]}
    assert counter.count_message(message, junk) == (total, cache)


def test_matching_cache_is_trusted(counter):
    # The cache is the stored truth for a stored message: a matching one is used as is.
    message = _message()
    planted = {"tokenizer": counter.cache_key, "parts": [10, 20, 30]}
    total, cache = counter.count_message(message, planted)
    assert cache is planted
    assert total == _round(counter.count_text("assistant") + 60 + 2 * PER_MESSAGE)


def test_count_messages_uses_caches(counter, monkeypatch):
    messages = [_message(), {"role": "user", "parts": [{"type": "text", "text": "thanks"}]}]
    caches = [counter.count_message(m)[1] for m in messages]
    expected = counter.count_messages(messages)
    _forbid_encoding(counter, monkeypatch)
    assert counter.count_messages(messages, caches) == expected
    with pytest.raises(AssertionError, match="re-encoded"):
        counter.count_messages(messages)  # without caches it must encode


def test_stored_counts_from_another_tokenizer_are_recounted(tmp_path):
    # The one database test here: a count stored by another tokenizer is redone on open.
    import sqlite3

    import anyio

    from om_mcp.config import Config
    from om_mcp.engine.memory import Memory

    db = tmp_path / "m.db"

    async def tokens_of(memory: Memory) -> int:
        [message] = await memory.store.message_page("t", limit=5)
        return message.tokens

    async def run():
        memory = await Memory.open(Config(observational_memory=False), db_path=str(db))
        try:
            await memory.append_messages("t", [{"role": "user", "content": "hello there, counted twice"}])
            right = await tokens_of(memory)
            expected, _ = get_token_counter().count_message(
                {"role": "user", "parts": [{"type": "text", "text": "hello there, counted twice"}]}
            )
            assert right == expected
            assert await memory.recount_tokens() == 0  # counted by this tokenizer already
            with sqlite3.connect(db) as conn:  # as if counted by an older version
                conn.execute("INSERT INTO om_tokenizers (name) VALUES ('old@0')")
                old = conn.execute("SELECT id FROM om_tokenizers WHERE name = 'old@0'").fetchone()[0]
                conn.execute("UPDATE messages SET tokens = 1, part_tokens = NULL, counted_by = ?", (old,))
            assert await tokens_of(memory) == 1
            assert await memory.recount_tokens() == 1
            assert await tokens_of(memory) == right
            assert await memory.recount_tokens() == 0
        finally:
            await memory.close()

    anyio.run(run)
