"""Embeddings: backend detection, normalised output, one backend call per list, async, MiniLM."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from models.embeddings import (
    LlamaIndexEmbeddingAdapter,
    UniversalEmbeddingWrapper,
    load_packaged_minilm,
)

# --- fake backends (one per detection rule) -------------------------------------------


def _vector(text: str) -> list[float]:
    """A deterministic, non-unit vector that differs between texts."""
    return [float(len(text)), float(sum(map(ord, text)) % 17 + 1), 3.0]


class EncodeBackend:
    """A generic backend with ``encode(list[str])`` only; counts its calls."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def encode(self, sentences: list[str], **kwargs: Any) -> np.ndarray:
        self.calls.append(list(sentences))
        return np.asarray([_vector(t) for t in sentences], dtype=np.float64)


class STLikeBackend(EncodeBackend):
    """Looks like a SentenceTransformer (``encode`` + ``max_seq_length``); records kwargs."""

    max_seq_length = 128

    def __init__(self) -> None:
        super().__init__()
        self.kwargs: list[dict[str, Any]] = []

    def encode(self, sentences: list[str], **kwargs: Any) -> np.ndarray:
        self.kwargs.append(kwargs)
        vectors = super().encode(sentences)
        if kwargs.get("normalize_embeddings"):
            vectors = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors


class HFEncoderLikeBackend:
    """Looks like ``HFEncoderEmbedding``: ``embed_batch`` returning plain lists."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def embed_batch(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return [_vector(t) for t in texts]


class EmbedBackend:
    """A generic backend with only ``embed(str)``."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def embed(self, text: str) -> list[float]:
        self.calls.append(text)
        return _vector(text)


TEXTS = [f"sentence number {i} about topic {i % 5}" for i in range(25)]


def _assert_unit_vectors(vectors: Any, count: int) -> None:
    assert isinstance(vectors, list) and len(vectors) == count
    for vector in vectors:
        assert isinstance(vector, list)
        assert all(type(x) is float for x in vector)
        assert math.isclose(math.sqrt(sum(x * x for x in vector)), 1.0, rel_tol=1e-5)


# --- detection ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("backend", "expected"),
    [
        (STLikeBackend(), "sentence_transformer"),
        (HFEncoderLikeBackend(), "hf_encoder"),
        (EncodeBackend(), "generic_encode"),
        (EmbedBackend(), "generic_embed"),
    ],
)
def test_wrapper_detects_backend(backend: Any, expected: str) -> None:
    assert UniversalEmbeddingWrapper(backend).backend == expected


def test_wrapper_rejects_object_without_embedding_api() -> None:
    with pytest.raises(TypeError, match="not an embedding backend"):
        UniversalEmbeddingWrapper(object())


# --- normalisation --------------------------------------------------------------------


@pytest.mark.parametrize("backend_cls", [HFEncoderLikeBackend, EncodeBackend, EmbedBackend])
def test_wrapper_outputs_unit_float_lists(backend_cls: type) -> None:
    wrapper = UniversalEmbeddingWrapper(backend_cls())
    _assert_unit_vectors(wrapper.embed_batch(TEXTS[:4]), 4)
    single = wrapper.embed("bonjour")
    _assert_unit_vectors([single], 1)
    # Normalisation keeps the direction: same vector as the raw one, scaled.
    raw = np.asarray(_vector("bonjour"))
    assert np.allclose(single, raw / np.linalg.norm(raw), atol=1e-6)


def test_wrapper_without_normalisation_returns_raw_values() -> None:
    wrapper = UniversalEmbeddingWrapper(EmbedBackend(), normalize=False)
    assert wrapper.embed("abc") == pytest.approx(_vector("abc"))


def test_wrapper_asks_sentence_transformer_to_normalise() -> None:
    backend = STLikeBackend()
    wrapper = UniversalEmbeddingWrapper(backend)
    _assert_unit_vectors(wrapper.embed_batch(["a", "bb"]), 2)
    assert backend.kwargs[0]["normalize_embeddings"] is True
    assert wrapper.max_seq_length == 128


def test_wrapper_keeps_zero_vector_finite() -> None:
    class Zero:
        def embed(self, text: str) -> list[float]:
            return [0.0, 0.0]

    assert UniversalEmbeddingWrapper(Zero()).embed("x") == [0.0, 0.0]


def test_wrapper_rejects_backend_returning_wrong_shape() -> None:
    class OneForAll:
        def encode(self, sentences: list[str], **kwargs: Any) -> list[float]:
            return [1.0, 2.0]  # one flat vector for a whole batch

    with pytest.raises(ValueError, match="shape"):
        UniversalEmbeddingWrapper(OneForAll()).embed_batch(["a", "b"])


