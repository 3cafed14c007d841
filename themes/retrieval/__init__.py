"""Hybrid retrieval over one theme's index: query variants, BM25 + vectors, fusion, compression.

One ``retrieve(query)`` retrieves wide, re-ranks, then compresses:

1. Query variants: the query, plus its French<->English translation when the
   query's language differs from (part of) the corpus. The packaged embedding
   model (all-MiniLM-L6-v2) is English-only, so a French question over English
   documents only finds them through the translated variant; BM25 needs the
   document's own words as well. The translator is injected (the engine builds
   one on the LLM, tests use a dictionary).
2. For each variant: the ``wide_k`` nearest chunks by cosine similarity, the
   ``wide_k`` best chunks by BM25, and the chunks holding the query's rare
   words (an identifier such as "ZK-4491", a product name) ranked by BM25.
3. Reciprocal rank fusion (k = 60) of all those ranked lists: robust to the
   incomparable scales of cosine and BM25 scores. RRF keeps only ranks: without
   the rare-word list, a chunk that is BM25's clear first but only fifth by
   vectors would lose to its semantic neighbours.
4. Re-ranking of the fused candidates: exact cosine (best over the variants)
   blended with the fused score, then the ``top_k`` best are kept.
5. Contextual compression (optional): each kept chunk is cut into sentences,
   all sentences are embedded in one batch, and only those close to the query
   (relative to the best sentence found) are kept, in their original order;
   the best sentence of each chunk always stays. The lines a paragraph was
   wrapped into are joined, so a sentence reads as one.

The retriever reads one ``IndexVersion``: it is scoped to one theme by
construction and never sees another theme's chunks. It is also a llama-index
``BaseRetriever`` (``_retrieve`` returns the compressed chunks as nodes), so
``CondensePlusContextChatEngine`` can use it directly.

One module per stage: ``language`` and ``translation`` (query variants), ``rankings``
(vector, BM25 and rare-word lists), ``fusion`` (RRF and re-ranking), ``sentences`` and
``compression``, ``results``; ``hybrid`` runs them in order.
"""

from themes.retrieval.compression import MAX_ANNOUNCED_ITEMS, compress, with_announced
from themes.retrieval.fusion import RERANK_COSINE_WEIGHT, RRF_K
from themes.retrieval.hybrid import HybridRetriever
from themes.retrieval.language import (
    LANGUAGE_MIN_SHARE,
    LANGUAGE_SAMPLE,
    QueryLanguage,
    corpus_languages,
    detect_language,
)
from themes.retrieval.results import RetrievalResult, RetrievedChunk
from themes.retrieval.sentences import split_sentences, unwrap_lines
from themes.retrieval.translation import TRANSLATION_CACHE_SIZE, Translator, clean_translation
from themes.retrieval.vectors import FloatMatrix

__all__ = [
    "LANGUAGE_MIN_SHARE",
    "LANGUAGE_SAMPLE",
    "MAX_ANNOUNCED_ITEMS",
    "RERANK_COSINE_WEIGHT",
    "RRF_K",
    "TRANSLATION_CACHE_SIZE",
    "FloatMatrix",
    "HybridRetriever",
    "QueryLanguage",
    "RetrievalResult",
    "RetrievedChunk",
    "Translator",
    "clean_translation",
    "compress",
    "corpus_languages",
    "detect_language",
    "split_sentences",
    "unwrap_lines",
    "with_announced",
]
