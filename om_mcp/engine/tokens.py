"""Token counts for thresholds: o200k_base, from a prebuilt table (engine/o200k.py).

The counts decide when to observe and reflect; they are never sent to a model, so
they aim to be close, fast and the same every time rather than exact for one
provider. Nothing here may touch the network, and nothing here may make a request
wait: the table opens in milliseconds (no 200k-entry encoding to build), and a
process that has not opened it yet counts with the estimator, whose counts carry
its name and are recounted in the background. If the table is missing or damaged,
the estimator takes over and the tokenizer name says so, which invalidates every
cached count made with the other.

The counts are tiktoken's o200k_base counts (the tests hold the two side by side),
so the stored counts keep tiktoken's name and version: rows counted before the
table existed stay valid, and nothing is recounted for the change.

Message arithmetic follows the reference study: a message is its
role, its parts and 3.8 overhead, rounded per message; a list adds 24 once. Parts
counts are cached with the message; the overheads are always recomputed.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import struct
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

# Bump when the part rules change: stored caches made under the old rules are then ignored.
CACHE_VERSION = 1

PER_MESSAGE = 3.8
PER_CONVERSATION = 24
# The study trims JSON-encoded tool args/results by 12; the JSON share never goes below 0.
JSON_DISCOUNT = 12

# Images: OpenAI's high-detail rule (fit in 2048x2048, shortest side down to 768,
# then 85 + 170 per 512px tile). Without a size, a fixed guess near a typical photo.
IMAGE_BASE = 85
IMAGE_PER_TILE = 170
IMAGE_FALLBACK = 1000
# Binary files we cannot read as text (PDFs, archives...): a fixed guess.
FILE_FALLBACK = 1000

O200K_NAME = "o200k_base"
FALLBACK_NAME = "fallback-chars"
# A long text is often counted again unchanged (the observation log, every turn): remember a few.
LONG_TEXT, LONGEST_KEPT = 512, 65_536  # characters
LONG_TEXTS_KEPT = 32

Part = dict[str, Any]
Message = dict[str, Any]
PartCache = dict[str, Any]  # {"tokenizer": cache_key, "parts": [int, ...]}


def _load_o200k(path: Path | None) -> Any:
    """The table's counter (see engine/o200k.py); raises when it cannot be read."""
    from om_mcp.engine.o200k import TABLE, O200k

    return O200k(path or TABLE)


def _estimate(text: str) -> int:
    # About 4 UTF-8 bytes per token: 4-16% over o200k on English chat and Python
    # (erring high is the safe side for thresholds); CJK, 3 bytes a char, gets 0.75 a char.
    return math.ceil(len(text.encode("utf-8", "surrogatepass")) / 4)


def _tiktoken_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tiktoken")
    except PackageNotFoundError:
        return "none"


