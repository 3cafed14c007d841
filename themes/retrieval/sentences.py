"""Splitting a chunk into sentences, for contextual compression; joining its wrapped lines."""

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


# Lines that keep their own line: headings, tables, quotes, code fences.
_BLOCK_LINE_RE = re.compile(r"\s*(?:#|\||>|```)")


def unwrap_lines(text: str) -> str:
    """Join the lines a paragraph was wrapped into (PDF text, hard-wrapped Markdown).

    "an unchanged file is\nskipped" reads as two statements to a small model
    (seen: the 1.5B model then answered from the next clause). A line break stays
    where ``split_sentences`` cuts (after a sentence end, a colon, before a list
    item), around headings, tables, quotes and code fences, and before a line that
    starts with a capital unless the line before ends with a comma: lines without
    bullets are often a list ("La segmentation du flux…" / "L'identification…"),
    while a wrapped sentence goes on in lower case.
    """
    lines = text.split("\n")
    joined = [lines[0]]
    in_code = lines[0].lstrip().startswith("```")
    for line in lines[1:]:
        previous = joined[-1]
        if line.lstrip().startswith("```"):
            in_code = not in_code
            joined.append(line)
            continue
        keep_break = (
            in_code
            or not previous.strip()
            or not line.strip()
            or _BLOCK_LINE_RE.match(previous) is not None
            or _BLOCK_LINE_RE.match(line) is not None
            or not (line.lstrip()[:1].islower() or previous.rstrip().endswith(","))
            or _is_boundary(previous, "\n", line.lstrip()[:8])
        )
        if keep_break:
            joined.append(line)
        else:
            joined[-1] = f"{previous.rstrip()} {line.lstrip()}"
    return "\n".join(joined)


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
