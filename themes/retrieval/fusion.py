"""Reciprocal rank fusion of the ranked lists, then re-ranking by cosine and fused score.

RRF is robust to the incomparable scales of cosine and BM25 scores, because it keeps only
ranks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from themes.retrieval.vectors import FloatMatrix

RRF_K = 60
# Weight of the cosine similarity (best over the variants) in the re-ranking score; the
# rest goes to the fused score relative to the best candidate's, which carries the BM25
# and rare-term evidence.
RERANK_COSINE_WEIGHT = 0.5


@dataclass
class Candidate:
    """A chunk found by at least one ranked list, with its scores so far."""

    node_id: str
    fused: float = 0.0
    keyword: float = 0.0
    cosine: float = 0.0


def fuse(ranked_lists: Sequence[Sequence[str]]) -> dict[str, Candidate]:
    """Every chunk of the lists with its reciprocal-rank-fusion score, in first-seen order."""
    candidates: dict[str, Candidate] = {}
    for ranking in ranked_lists:
        for position, node_id in enumerate(ranking, start=1):
            cand = candidates.setdefault(node_id, Candidate(node_id))
            cand.fused += 1.0 / (RRF_K + position)
    return candidates


def rerank(
    candidates: Mapping[str, Candidate],
    cosines: np.ndarray,
    keyword_scores: Mapping[str, float],
    top_k: int,
) -> list[tuple[float, Candidate]]:
    """The ``top_k`` best ``(rerank score, candidate)``; ``cosines`` is one per candidate."""
    best_fused = max(c.fused for c in candidates.values())
    scored: list[tuple[float, Candidate]] = []
    for cand, cosine in zip(candidates.values(), cosines.tolist(), strict=True):
        cand.cosine = float(cosine)
        cand.keyword = keyword_scores.get(cand.node_id, 0.0)
        rerank = RERANK_COSINE_WEIGHT * cand.cosine + (1.0 - RERANK_COSINE_WEIGHT) * (
            cand.fused / best_fused
        )
        scored.append((rerank, cand))
    # Ties (identical chunks) keep the fusion order, so results are deterministic.
    scored.sort(key=lambda pair: (-pair[0], -pair[1].fused, pair[1].node_id))
    return scored[:top_k]


def best_cosines(matrix: FloatMatrix, query_vectors: FloatMatrix) -> np.ndarray:
    """Each row's cosine with the closest query variant (both matrices normalised)."""
    return (matrix @ query_vectors.T).max(axis=1)
