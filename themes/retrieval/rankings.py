"""The ranked lists that fusion combines: nearest vectors, BM25, and the query's rare words."""

from __future__ import annotations

import re

from llama_index.core.vector_stores.types import VectorStoreQuery

from themes.retrieval.vectors import FloatMatrix
from themes.store_protocol import ChunkStore, KeywordSearch

# Letters and digits, as the keyword index splits words ("ZK-4491" -> "ZK", "4491").
_TERM_RE = re.compile(r"[^\W_]+")


def vector_rankings(store: ChunkStore, query_vectors: FloatMatrix, k: int) -> list[list[str]]:
    """For each query variant, the ``k`` nearest chunks by cosine similarity."""
    rankings: list[list[str]] = []
    for vector in query_vectors:
        found = store.query(VectorStoreQuery(query_embedding=vector.tolist(), similarity_top_k=k))
        rankings.append(list(found.ids or []))
    return rankings


def keyword_rankings(
    keywords: KeywordSearch, variants: tuple[str, ...], k: int
) -> tuple[list[list[str]], dict[str, float]]:
    """For each variant, the ``k`` best chunks by BM25 and (when any) the chunks holding its
    rare words; with each chunk's best BM25 score over the variants."""
    rankings: list[list[str]] = []
    keyword_scores: dict[str, float] = {}
    for variant in variants:
        hits = keywords.query(variant, k)
        rankings.append([node_id for node_id, _ in hits])
        for node_id, score in hits:
            keyword_scores[node_id] = max(score, keyword_scores.get(node_id, 0.0))
        rare = rare_term_hits(keywords, variant, k)
        if rare:
            rankings.append(rare)
    return rankings, keyword_scores


def rare_term_hits(keywords: KeywordSearch, text: str, k: int) -> list[str]:
    """Chunks holding the query's rare words (an identifier, a product name), by BM25.

    A word is rare when at most 1 % of the chunks (at least 1, at most
    ``k``) contain it. This list joins the fusion as one more ranking: RRF
    keeps only ranks, and a chunk that alone holds "ZK-4491" but is only
    fifth by vectors would otherwise lose to its semantic neighbours.
    """
    limit = max(1, min(k, keywords.count() // 100))
    rare = []
    for word in dict.fromkeys(_TERM_RE.findall(text)):
        found = len(keywords.query(word, limit + 1))
        if 0 < found <= limit:
            rare.append(word)
    if not rare:
        return []
    return [i for i, _ in keywords.query(" ".join(rare), k)]
