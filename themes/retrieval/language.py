"""Which language a query or a corpus is written in (a stopword vote: enough to tell a French
question from an English one)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

QueryLanguage = Literal["fr", "en"]

# Chunks sampled to estimate which languages a corpus is written in.
LANGUAGE_SAMPLE = 200
# A language counts as present in the corpus above this share of the sampled chunks.
LANGUAGE_MIN_SHARE = 0.05


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
