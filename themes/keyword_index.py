"""BM25 keyword index over a theme's chunks (bm25s), for French and English text.

Analysis, applied identically to chunks and queries: Unicode NFKD then
accent folding and lowercasing ("Procédure" -> "procedure"), split on word
characters, drop French and English stopwords, then stem every token with
BOTH the French and the English Snowball stemmers and keep each distinct
stem. A theme's documents mix both languages and chunks carry no reliable
language tag, so indexing both stems lets "procédures" find "procédure" and
"running" find "run" without guessing. Folding before stemming makes a query
typed without accents ("donnees") reach the accented text ("données").

Chunk token ids are kept (``tokens.npy`` + ``offsets.npy``) beside the bm25s
matrix so that adding or deleting chunks re-scores from stored tokens instead
of re-analysing every text; BM25's IDF depends on the whole corpus, so the
matrix itself is rebuilt (lazily, at the next query or persist).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import unicodedata
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import Any, Self

import bm25s
import numpy as np
import numpy.typing as npt
import Stemmer

from themes.errors import ThemesError

IntArray = npt.NDArray[np.int32]

KEYWORDS_FILE = "keywords.json"
TOKENS_FILE = "tokens.npy"
OFFSETS_FILE = "offsets.npy"
BM25_DIR = "bm25"
FORMAT_VERSION = 1

# Letters and digits; "_" splits too, so "mot_de_passe" yields its words.
_WORD_RE = re.compile(r"[^\W_]+")

# Short, folded (no accents) lists: only words too frequent to help ranking. Elided
# forms ("l'", "qu'") appear as their letters after splitting on the apostrophe.
# fmt: off
_FRENCH_STOPWORDS = (
    "a", "au", "aux", "avec", "ce", "ces", "c", "d", "dans", "de", "des", "du", "elle", "elles",
    "en", "est", "et", "etre", "eux", "il", "ils", "j", "je", "l", "la", "le", "les", "leur",
    "leurs", "lui", "m", "ma", "mais", "me", "meme", "mes", "moi", "mon", "n", "ne", "nos",
    "notre", "nous", "on", "ou", "par", "pas", "pour", "qu", "que", "qui", "s", "sa", "se",
    "ses", "son", "sont", "sur", "t", "ta", "te", "tes", "toi", "ton", "tu", "un", "une", "vos",
    "votre", "vous", "y", "etait", "cet", "cette", "ceux", "celle", "celles", "dont",
    "donc", "ni", "or", "car", "si", "sans", "sous", "chez", "comme", "plus",
)
_ENGLISH_STOPWORDS = (
    "a", "an", "and", "are", "as", "at", "be", "been", "but", "by", "for", "from", "had", "has",
    "have", "he", "her", "his", "i", "if", "in", "into", "is", "it", "its", "me", "my", "no",
    "not", "of", "on", "or", "our", "she", "so", "such", "that", "the", "their", "them", "then",
    "there", "these", "they", "this", "to", "was", "we", "were", "what", "when", "which", "who",
    "will", "with", "would", "you", "your", "do", "does", "did", "than", "too", "very", "can",
)
# fmt: on
STOPWORDS: frozenset[str] = frozenset(_FRENCH_STOPWORDS) | frozenset(_ENGLISH_STOPWORDS)

# PyStemmer objects keep an internal cache and are not thread-safe: one pair per thread.
_local = threading.local()


def _stemmers() -> tuple[Any, Any]:
    pair = getattr(_local, "stemmers", None)
    if pair is None:
        pair = (Stemmer.Stemmer("french"), Stemmer.Stemmer("english"))
        _local.stemmers = pair
    return pair


# Ligatures that NFKD leaves whole but French writers type either way ("œuvre"/"oeuvre").
_LIGATURES = str.maketrans({"œ": "oe", "æ": "ae"})


def fold(text: str) -> str:
    """Lowercase and strip accents: "Procédure Œuvre" -> "procedure oeuvre"."""
    decomposed = unicodedata.normalize("NFKD", text.casefold().translate(_LIGATURES))
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def index_words(text: str) -> list[str]:
    """Folded words minus stopwords, in order: what is stemmed (here or by PostgreSQL)."""
    return [w for w in _WORD_RE.findall(fold(text)) if w not in STOPWORDS]


def analyze(text: str) -> list[str]:
    """Text -> index terms: folded words minus stopwords, each as its French and English stem."""
    words = index_words(text)
    if not words:
        return []
    french, english = _stemmers()
    fr_stems: list[str] = french.stemWords(words)
    en_stems: list[str] = english.stemWords(words)
    terms: list[str] = []
    for fr, en in zip(fr_stems, en_stems, strict=True):
        terms.append(fr)
        if en != fr:
            terms.append(en)
    return terms


def _text_hash(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=8).hexdigest()


class ReadOnlyIndexError(ThemesError, RuntimeError):
    """A mutation was attempted on a frozen keyword index (a published version)."""


class KeywordIndex:
    """BM25 over ``(node_id, text)`` chunks; ``query`` returns ``(node_id, score)``, best first."""

    def __init__(self) -> None:
        self._ids: list[str] = []
        self._rows: dict[str, int] = {}
        self._hashes: list[str] = []
        self._tokens: list[IntArray] = []  # per chunk, ids into _vocab
        self._vocab: list[str] = []
        self._vocab_ids: dict[str, int] = {}
        self._bm25: bm25s.BM25 | None = None
        self._stale = False  # True when _bm25 no longer matches the chunks
        self._frozen = False
        # Queries on a shared (frozen) index may run in many threads; the lazy
        # BM25 build must happen once.
        self._build_lock = threading.Lock()

    # ------------------------------------------------------------------ inspection

    def count(self) -> int:
        return len(self._ids)

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._rows

    def node_ids(self) -> list[str]:
        return list(self._ids)

    @property
    def frozen(self) -> bool:
        return self._frozen

    # ------------------------------------------------------------------ mutation

    def freeze(self) -> Self:
        """Refuse every later mutation; used for published, shared versions."""
        self._frozen = True
        return self

    def _check_mutable(self) -> None:
        if self._frozen:
            raise ReadOnlyIndexError(
                "this keyword index is a published index version and is read-only; "
                "mutate it through IndexStorage(theme_dir).writer()"
            )

    def _token_ids(self, terms: list[str]) -> IntArray:
        ids = []
        for term in terms:
            tid = self._vocab_ids.get(term)
            if tid is None:
                tid = len(self._vocab)
                self._vocab.append(term)
                self._vocab_ids[term] = tid
            ids.append(tid)
        return np.asarray(ids, dtype=np.int32)

    def build(self, chunks: Iterable[tuple[str, str]]) -> None:
        """Replace the whole index with ``(node_id, text)`` chunks (repeated id: last wins)."""
        self._check_mutable()
        self._ids, self._rows, self._hashes, self._tokens = [], {}, [], []
        self._vocab, self._vocab_ids = [], {}
        self._bm25 = None
        self._stale = True
        self.add(chunks)

    def add(self, chunks: Iterable[tuple[str, str]]) -> None:
        """Insert chunks, replacing any with the same node id."""
        self._check_mutable()
        for node_id, text in chunks:
            tokens = self._token_ids(analyze(text))
            row = self._rows.get(node_id)
            if row is None:
                self._rows[node_id] = len(self._ids)
                self._ids.append(node_id)
                self._hashes.append(_text_hash(text))
                self._tokens.append(tokens)
            else:
                self._hashes[row] = _text_hash(text)
                self._tokens[row] = tokens
            self._stale = True

    def delete(self, node_ids: Iterable[str]) -> int:
        """Remove chunks by node id (unknown ids are ignored); return how many were removed."""
        self._check_mutable()
        gone = {i for i in node_ids if i in self._rows}
        if not gone:
            return 0
        keep = [r for r, node_id in enumerate(self._ids) if node_id not in gone]
        self._ids = [self._ids[r] for r in keep]
        self._hashes = [self._hashes[r] for r in keep]
        self._tokens = [self._tokens[r] for r in keep]
        self._rows = {node_id: r for r, node_id in enumerate(self._ids)}
        self._stale = True
        return len(gone)

    def sync(self, chunks: Iterable[tuple[str, str]]) -> bool:
        """Make the index hold exactly ``chunks``, re-analysing only new or changed texts.

        Returns whether anything changed. ``IndexStorage`` calls this with the
        vector store's chunks before every commit, so the two cannot drift apart.
        """
        self._check_mutable()
        wanted: dict[str, str] = dict(chunks)
        removed = [i for i in self._ids if i not in wanted]
        changed = [
            (node_id, text)
            for node_id, text in wanted.items()
            if (row := self._rows.get(node_id)) is None or self._hashes[row] != _text_hash(text)
        ]
        if removed:
            self.delete(removed)
        if changed:
            self.add(changed)
        return bool(removed or changed)

    def _compact(self) -> None:
        """Drop vocabulary no chunk uses any more (after deletions or replacements)."""
        if not self._tokens:
            self._vocab, self._vocab_ids = [], {}
            return
        lengths = [len(t) for t in self._tokens]
        flat = np.concatenate(self._tokens)
        used, inverse = np.unique(flat, return_inverse=True)
        if len(used) == len(self._vocab):
            return
        self._vocab = [self._vocab[i] for i in used.tolist()]
        self._vocab_ids = {term: i for i, term in enumerate(self._vocab)}
        remapped = inverse.astype(np.int32)
        self._tokens = list(np.split(remapped, np.cumsum(lengths)[:-1]))

    def _ensure_bm25(self) -> None:
        if not self._stale:
            return
        with self._build_lock:
            if self._stale:
                self._rebuild_bm25()

    def _rebuild_bm25(self) -> None:
        self._compact()
        if not self._ids or not self._vocab:
            self._bm25 = None
        else:
            bm25 = bm25s.BM25()
            # Our vocabulary (term -> contiguous id) is handed over as is; bm25s
            # must not append its "" token to it.
            bm25.index(
                ([t.tolist() for t in self._tokens], dict(self._vocab_ids)),
                create_empty_token=False,
                show_progress=False,
            )
            self._bm25 = bm25
        self._stale = False

    # ------------------------------------------------------------------ query

    def query(
        self, text: str, k: int = 10, *, node_ids: Collection[str] | None = None
    ) -> list[tuple[str, float]]:
        """At most ``k`` ``(node_id, bm25 score)`` with a positive score, best first.

        ``node_ids`` restricts the candidates (e.g. to chunks allowed by metadata filters).
        """
        if k <= 0 or not self._ids:
            return []
        self._ensure_bm25()
        if self._bm25 is None:
            return []
        term_ids = sorted({self._vocab_ids[t] for t in analyze(text) if t in self._vocab_ids})
        if not term_ids:
            return []
        scores = np.asarray(self._bm25.get_scores_from_ids(term_ids), dtype=np.float32)
        if node_ids is not None:
            allowed = np.zeros(len(self._ids), dtype=bool)
            allowed[[self._rows[i] for i in node_ids if i in self._rows]] = True
            scores = np.where(allowed, scores, np.float32(0.0))
        positive = np.flatnonzero(scores > 0)
        if positive.size > k:
            positive = positive[np.argpartition(scores[positive], -k)[-k:]]
        best = positive[np.argsort(-scores[positive], kind="stable")]
        return [(self._ids[r], float(scores[r])) for r in best.tolist()]

    # ------------------------------------------------------------------ persistence

    def persist(self, persist_path: str | os.PathLike[str]) -> None:
        """Write the index into the folder ``persist_path`` (created if needed)."""
        self._ensure_bm25()
        folder = Path(persist_path)
        folder.mkdir(parents=True, exist_ok=True)
        lengths = np.asarray([len(t) for t in self._tokens], dtype=np.int64)
        offsets = np.zeros(len(self._tokens) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        flat = np.concatenate(self._tokens) if self._tokens else np.zeros(0, np.int32)
        np.save(folder / TOKENS_FILE, flat.astype(np.int32, copy=False))
        np.save(folder / OFFSETS_FILE, offsets)
        if self._bm25 is not None:
            self._bm25.save(str(folder / BM25_DIR), show_progress=False)
        meta = {
            "format": FORMAT_VERSION,
            "count": len(self._ids),
            "ids": self._ids,
            "hashes": self._hashes,
            "vocab": self._vocab,
        }
        # Written last, like the vector store's manifest.
        (folder / KEYWORDS_FILE).write_text(
            json.dumps(meta, ensure_ascii=False, separators=(",", ":")), encoding="utf-8"
        )

    @classmethod
    def load(cls, persist_path: str | os.PathLike[str]) -> Self:
        """Read an index written by ``persist``."""
        folder = Path(persist_path)
        meta = json.loads((folder / KEYWORDS_FILE).read_text(encoding="utf-8"))
        if meta.get("format") != FORMAT_VERSION:
            raise ValueError(f"{folder}: unknown keyword index format {meta.get('format')!r}")
        index = cls()
        index._ids = list(meta["ids"])
        index._hashes = list(meta["hashes"])
        index._vocab = list(meta["vocab"])
        index._vocab_ids = {term: i for i, term in enumerate(index._vocab)}
        index._rows = {node_id: r for r, node_id in enumerate(index._ids)}
        flat = np.load(folder / TOKENS_FILE, allow_pickle=False)
        offsets = np.load(folder / OFFSETS_FILE, allow_pickle=False)
        if len(offsets) != len(index._ids) + 1 or len(index._hashes) != len(index._ids):
            raise ValueError(f"{folder}: keyword index files disagree on the chunk count")
        index._tokens = [flat[offsets[r] : offsets[r + 1]] for r in range(len(index._ids))]
        if index._ids and index._vocab:
            index._bm25 = bm25s.BM25.load(str(folder / BM25_DIR), show_progress=False)
            if index._bm25.scores["num_docs"] != len(index._ids):
                raise ValueError(f"{folder}: BM25 matrix and chunk list disagree")
        index._stale = False
        return index