class TokenCounter:
    """Counts text, parts and messages. Opens its table on first use, once."""

    def __init__(self, table: str | Path | None = None) -> None:
        # table: an o200k table file (engine/o200k.py); None means the one shipped with om-mcp.
        self._file = Path(table) if table is not None else None
        self._lock = threading.Lock()
        self._count: Callable[[str], int] | None = None
        self._name = ""
        self._version = ""
        self._role_tokens: dict[str, int] = {}
        self._long: dict[str, int] = {}
        self._encoder: Any = None

    @classmethod
    def estimating(cls) -> TokenCounter:
        """A counter that only estimates (4 bytes a token): for a process that must not wait even
        the few milliseconds the table takes to open. Its counts carry the estimator's name, so a
        process with the table recounts them."""
        counter = cls()
        counter._count, counter._name, counter._version = _estimate, FALLBACK_NAME, f"bytes4+c{CACHE_VERSION}"
        return counter

    # -- identity -------------------------------------------------------------

    @property
    def name(self) -> str:
        self._ensure_loaded()
        return self._name

    @property
    def version(self) -> str:
        self._ensure_loaded()
        return self._version

    @property
    def cache_key(self) -> str:
        """Stored with every cached count; a different key means recount."""
        self._ensure_loaded()
        return f"{self._name}@{self._version}"

    @property
    def loaded(self) -> bool:
        return self._count is not None

    async def ready(self) -> None:
        """Open the table off the event loop (milliseconds, once)."""
        if self._count is None:
            import anyio

            await anyio.to_thread.run_sync(self._ensure_loaded)

    async def warm(self) -> None:
        """Prepare what the first text beyond ASCII would otherwise wait for, off the event loop."""
        await self.ready()
        unicode = getattr(self._encoder, "unicode", None)
        if unicode is not None:
            import anyio

            await anyio.to_thread.run_sync(unicode)

    def _ensure_loaded(self) -> Callable[[str], int]:
        if self._count is not None:
            return self._count
        with self._lock:
            if self._count is None:
                try:
                    self._encoder = _load_o200k(self._file)
                    count = self._encoder.count
                    # The same counts as tiktoken's o200k_base (see the module docstring).
                    self._name, self._version = O200K_NAME, f"tiktoken-{_tiktoken_version()}+c{CACHE_VERSION}"
                except (OSError, ValueError, ImportError, struct.error):
                    count = _estimate  # missing or damaged: the estimator, never a download
                    self._name, self._version = FALLBACK_NAME, f"bytes4+c{CACHE_VERSION}"
                self._count = count
        return self._count

    # -- text and parts ---------------------------------------------------------

    def count_text(self, text: str) -> int:
        if not text:
            return 0
        if not LONG_TEXT <= len(text) <= LONGEST_KEPT:
            return self._ensure_loaded()(text)
        known = self._long.get(text)
        if known is None:
            known = self._ensure_loaded()(text)
            if len(self._long) >= LONG_TEXTS_KEPT:
                self._long.clear()
            self._long[text] = known
        return known

    def count_observations(self, text: str) -> int:
        """Observation tokens are the plain text count of the observation string."""
        return self.count_text(text)

    def count_part(self, part: Part) -> int:
        """Content tokens of one part, without overheads.

        A tool result also carries one extra message overhead; that is float
        arithmetic done per message (see `part_overhead`), so it is not in here.
        """
        kind = part.get("type")
        if kind == "text":
            return self.count_text(part.get("text") or "")
        if kind == "tool-call":
            return self.count_text(part.get("tool_name") or "") + self._count_value(part.get("args"))
        if kind == "tool-result":
            return self.count_text(part.get("tool_name") or "") + self._count_value(part.get("result"))
        if kind == "image":
            return _image_tokens(part)
        if kind == "file":
            return self._file_tokens(part)
        # reasoning is not sent back to models; data-* and unknown parts carry no text for them
        return 0

    @staticmethod
    def part_overhead(part: Part) -> float:
        """Overhead a part adds to its message beyond its content."""
        return PER_MESSAGE if part.get("type") == "tool-result" else 0.0

    def _count_value(self, value: Any) -> int:
        if value is None:
            return 0
        if isinstance(value, str):
            return self.count_text(value)
        encoded = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
        return max(0, self.count_text(encoded) - JSON_DISCOUNT)

    def _file_tokens(self, part: Part) -> int:
        mime = (part.get("mime_type") or "").lower()
        if mime.startswith("image/"):
            # uploads often arrive as files; they still cost what an image costs
            return _image_tokens(part)
        if _is_textual(mime) and part.get("data"):
            raw = _decode_base64(part["data"])
            if raw is not None:
                return self.count_text(raw.decode("utf-8", "replace"))
        return FILE_FALLBACK if (part.get("data") or part.get("url")) else 0

    # -- messages ---------------------------------------------------------------

    def _role(self, role: str) -> int:
        tokens = self._role_tokens.get(role)
        if tokens is None:
            tokens = self._role_tokens[role] = self.count_text(role)
        return tokens

    def count_message(self, message: Message, cache: PartCache | None = None) -> tuple[int, PartCache]:
        """(total, cache) for one message; pass back the cache it returned to skip re-encoding.

        The cache is trusted only when it was made by this tokenizer and has one
        entry per part; otherwise every part is counted again.
        """
        parts = _parts_of(message)
        key = self.cache_key
        per_part = _valid_cached(cache, key, len(parts))
        if per_part is None:
            per_part = [self.count_part(p) for p in parts]
            cache = {"tokenizer": key, "parts": per_part}
        total = self._role(message.get("role") or "") + sum(per_part) + PER_MESSAGE
        total += sum(self.part_overhead(p) for p in parts)
        return _round_half_up(total), cache  # type: ignore[return-value]

    def count_messages(self, messages: Sequence[Message], caches: Sequence[PartCache | None] | None = None) -> int:
        """Sum of message totals plus the once-per-list overhead; 0 for no messages."""
        if not messages:
            return 0
        caches = caches if caches is not None else [None] * len(messages)
        return sum(self.count_message(m, c)[0] for m, c in zip(messages, caches)) + PER_CONVERSATION


