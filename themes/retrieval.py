"""Hybrid retrieval over one theme's index: query variants, BM25 + vectors, fusion, compression.

One ``retrieve(query)`` runs the pipeline of the seed's "RAG : Compression
contextuelle" article (wide retrieval, re-ranking, then compression):

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
   the best sentence of each chunk always stays.

The retriever reads one ``IndexVersion``: it is scoped to one theme by
construction and never sees another theme's chunks. It is also a llama-index
``BaseRetriever`` (``_retrieve`` returns the compressed chunks as nodes), so
``CondensePlusContextChatEngine`` can use it directly.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, overload

import numpy as np
import numpy.typing as npt
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from llama_index.core.vector_stores.types import VectorStoreQuery

from themes.index_storage import IndexVersion
from themes.theme import RetrievalSettings

logger = logging.getLogger(__name__)

Translator = Callable[[str], str | None]
QueryLanguage = Literal["fr", "en"]
FloatMatrix = npt.NDArray[np.float32]

RRF_K = 60
# Weight of the cosine similarity (best over the variants) in the re-ranking score; the
# rest goes to the fused score relative to the best candidate's, which carries the BM25
# and rare-term evidence.
RERANK_COSINE_WEIGHT = 0.5
# Chunks sampled to estimate which languages a corpus is written in.
LANGUAGE_SAMPLE = 200
# A language counts as present in the corpus above this share of the sampled chunks.
LANGUAGE_MIN_SHARE = 0.05
TRANSLATION_CACHE_SIZE = 128

# --------------------------------------------------------------------------------------------
# Language detection (a stopword vote: enough to tell a French question from an English one)
# --------------------------------------------------------------------------------------------

# Words frequent in one language and rare in the other. Ambiguous ones ("a", "on",
# "est" is kept: it is not an English word) are left out of both lists.
# fmt: off
_FRENCH_WORDS = frozenset((
    "le", "la", "les", "des", "du", "de", "un", "une", "est", "et", "pour", "dans", "que",
    "qui", "quel", "quelle", "quels", "quelles", "comment", "combien", "pourquoi", "sur",
    "avec", "sont", "pas", "ne", "au", "aux", "ce", "cette", "ces", "il", "elle", "nous",
    "vous", "je", "mon", "ma", "mes", "notre", "votre", "nos", "vos", "leur", "leurs", "où",
    "quand", "faut", "peut", "doit", "être", "avoir", "fait", "par", "en", "se", "sa", "son",
    "ses", "l", "d", "qu", "c", "j", "n", "s", "y", "ou", "mais", "donc", "selon", "chez",
    "entre", "après", "avant", "depuis", "lors", "tout", "tous", "toutes", "très", "aussi",
))
_ENGLISH_WORDS = frozenset((
    "the", "is", "are", "was", "were", "what", "how", "why", "when", "where", "which", "who",
    "of", "to", "in", "for", "with", "and", "an", "do", "does", "can", "should", "must", "my",
    "our", "your", "their", "this", "that", "these", "those", "be", "it", "at", "by", "from",
    "there", "have", "has", "i", "we", "you", "they", "not", "or", "if", "about", "many",
    "much", "will", "would", "after", "before", "between", "all", "also", "very", "any",
))
# fmt: on
_WORD_RE = re.compile(r"[^\W\d_]+")
# Letters and digits, as the keyword index splits words ("ZK-4491" -> "ZK", "4491").
_TERM_RE = re.compile(r"[^\W_]+")
_FRENCH_LETTERS = frozenset("éèêëàâçùûüîïôœ")


def detect_language(text: str) -> QueryLanguage | None:
    """``"fr"``, ``"en"`` or ``None`` (no evidence either way) by a stopword vote.

    Accented letters typical of French count as one French vote, so a single
    word such as "congés" is still recognised.
    """
    words = _WORD_RE.findall(text.casefold())
    french = sum(w in _FRENCH_WORDS for w in words)
    english = sum(w in _ENGLISH_WORDS for w in words)
    if any(c in _FRENCH_LETTERS for c in text.casefold()):
        french += 1
    if french > english:
        return "fr"
    if english > french:
        return "en"
    return None


def corpus_languages(texts: Sequence[str]) -> frozenset[QueryLanguage]:
    """The languages at least ``LANGUAGE_MIN_SHARE`` of ``texts`` are written in."""
    votes: dict[QueryLanguage, int] = {"fr": 0, "en": 0}
    for text in texts:
        lang = detect_language(text)
        if lang is not None:
            votes[lang] += 1
    total = sum(votes.values())
    if total == 0:
        return frozenset()
    return frozenset(lang for lang, n in votes.items() if n > 0 and n / total >= LANGUAGE_MIN_SHARE)


# --------------------------------------------------------------------------------------------
# Sentence splitting (for compression)
# --------------------------------------------------------------------------------------------

_WS_RE = re.compile(r"\s+")
_SENTENCE_END = frozenset(".!?…")
_LINE_END = frozenset(".!?…:;")
_CLOSERS = "\"'»”’)]"
_LIST_ITEM_RE = re.compile(r"(?:[-•*▪–]|\d{1,3}[.)])\s")
# "1." or "p." alone before the space: list numbering or an abbreviation, not a sentence.
_TOO_SHORT_RE = re.compile(r"\W*(?:\d{1,3}|[^\W\d_])[.)]")
_INITIAL_RE = re.compile(r"(?:^|\W)[^\W\d_]\.$")


def split_sentences(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` spans of the sentences of ``text``, in order, without whitespace.

    Boundaries: a blank line; a line break after a sentence end, a colon or a
    semicolon, or before a list item; a sentence end followed by a space and a
    character that is not a lower-case letter (so "e.g. the" stays whole). A
    line break elsewhere is a wrapped line (PDF text) and does not cut. An
    initial ("J. Smith", "p. 3") and a lone list number ("1.") do not cut either.
    """
    stripped_end = len(text.rstrip())
    start = len(text) - len(text.lstrip())
    if start >= stripped_end:
        return []
    spans: list[tuple[int, int]] = []
    for match in _WS_RE.finditer(text, start, stripped_end):
        unit = text[start : match.start()]
        # Only the start of what follows matters (a list marker, a capital letter).
        if _is_boundary(unit, match.group(), text[match.end() : match.end() + 8]):
            spans.append((start, match.start()))
            start = match.end()
    spans.append((start, stripped_end))
    return spans


