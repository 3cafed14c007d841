"""Recognising ReAct marker lines (``Thought:``, ``**Action**:``, ``## Réponse finale``...).

Shared by the stream parser, the agent's output parser and the step shaper so
that all three agree, line for line, on where a block starts. A marker is only
recognised at the start of a line: mid-line words like "the answer: 42" are text.
"""

from __future__ import annotations

import re
from enum import Enum

from engine.types import ReActType

# Longest variants first so that "action input" wins over "action" and
# "final answer" over "answer". Keys are lower-case, accents kept.
_MARKER_WORDS: dict[str, ReActType] = {
    "action input": ReActType.ACTION_INPUT,
    "action_input": ReActType.ACTION_INPUT,
    "action-input": ReActType.ACTION_INPUT,
    "entrée de l'action": ReActType.ACTION_INPUT,
    "entree de l'action": ReActType.ACTION_INPUT,
    "final answer": ReActType.FINAL_ANSWER,
    "final response": ReActType.FINAL_ANSWER,
    "réponse finale": ReActType.FINAL_ANSWER,
    "reponse finale": ReActType.FINAL_ANSWER,
    "tool call": ReActType.TOOL_CALL,
    "tool result": ReActType.TOOL_RESULT,
    "observation": ReActType.OBSERVATION,
    "conclusion": ReActType.CONCLUSION,
    "raisonnement": ReActType.THOUGHT,
    "réflexion": ReActType.THOUGHT,
    "reflexion": ReActType.THOUGHT,
    "response": ReActType.RESPONSE,
    "thought": ReActType.THOUGHT,
    "pensée": ReActType.THOUGHT,
    "pensee": ReActType.THOUGHT,
    "réponse": ReActType.ANSWER,
    "reponse": ReActType.ANSWER,
    "answer": ReActType.ANSWER,
    "action": ReActType.ACTION,
}
_WORDS_PATTERN = "|".join(re.escape(w) for w in sorted(_MARKER_WORDS, key=len, reverse=True))

# Leading decoration real models emit: spaces, markdown headings, bold/italic, quotes.
_LEAD = r"[ \t]*(?P<hashes>#{1,6}[ \t]*)?(?:[*_>]{1,3}[ \t]*)?"
_EMPH = r"(?:\*{1,3}|_{1,3})?"
_COLON_LINE = re.compile(
    rf"^{_LEAD}(?P<word>{_WORDS_PATTERN}){_EMPH}[ \t]*[:：]{_EMPH}[ \t]?(?P<rest>.*)$",
    re.IGNORECASE,
)
# "### Final Answer" alone on a heading line, no colon.
_HEADING_LINE = re.compile(
    rf"^[ \t]*#{{1,6}}[ \t]*{_EMPH}(?P<word>{_WORDS_PATTERN}){_EMPH}[ \t]*$",
    re.IGNORECASE,
)
_FENCE_LINE = re.compile(r"^[ \t]*(```|~~~)[\w+-]*[ \t]*$")

# Protocol markers: they end a closing block (the model went on after answering).
PROTOCOL_TYPES = frozenset(
    {ReActType.THOUGHT, ReActType.ACTION, ReActType.ACTION_INPUT, ReActType.OBSERVATION}
)


def match_marker(line: str) -> tuple[ReActType, str] | None:
    """Return ``(type, rest of line)`` when ``line`` (no newline) starts a block.

    A trailing carriage return (CRLF line ending) is ignored.
    """
    line = line.rstrip("\r")
    m = _COLON_LINE.match(line) or _HEADING_LINE.match(line)
    if m is None:
        return None
    # IGNORECASE also matches look-alikes ("ſ" for "s", "ı" for "i") that are not keys.
    kind = _MARKER_WORDS.get(m.group("word").lower())
    if kind is None:
        return None
    rest = m.groupdict().get("rest") or ""
    return kind, _strip_emphasis(rest).strip()


def _strip_emphasis(rest: str) -> str:
    # "**Thought:** text" leaves "** text" after the colon on some models.
    return re.sub(r"^(?:\*{1,3}|_{1,3})(?=\s|$)", "", rest.lstrip())


def is_fence(line: str) -> bool:
    """True for a markdown code-fence line (```, ```json, ~~~); a trailing CR is ignored."""
    return _FENCE_LINE.match(line.rstrip("\r")) is not None


class PartialLine(Enum):
    """What an incomplete line (no newline yet) can still turn out to be."""

    MARKER = "marker"  # already a complete marker prefix, e.g. "Action:"
    MAYBE = "maybe"  # could still become a marker, e.g. "Act" or "**Obs"
    TEXT = "text"  # can no longer be a marker


def classify_partial_line(partial: str) -> PartialLine:
    """Classify the start of a line whose end has not arrived yet.

    Never says TEXT for a start that a complete line could turn into a marker or
    a fence (callers decide on TEXT before the line ends), nor MARKER for one it
    could turn into text.
    """
    # A trailing "\r" may be the first half of "\r\n": judge the line without it.
    partial = partial.rstrip("\r")
    if match_marker(partial) is not None and _COLON_LINE.match(partial):
        return PartialLine.MARKER
    # No length limit: spaces before the colon ("Thought   :") are unbounded.
    stripped = re.sub(r"^[ \t]*#{0,6}[ \t]*[*_>]{0,3}[ \t]*", "", partial).lower()
    if not stripped:
        return PartialLine.MAYBE
    for word in _MARKER_WORDS:
        if word.startswith(stripped):
            return PartialLine.MAYBE
        if stripped.startswith(word):
            tail = stripped[len(word) :]
            if re.fullmatch(r"(?:\*{1,3}|_{1,3})?[ \t]*", tail):
                return PartialLine.MAYBE
    if re.fullmatch(r"[ \t]*(?:`{1,3}|~{1,3})[\w+-]*[ \t]*", partial):
        return PartialLine.MAYBE  # may still be a code fence line
    return PartialLine.TEXT
