"""Splitting a chunk into sentences, for contextual compression."""

from __future__ import annotations

import re

_WS_RE = re.compile(r"\s+")
_SENTENCE_END = frozenset(".!?…")
_LINE_END = frozenset(".!?…:;")
CLOSERS = "\"'»”’)]"
LIST_ITEM_RE = re.compile(r"(?:[-•*▪–]|\d{1,3}[.)])\s")
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
    stripped = unit.rstrip(CLOSERS)
    last = stripped[-1:] if stripped else ""
    if newlines >= 2:
        return True
    if newlines == 1:
        return last in _LINE_END or LIST_ITEM_RE.match(after) is not None
    if last not in _SENTENCE_END or after[0].islower():
        return False
    return not (_TOO_SHORT_RE.fullmatch(unit.strip()) or _INITIAL_RE.search(stripped))


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------