def _is_boundary(unit: str, space: str, after: str) -> bool:
    newlines = space.count("\n")
    stripped = unit.rstrip(_CLOSERS)
    last = stripped[-1:] if stripped else ""
    if newlines >= 2:
        return True
    if newlines == 1:
        return last in _LINE_END or _LIST_ITEM_RE.match(after) is not None
    if last not in _SENTENCE_END or after[0].islower():
        return False
    return not (_TOO_SHORT_RE.fullmatch(unit.strip()) or _INITIAL_RE.search(stripped))


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RetrievedChunk:
    """One chunk kept by the retriever, with every score that led to it.

    ``vector_score``: best cosine similarity over the query variants;
    ``keyword_score``: best BM25 score (0 when no variant's keywords matched);
    ``fused_score``: reciprocal rank fusion of all the ranked lists;
    ``rerank_score``: the final ordering score; ``rank``: 1-based position.
    """

    node_id: str
    text: str
    compressed_text: str
    file_name: str | None
    page: int | None
    vector_score: float
    keyword_score: float
    fused_score: float
    rerank_score: float
    rank: int
    metadata: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def label(self) -> str:
        """``"file.pdf, p. 3"``: how the chunk is cited."""
        name = _one_line(self.file_name) if self.file_name else "unknown document"
        return f"{name}, p. {self.page}" if self.page is not None else name


@dataclass(frozen=True)
class RetrievalResult(Sequence[NodeWithScore]):
    """What one retrieval found: the chunks, best first, and how long each stage took.

    It is also a sequence of ``NodeWithScore`` (the compressed chunks, scored by
    ``rerank_score``): ``HybridRetriever.retrieve`` overrides llama-index's
    ``BaseRetriever.retrieve``, whose callers iterate over nodes.
    """

    query: str
    variants: tuple[str, ...] = ()
    items: list[RetrievedChunk] = field(default_factory=list)
    timings_ms: Mapping[str, float] = field(default_factory=dict)

    @property
    def nodes(self) -> list[NodeWithScore]:
        return [_node_of(item) for item in self.items]

    @overload
    def __getitem__(self, index: int) -> NodeWithScore: ...

    @overload
    def __getitem__(self, index: slice) -> list[NodeWithScore]: ...

    def __getitem__(self, index: int | slice) -> NodeWithScore | list[NodeWithScore]:
        if isinstance(index, slice):
            return [_node_of(item) for item in self.items[index]]
        return _node_of(self.items[index])

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[NodeWithScore]:
        return (_node_of(item) for item in self.items)

    def context_text(self, escape: Callable[[str], str] | None = None) -> str:
        """The compressed passages, numbered, each between ``[Source n: ...]`` and its end.

        ``escape`` (optional) rewrites each passage first, e.g. to neutralise
        lines a ReAct agent would read as its own markers.
        """
        blocks = []
        for item in self.items:
            body = item.compressed_text if escape is None else escape(item.compressed_text)
            blocks.append(
                f"[Source {item.rank}: {item.label}]\n{body}\n[End of source {item.rank}]"
            )
        return "\n\n".join(blocks)