def test_wrapper_empty_batch_does_not_call_backend() -> None:
    backend = EncodeBackend()
    assert UniversalEmbeddingWrapper(backend).embed_batch([]) == []
    assert backend.calls == []


# --- adapter: one backend call per list ---------------------------------------------------


@pytest.mark.parametrize("backend_cls", [EncodeBackend, HFEncoderLikeBackend, STLikeBackend])
def test_adapter_batch_calls_backend_once(backend_cls: type) -> None:
    backend = backend_cls()
    adapter = LlamaIndexEmbeddingAdapter(UniversalEmbeddingWrapper(backend), model_name="fake")
    # 25 texts: more than llama-index's default embed_batch_size (10).
    vectors = adapter.get_text_embedding_batch(TEXTS)
    assert backend.calls == [TEXTS]
    _assert_unit_vectors(vectors, len(TEXTS))
    # Same vectors as one text at a time, in the same order.
    assert vectors[7] == pytest.approx(adapter.get_text_embedding(TEXTS[7]))


def test_adapter_respects_an_explicit_batch_size() -> None:
    backend = EncodeBackend()
    adapter = LlamaIndexEmbeddingAdapter(UniversalEmbeddingWrapper(backend), embed_batch_size=10)
    adapter.get_text_embedding_batch(TEXTS)
    assert [len(c) for c in backend.calls] == [10, 10, 5]


async def test_adapter_async_methods() -> None:
    backend = EncodeBackend()
    adapter = LlamaIndexEmbeddingAdapter(UniversalEmbeddingWrapper(backend), model_name="fake")
    vectors = await adapter.aget_text_embedding_batch(TEXTS)
    assert backend.calls == [TEXTS]
    _assert_unit_vectors(vectors, len(TEXTS))
    query = await adapter.aget_query_embedding("quelle heure est-il ?")
    text = await adapter.aget_text_embedding("quelle heure est-il ?")
    assert query == pytest.approx(text)
    _assert_unit_vectors([query], 1)


def test_adapter_exposes_the_seed_api_levels() -> None:
    backend = EmbedBackend()
    adapter = LlamaIndexEmbeddingAdapter(UniversalEmbeddingWrapper(backend), model_name="fake")
    assert adapter.wrapper.embedding is backend
    assert adapter.wrapper.embed("Bonjour") == pytest.approx(adapter.get_text_embedding("Bonjour"))
    assert adapter.get_query_embedding("Bonjour") == pytest.approx(adapter.wrapper.embed("Bonjour"))
    assert adapter.max_seq_length is None
    assert adapter.model_name == "fake"


# --- the packaged all-MiniLM-L6-v2 (real model, loaded once) ----------------------------


@pytest.fixture(scope="module")
def minilm() -> LlamaIndexEmbeddingAdapter:
    return load_packaged_minilm()


def test_minilm_is_a_sentence_transformer_with_256_tokens(
    minilm: LlamaIndexEmbeddingAdapter,
) -> None:
    assert minilm.wrapper.backend == "sentence_transformer"
    assert minilm.max_seq_length == 256
    assert minilm.model_name == "sentence-transformers/all-MiniLM-L6-v2"


def test_minilm_vectors_are_unit_length(minilm: LlamaIndexEmbeddingAdapter) -> None:
    vectors = minilm.get_text_embedding_batch(["Bonjour le monde.", "Hello world."])
    _assert_unit_vectors(vectors, 2)
    assert len(vectors[0]) == 384


def test_minilm_paraphrase_is_closer_than_unrelated(minilm: LlamaIndexEmbeddingAdapter) -> None:
    # all-MiniLM-L6-v2 is an English model: its French/English similarity is only
    # high when the pair shares cognates, which this one does.
    fr, en, other = minilm.get_text_embedding_batch(
        [
            "Le président a signé le budget national.",
            "The president signed the national budget.",
            "Dogs love to play fetch in the park.",
        ]
    )
    paraphrase = float(np.dot(fr, en))
    assert paraphrase > float(np.dot(fr, other)) + 0.3
    assert paraphrase > float(np.dot(en, other)) + 0.3


def test_minilm_batch_equals_single(minilm: LlamaIndexEmbeddingAdapter) -> None:
    texts = ["Le contrat est signé.", "Quelle heure est-il ?", "Le budget 2025"]
    batch = minilm.get_text_embedding_batch(texts)
    for text, vector in zip(texts, batch, strict=True):
        assert vector == pytest.approx(minilm.get_query_embedding(text), abs=1e-5)
