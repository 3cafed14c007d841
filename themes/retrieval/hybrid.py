"""The hybrid retriever: query variants, vector + BM25 rankings, fusion, re-ranking,
compression, over one theme's published index version."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import numpy as np
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.schema import NodeWithScore, QueryBundle

from themes.index_storage import IndexVersion
from themes.retrieval.compression import compress
from themes.retrieval.fusion import Candidate, best_cosines, fuse, rerank
from themes.retrieval.language import (
    LANGUAGE_SAMPLE,
    QueryLanguage,
    corpus_languages,
    detect_language,
)
from themes.retrieval.rankings import keyword_rankings, vector_rankings
from themes.retrieval.results import RetrievalResult, RetrievedChunk, page_of
from themes.retrieval.sentences import unwrap_lines
from themes.retrieval.translation import TranslationCache, Translator
from themes.retrieval.vectors import FloatMatrix, normalised
from themes.theme import RetrievalSettings

logger = logging.getLogger(__name__)


class HybridRetriever(BaseRetriever):
    """BM25 + vector retrieval over one theme's ``IndexVersion`` (see ``themes.retrieval``).

    Thread-safe for queries: the index version is read-only and the only
    mutable state, the translation cache, has its own lock.
    """

    def __init__(
        self,
        version: IndexVersion,
        embed_model: BaseEmbedding,
        settings: RetrievalSettings | None = None,
        *,
        translator: Translator | None = None,
        translate_mixed: bool = True,
    ) -> None:
        """``translate_mixed``: also translate when the corpus holds the question's
        language beside another one (False: only when it does not hold it at all)."""
        super().__init__()
        self.version = version
        self.embed_model = embed_model
        self.settings = settings or RetrievalSettings()
        self.translator = translator
        self.translate_mixed = translate_mixed
        store = version.vectors
        stored_model = store.embed_model_name
        if stored_model and embed_model.model_name not in (stored_model, "unknown"):
            logger.warning(
                "index %s was embedded with %s but is queried with %s: results will be poor",
                version.name,
                stored_model,
                embed_model.model_name,
            )
        self._languages = corpus_languages(store.sample_texts(LANGUAGE_SAMPLE))
        self._translations = TranslationCache()

    @property
    def corpus_languages(self) -> frozenset[QueryLanguage]:
        """Languages detected in the theme's chunks (empty when undecided)."""
        return self._languages

    # --- llama-index BaseRetriever --------------------------------------------------------
    def retrieve(self, query: str | QueryBundle) -> RetrievalResult:  # type: ignore[override]
        """Run the whole pipeline for ``query``; the result is also a list of nodes."""
        text = query.query_str if isinstance(query, QueryBundle) else query
        return self._run(text)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._run(query_bundle.query_str).nodes

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        # Embedding, BM25 and the translator's LLM call all block: keep the loop free.
        result = await asyncio.to_thread(self._run, query_bundle.query_str)
        return result.nodes

    # --- pipeline ---------------------------------------------------------------------------
    def query_variants(self, query: str) -> tuple[str, ...]:
        """The query, then its translation when one is useful and available."""
        query = query.strip()
        if not query:
            return ()
        if not self.settings.translate_queries or self.translator is None:
            return (query,)
        language = detect_language(query)
        # Translate only when part of the corpus is in the other language: a French
        # question over French documents gains nothing from an English variant.
        if language is None or (self._languages and self._languages <= {language}):
            return (query,)
        if not self.translate_mixed and language in self._languages:
            return (query,)
        translated = self._translations.translate(self.translator, query)
        if not translated or translated.casefold() == query.casefold():
            return (query,)
        return (query, translated)

    def _run(self, query: str) -> RetrievalResult:
        # One state of the index for the whole pipeline, even if a writer publishes meanwhile
        # (a server-side store changes in place; the embedded one never does).
        with self.version.vectors.snapshot():
            return self._run_in_snapshot(query)

    def _run_in_snapshot(self, query: str) -> RetrievalResult:
        timings: dict[str, float] = {}
        store = self.version.vectors
        if store.count() == 0 or not query.strip():  # nothing to search: no translation either
            empty: tuple[str, ...] = (query.strip(),) if query.strip() else ()
            return RetrievalResult(query=query, variants=empty, timings_ms=timings)
        clock = _Clock(timings)
        variants = self.query_variants(query)
        clock.lap("translate")
        k = self.settings.wide_k
        query_vectors = normalised(
            np.asarray([self.embed_model.get_query_embedding(v) for v in variants], np.float32)
        )
        clock.lap("embed_query")
        ranked_lists = vector_rankings(store, query_vectors, k)
        clock.lap("vector")
        keyword_lists, keyword_scores = keyword_rankings(self.version.keywords, variants, k)
        ranked_lists.extend(keyword_lists)
        clock.lap("keyword")
        candidates = fuse(ranked_lists)
        if not candidates:
            return RetrievalResult(query=query, variants=variants, timings_ms=timings)
        cosines = best_cosines(store.embeddings(list(candidates)), query_vectors)
        kept = rerank(candidates, cosines, keyword_scores, self.settings.top_k)
        clock.lap("rerank")
        items = self._chunks(kept, query_vectors, clock)
        return RetrievalResult(query=query, variants=variants, items=items, timings_ms=timings)

    def _chunks(
        self, kept: list[tuple[float, Candidate]], query_vectors: FloatMatrix, clock: _Clock
    ) -> list[RetrievedChunk]:
        """The kept candidates as chunks, their text compressed when the settings ask."""
        store = self.version.vectors
        by_id = {node.node_id: node for node in store.get_nodes([c.node_id for _, c in kept])}
        nodes = [by_id.get(cand.node_id) for _, cand in kept]
        texts = [node.get_content() if node is not None else "" for node in nodes]
        if self.settings.compression:
            cosines_kept = [cand.cosine for _, cand in kept]
            compressed = compress(
                texts,
                cosines_kept,
                query_vectors,
                self.embed_model,
                self.settings.compression_threshold,
            )
        else:
            compressed = list(texts)
        clock.lap("compress")
        items = []
        for rank, ((score, cand), node, text, short) in enumerate(
            zip(kept, nodes, texts, compressed, strict=True), start=1
        ):
            metadata: dict[str, Any] = dict(node.metadata) if node is not None else {}
            items.append(
                RetrievedChunk(
                    node_id=cand.node_id,
                    text=text,
                    compressed_text=unwrap_lines(short),
                    file_name=str(metadata["file_name"]) if metadata.get("file_name") else None,
                    page=page_of(metadata.get("page")),
                    vector_score=cand.cosine,
                    keyword_score=cand.keyword,
                    fused_score=cand.fused,
                    rerank_score=score,
                    rank=rank,
                    metadata=metadata,
                )
            )
        return items


class _Clock:
    """Milliseconds spent in each stage, for diagnostics and benchmarks."""

    def __init__(self, into: dict[str, float]) -> None:
        self._into = into
        self._last = time.perf_counter()

    def lap(self, stage: str) -> None:
        now = time.perf_counter()
        self._into[stage] = round((now - self._last) * 1000.0, 3)
        self._last = now
