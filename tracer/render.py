"""Turning ReAct blocks into safe, decorated Markdown for the chat page (no Streamlit here).

Model and document text is never handed to the page as HTML: it is escaped
so that ``<script>``, ``<img onerror=…>`` or a Markdown image pointing to an
external host show as text and are neither executed nor fetched. Decoration
uses Streamlit's own Markdown colour syntax (``:blue[…]``), whose brackets are
escaped in the content too.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from enum import Enum
from typing import Any

from markdown_it import MarkdownIt

from engine.types import ReActBlock, ReActType

logger = logging.getLogger(__name__)


class DisplayMode(str, Enum):
    """What the reasoning panel shows."""

    EVERYTHING = "everything"
    HIDE_THOUGHTS = "hide_thoughts"
    TOOL_CALLS_ONLY = "tool_calls_only"
    ANSWER_ONLY = "answer_only"


_TOOL_TYPES = frozenset(
    {
        ReActType.ACTION,
        ReActType.ACTION_INPUT,
        ReActType.OBSERVATION,
        ReActType.TOOL_CALL,
        ReActType.TOOL_RESULT,
    }
)

# Per type: (label FR, label EN, Streamlit colour).
_STYLE: dict[ReActType, tuple[str, str, str]] = {
    ReActType.THOUGHT: ("Pensée", "Thought", "gray"),
    ReActType.ACTION: ("Action", "Action", "blue"),
    ReActType.ACTION_INPUT: ("Arguments", "Action Input", "blue"),
    ReActType.OBSERVATION: ("Observation", "Observation", "green"),
    ReActType.TOOL_CALL: ("Appel d'outil", "Tool call", "blue"),
    ReActType.TOOL_RESULT: ("Résultat d'outil", "Tool result", "green"),
    ReActType.UNKNOWN: ("…", "…", "gray"),
}

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u202a-\u202e\u2066-\u2069]")
_WORD_JOINER = "\u2060"
_AUTOLINK_TRIGGER = re.compile(r":/|www\.|@", re.IGNORECASE)
# Characters that Markdown (and Streamlit's extensions) give a meaning to.
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~:$])")


def is_visible(kind: ReActType, mode: DisplayMode) -> bool:
    """Whether a block of ``kind`` is shown in the reasoning panel under ``mode``."""
    if kind.is_closing or mode is DisplayMode.ANSWER_ONLY:
        return False  # the answer has its own place, outside the panel
    if mode is DisplayMode.EVERYTHING:
        return True
    if mode is DisplayMode.HIDE_THOUGHTS:
        return kind is not ReActType.THOUGHT
    return kind in _TOOL_TYPES


def strip_control(text: str) -> str:
    """Remove control and bidirectional-override characters."""
    return _CONTROL.sub("", text)


def escape_markdown(text: str) -> str:
    """Text shown literally by a Markdown renderer: no HTML, no links, no images."""
    text = strip_control(text)
    # GFM links bare URLs, www. names and e-mails in the text itself, escapes or not
    # (seen: "?theme=![x](http://h/p.png)" gave a working link in the error box, issue 11
    # finding 8): an invisible word joiner breaks each of them.
    text = _AUTOLINK_TRIGGER.sub(lambda m: m.group(0)[:-1] + _WORD_JOINER + m.group(0)[-1], text)
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)


def plain_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """Fields to put in a Markdown sentence, strings escaped: a theme name from the URL,
    a file name or an error must show as text, never as a link or an image."""
    return {
        k: v if isinstance(v, (int, float)) else escape_markdown(str(v)) for k, v in fields.items()
    }


def readable_arguments(text: str) -> str:
    """An Action Input with its JSON escapes resolved: small models write "\\u00e9" for "é"."""
    try:
        value = json.loads(text)
    except ValueError:
        return text
    if not isinstance(value, dict):
        return text
    return json.dumps(value, ensure_ascii=False)


def render_block(block: ReActBlock, language: str = "fr") -> str:
    """A reasoning block as decorated Markdown: coloured label, escaped content."""
    fr, en, colour = _STYLE.get(block.type, _STYLE[ReActType.UNKNOWN])
    label = fr if language == "fr" else en
    content = block.content
    if block.type is ReActType.ACTION_INPUT:
        content = readable_arguments(content)
    body = escape_markdown(content).replace("\n", "  \n")
    return f":{colour}[**{label}**] :{colour}[{body}]" if body else f":{colour}[**{label}**]"


# ``![`` not preceded by an escaping backslash (an odd run of backslashes escapes the ``!``).
_IMAGE_START = re.compile(r"(\\*)!\[")
# ``<`` opening a tag, a comment, a declaration or a processing instruction.
_TAG_START = re.compile(r"(\\*)<(?=[A-Za-z/!?])")
# Plain text (an emoji may have no glyph): "[image]", escaped so it never links.
_IMAGE_MARK = "\\[image\\] ["
_ACTIVE_TOKENS = frozenset({"image", "html_inline", "html_block"})
_CODE_TOKENS = frozenset({"fence", "code_block"})
_PARSER = MarkdownIt("commonmark").enable(["table", "strikethrough"])


def _unless_escaped(replacement: str) -> Callable[[re.Match[str]], str]:
    def replace(match: re.Match[str]) -> str:
        backslashes = match.group(1)
        return match.group(0) if len(backslashes) % 2 else backslashes + replacement

    return replace


def _neutralise(text: str) -> str:
    # An image becomes a plain link (the user may click it; the browser fetches nothing)
    # and a tag becomes text; whatever the alt holds (nested brackets, entities, a
    # reference label), no "![" is left for any Markdown parser to start an image with.
    text = _IMAGE_START.sub(_unless_escaped(_IMAGE_MARK), text)
    return _TAG_START.sub(_unless_escaped("&lt;"), text)


def _code_block_lines(text: str) -> set[int]:
    """Lines inside fenced or indented code blocks (shown literally, left untouched)."""
    lines: set[int] = set()
    for token in _PARSER.parse(text):
        if token.type in _CODE_TOKENS and token.map is not None:
            lines.update(range(*token.map))
    return lines


def _active_tokens(text: str) -> list[str]:
    """Token types of ``text`` that a browser would fetch or run (images, raw HTML)."""
    found: list[str] = []
    stack = list(_PARSER.parse(text))
    while stack:
        token = stack.pop()
        if token.type in _ACTIVE_TOKENS:
            found.append(token.type)
        stack.extend(token.children or ())
    return found


def render_answer(text: str) -> str:
    """The final answer as Markdown: formatting kept, HTML and remote images neutralised.

    Invariant (checked by parsing the result with markdown-it, a CommonMark parser like
    the browser's): the result holds no image and no raw HTML; if it ever did, the whole
    answer is shown as plain text instead.
    """
    clean = strip_control(text)
    code = _code_block_lines(clean)
    lines = clean.splitlines(keepends=True)
    safe = "".join(line if i in code else _neutralise(line) for i, line in enumerate(lines))
    active = _active_tokens(safe)
    if active:
        logger.warning("answer still held %s after neutralising: shown as text", active)
        return escape_markdown(clean)
    return safe