def _node_of(item: RetrievedChunk) -> NodeWithScore:
    node = TextNode(id_=item.node_id, text=item.compressed_text, metadata=dict(item.metadata))
    # What the chat engine's LLM reads of the metadata: where the passage comes from.
    node.excluded_llm_metadata_keys = [
        k for k, v in node.metadata.items() if k not in ("file_name", "page") or v is None
    ]
    node.excluded_embed_metadata_keys = list(node.metadata)
    return NodeWithScore(node=node, score=item.rerank_score)


def _one_line(text: str) -> str:
    # A file name is printed inside a "[Source n: ...]" header: it must not break it.
    return re.sub(r"[\s\[\]]+", " ", text).strip()


def _page_of(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


# --------------------------------------------------------------------------------------------
# The retriever
# --------------------------------------------------------------------------------------------


@dataclass
class _Candidate:
    node_id: str
    fused: float = 0.0
    keyword: float = 0.0
    cosine: float = 0.0


class HybridRetriever(BaseRetriever):
    """BM25 + vector retrieval over one theme's ``IndexVersion`` (see the module docstring).

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
        self._translations: OrderedDict[str, str | None] = OrderedDict()
        self._lock = threading.Lock()

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
        translated = self._translate(query)
        if not translated or translated.casefold() == query.casefold():
            return (query,)
        return (query, translated)

    def _translate(self, query: str) -> str | None:
        with self._lock:
            if query in self._translations:
                self._translations.move_to_end(query)
                return self._translations[query]
        assert self.translator is not None
        try:
            translated = self.translator(query)
        except Exception as exc:  # noqa: BLE001 - a failed translation only loses a variant
            logger.warning("query translation failed: %s: %s", type(exc).__name__, exc)
            return None
        cleaned = clean_translation(translated)
        if cleaned is not None:  # failures are retried next time, successes are kept
            with self._lock:
                self._translations[query] = cleaned
                while len(self._translations) > TRANSLATION_CACHE_SIZE:
                    self._translations.popitem(last=False)
        return cleaned

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
        query_vectors = _normalised(
            np.asarray([self.embed_model.get_query_embedding(v) for v in variants], np.float32)
        )
        clock.lap("embed_query")

        ranked_lists: list[list[str]] = []
        keyword_scores: dict[str, float] = {}
        for vector in query_vectors:
            found = store.query(
                VectorStoreQuery(query_embedding=vector.tolist(), similarity_top_k=k)
            )
            ranked_lists.append(list(found.ids or []))
        clock.lap("vector")
        for variant in variants:
            hits = self.version.keywords.query(variant, k)
            ranked_lists.append([node_id for node_id, _ in hits])
            for node_id, score in hits:
                keyword_scores[node_id] = max(score, keyword_scores.get(node_id, 0.0))
            rare = self._rare_term_hits(variant, k)
            if rare:
                ranked_lists.append(rare)
        clock.lap("keyword")

        candidates: dict[str, _Candidate] = {}
        for ranking in ranked_lists:
            for position, node_id in enumerate(ranking, start=1):
                cand = candidates.setdefault(node_id, _Candidate(node_id))
                cand.fused += 1.0 / (RRF_K + position)
        if not candidates:
            return RetrievalResult(query=query, variants=variants, timings_ms=timings)
        ids = list(candidates)
        matrix = store.embeddings(ids)
        cosines = (matrix @ query_vectors.T).max(axis=1)
        best_fused = max(c.fused for c in candidates.values())
        scored: list[tuple[float, _Candidate]] = []
        for cand, cosine in zip(candidates.values(), cosines.tolist(), strict=True):
            cand.cosine = float(cosine)
            cand.keyword = keyword_scores.get(cand.node_id, 0.0)
            rerank = RERANK_COSINE_WEIGHT * cand.cosine + (1.0 - RERANK_COSINE_WEIGHT) * (
                cand.fused / best_fused
            )
            scored.append((rerank, cand))
        # Ties (identical chunks) keep the fusion order, so results are deterministic.
        scored.sort(key=lambda pair: (-pair[0], -pair[1].fused, pair[1].node_id))
        kept = scored[: self.settings.top_k]
        clock.lap("rerank")

        by_id = {node.node_id: node for node in store.get_nodes([c.node_id for _, c in kept])}
        nodes = [by_id.get(cand.node_id) for _, cand in kept]
        texts = [node.get_content() if node is not None else "" for node in nodes]
        if self.settings.compression:
            cosines_kept = [cand.cosine for _, cand in kept]
            compressed = self._compress(texts, cosines_kept, query_vectors)
        else:
            compressed = list(texts)
        clock.lap("compress")

        items = []
        for rank, ((rerank, cand), node, text, short) in enumerate(
            zip(kept, nodes, texts, compressed, strict=True), start=1
        ):
            metadata = dict(node.metadata) if node is not None else {}
            items.append(
                RetrievedChunk(
                    node_id=cand.node_id,
                    text=text,
                    compressed_text=short,
                    file_name=str(metadata["file_name"]) if metadata.get("file_name") else None,
                    page=_page_of(metadata.get("page")),
                    vector_score=cand.cosine,
                    keyword_score=cand.keyword,
                    fused_score=cand.fused,
                    rerank_score=rerank,
                    rank=rank,
                    metadata=metadata,
                )
            )
        return RetrievalResult(query=query, variants=variants, items=items, timings_ms=timings)

    def _rare_term_hits(self, text: str, k: int) -> list[str]:
        """Chunks holding the query's rare words (an identifier, a product name), by BM25.

        A word is rare when at most 1 % of the chunks (at least 1, at most
        ``k``) contain it. This list joins the fusion as one more ranking: RRF
        keeps only ranks, and a chunk that alone holds "ZK-4491" but is only
        fifth by vectors would otherwise lose to its semantic neighbours.
        """
        keywords = self.version.keywords
        limit = max(1, min(k, keywords.count() // 100))
        rare = []
        for word in dict.fromkeys(_TERM_RE.findall(text)):
            found = len(keywords.query(word, limit + 1))
            if 0 < found <= limit:
                rare.append(word)
        if not rare:
            return []
        return [i for i, _ in keywords.query(" ".join(rare), k)]

    def _compress(
        self, texts: list[str], chunk_cosines: list[float], query_vectors: FloatMatrix
    ) -> list[str]:
        """Keep the sentences close to the query; one embedding batch for all chunks.

        A sentence stays when its cosine similarity (best over the query
        variants) is at least ``compression_threshold`` times the best
        sentence's over all kept chunks ("relative to the best": cosine
        levels differ from one query to the next, ratios much less); the
        best sentence of each chunk always stays, so no chunk comes back
        empty. One-sentence chunks stay whole and are not embedded again:
        their chunk cosine (``chunk_cosines``) stands for their sentence's.
        """
        spans = [split_sentences(t) for t in texts]
        sentences = [
            t[a:b] for t, sp in zip(texts, spans, strict=True) if len(sp) > 1 for a, b in sp
        ]
        if not sentences:
            return list(texts)
        vectors = _normalised(
            np.asarray(self.embed_model.get_text_embedding_batch(sentences), np.float32)
        )
        scores = (vectors @ query_vectors.T).max(axis=1)
        singles = [c for c, sp in zip(chunk_cosines, spans, strict=True) if len(sp) <= 1]
        best = max([float(scores.max()), *singles])
        threshold = self.settings.compression_threshold
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
        if not (keep[i] and text[start:end].rstrip(_CLOSERS).endswith(":")):
            continue
        kept[i + 1] = True
        # A list announced by the colon comes whole ("au minimum :" - theme, detail, language).
        j = i + 1
        while j < len(spans) and j - i <= MAX_ANNOUNCED_ITEMS and _is_list_item(text, spans[j]):
            kept[j] = True
            j += 1
    return kept


MAX_ANNOUNCED_ITEMS = 8


def _is_list_item(text: str, span: tuple[int, int]) -> bool:
    return _LIST_ITEM_RE.match(text[span[0] : span[1]]) is not None


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


def clean_translation(text: str | None) -> str | None:
    """First non-empty line of a model's translation, without quotes or a label."""
    if not isinstance(text, str):
        return None
    for line in text.splitlines():
        line = re.sub(r"^\s*(?:translation|traduction)\s*:\s*", "", line, flags=re.IGNORECASE)
        line = line.strip().strip("\"'«»“”`").strip()
        if line:
            return line[:500]
    return None


def _normalised(matrix: FloatMatrix) -> FloatMatrix:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return (matrix / np.where(norms == 0.0, np.float32(1.0), norms)).astype(np.float32)


class _Clock:
    """Milliseconds spent in each stage, for diagnostics and benchmarks."""

    def __init__(self, into: dict[str, float]) -> None:
        self._into = into
        self._last = time.perf_counter()

    def lap(self, stage: str) -> None:
        now = time.perf_counter()
        self._into[stage] = round((now - self._last) * 1000.0, 3)
        self._last = now