# -- helpers --------------------------------------------------------------------


def _parts_of(message: Message) -> list[Part]:
    parts = message.get("parts")
    if parts is None and isinstance(message.get("content"), str):
        # an unstored message with plain content counts as its single text part
        return [{"type": "text", "text": message["content"]}]
    return list(parts or [])


def _valid_cached(cache: PartCache | None, key: str, n_parts: int) -> list[int] | None:
    if not isinstance(cache, dict) or cache.get("tokenizer") != key:
        return None
    per_part = cache.get("parts")
    if not isinstance(per_part, list) or len(per_part) != n_parts:
        return None
    if not all(type(n) is int and n >= 0 for n in per_part):
        return None
    return per_part


def _round_half_up(value: float) -> int:
    # Python's round() goes to even; the reference rounds halves up.
    return math.floor(value + 0.5)


def _is_textual(mime: str) -> bool:
    base = mime.split(";", 1)[0].strip()
    return (
        base.startswith("text/")
        or base in ("application/json", "application/xml", "application/yaml", "application/x-yaml")
        or base.endswith(("+json", "+xml"))
    )


def _decode_base64(data: str, prefix_chars: int | None = None) -> bytes | None:
    if data.startswith("data:"):
        data = data.partition(",")[2]  # a data URL: keep only the payload
    if prefix_chars is not None:
        data = data[:prefix_chars]
    try:
        return base64.b64decode(data)
    except (binascii.Error, ValueError):
        return None


def _image_size(part: Part) -> tuple[int, int] | None:
    width, height = part.get("width"), part.get("height")
    if isinstance(width, int) and isinstance(height, int) and width > 0 and height > 0:
        return width, height
    data = part.get("data")
    if not data:
        return None
    # PNG and GIF state their size in the first bytes; 32 base64 chars give 24 bytes.
    head = _decode_base64(data, prefix_chars=32)
    if head is None:
        return None
    if head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR" and len(head) >= 24:
        w, h = struct.unpack(">II", head[16:24])
    elif head[:4] == b"GIF8" and len(head) >= 10:
        w, h = struct.unpack("<HH", head[6:10])
    else:
        return None
    return (w, h) if w > 0 and h > 0 else None


def _image_tokens(part: Part) -> int:
    size = _image_size(part)
    if size is None:
        return IMAGE_FALLBACK if (part.get("data") or part.get("url")) else 0
    return openai_image_tokens(*size)


def openai_image_tokens(width: int, height: int) -> int:
    """OpenAI's high-detail cost: fit in 2048x2048, shortest side to 768, 512px tiles."""
    w, h = float(width), float(height)
    if max(w, h) > 2048:
        scale = 2048 / max(w, h)
        w, h = w * scale, h * scale
    if min(w, h) > 768:
        scale = 768 / min(w, h)
        w, h = w * scale, h * scale
    tiles = math.ceil(w / 512) * math.ceil(h / 512)
    return IMAGE_BASE + IMAGE_PER_TILE * tiles


_counter: TokenCounter | None = None
_counter_lock = threading.Lock()


def get_token_counter() -> TokenCounter:
    """The process-wide counter, so the 200k-entry encoding is built once."""
    global _counter
    if _counter is None:
        with _counter_lock:
            if _counter is None:
                _counter = TokenCounter()
    return _counter
