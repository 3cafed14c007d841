"""Contextual compression: only the sentences of a kept chunk that are close to the query."""

from __future__ import annotations

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding

from themes.retrieval.sentences import CLOSERS, LIST_ITEM_RE, split_sentences
from themes.retrieval.vectors import FloatMatrix, normalised

# At most this many list items after a kept sentence that ends with a colon are kept with it.
MAX_ANNOUNCED_ITEMS = 8


def compress(
    texts: list[str],
    chunk_cosines: list[float],
    query_vectors: FloatMatrix,
    embed_model: BaseEmbedding,
    threshold: float,
) -> list[str]:
    """Keep the sentences close to the query; one embedding batch for all chunks.

    A sentence stays when its cosine similarity (best over the query
    variants) is at least ``threshold`` times the best
    sentence's over all kept chunks ("relative to the best": cosine
    levels differ from one query to the next, ratios much less); the
    best sentence of each chunk always stays, so no chunk comes back
    empty. One-sentence chunks stay whole and are not embedded again:
    their chunk cosine (``chunk_cosines``) stands for their sentence's.
    """
    spans = [split_sentences(t) for t in texts]
    sentences = [t[a:b] for t, sp in zip(texts, spans, strict=True) if len(sp) > 1 for a, b in sp]
    if not sentences:
        return list(texts)
    vectors = normalised(np.asarray(embed_model.get_text_embedding_batch(sentences), np.float32))
    scores = (vectors @ query_vectors.T).max(axis=1)
    singles = [c for c, sp in zip(chunk_cosines, spans, strict=True) if len(sp) <= 1]
    best = max([float(scores.max()), *singles])
    result: list[str] = []
    offset = 0
    for text, chunk_spans in zip(texts, spans, strict=True):
        if len(chunk_spans) <= 1:
            result.append(text.strip())
            continue
        chunk_scores = scores[offset : offset + len(chunk_spans)]
        offset += len(chunk_spans)
        top = int(np.argmax(chunk_scores))
        keep = [
            i == top or (best > 0 and float(s) / best >= threshold)
            for i, s in enumerate(chunk_scores.tolist())
        ]
        result.append(_join_kept(text, chunk_spans, with_announced(text, chunk_spans, keep)))
    return result


def with_announced(text: str, spans: list[tuple[int, int]], keep: list[bool]) -> list[bool]:
    """``keep``, plus the sentence after each kept one that ends with a colon.

    "Cela peut provoquer l'erreur :" is close to a question about that error;
    the line it announces ("OSError: [Errno 24] Too many open files") is the
    answer, yet shares few words with the question. Seen on the eval set: the
    answer was cut, and both the engine and the one-call baseline missed it.
    """
    kept = list(keep)
    for i in range(len(spans) - 1):
        start, end = spans[i]
        if not (keep[i] and text[start:end].rstrip(CLOSERS).endswith(":")):
            continue
        kept[i + 1] = True
        # A list announced by the colon comes whole ("au minimum :" - theme, detail, language),
        # and so do the lines of its block: "trois couches :" announced three names, each
        # a line with its own items ("UniversalEmbeddingWrapper …" was cut, its items kept).
        j = i + 1
        while (
            j + 1 < len(spans)
            and j + 1 - i <= MAX_ANNOUNCED_ITEMS
            and (_is_list_item(text, spans[j + 1]) or _next_line(text, spans[j], spans[j + 1]))
        ):
            j += 1
            kept[j] = True
    return kept


def _next_line(text: str, span: tuple[int, int], following: tuple[int, int]) -> bool:
    """``following`` starts the line right after ``span``'s (no blank line between)."""
    return text[span[1] : following[0]].count("\n") == 1


def _is_list_item(text: str, span: tuple[int, int]) -> bool:
    return LIST_ITEM_RE.match(text[span[0] : span[1]]) is not None


def _join_kept(text: str, spans: list[tuple[int, int]], keep: list[bool]) -> str:
    """The kept sentences in order; "[…]" marks where sentences were dropped."""
    parts: list[str] = []
    previous: int | None = None
    for i, ((start, end), kept) in enumerate(zip(spans, keep, strict=True)):
        if not kept:
            continue
        if parts:
            assert previous is not None
            separator = text[spans[previous][1] : start]
            if i - previous > 1:
                separator = "\n[…]\n" if "\n" in separator else " […] "
            parts.append(separator)
        elif i > 0:
            parts.append("[…] ")
        parts.append(text[start:end])
        previous = i
    if previous is not None and previous < len(spans) - 1:
        parts.append(" […]")
    return "".join(parts)
