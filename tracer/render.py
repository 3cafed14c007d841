"""Turning ReAct blocks into safe, decorated Markdown for the chat page (no Streamlit here).

Model and document text is never handed to the page as HTML: it is escaped
so that ``<script>``, ``<img onerror=…>`` or a Markdown image pointing to an
external host show as text and are neither executed nor fetched. Decoration
uses Streamlit's own Markdown colour syntax (``:blue[…]``), whose brackets are
escaped in the content too.
"""

from __future__ import annotations

import re
from enum import Enum

from engine.types import ReActBlock, ReActType


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
    text = strip_control(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)


def render_block(block: ReActBlock, language: str = "fr") -> str:
    """A reasoning block as decorated Markdown: coloured label, escaped content."""
    fr, en, colour = _STYLE.get(block.type, _STYLE[ReActType.UNKNOWN])
    label = fr if language == "fr" else en
    body = escape_markdown(block.content).replace("\n", "  \n")
    return f":{colour}[**{label}**] :{colour}[{body}]" if body else f":{colour}[**{label}**]"


_UNSAFE_IMAGE = re.compile(r"!\[([^\]]*)\]\(\s*<?(?:https?:)?//[^)]*\)", re.IGNORECASE)
_HTML_TAG = re.compile(r"<(/?[a-zA-Z][^>]*)>")


def render_answer(text: str) -> str:
    """The final answer as Markdown: formatting kept, HTML and remote images neutralised."""
    clean = strip_control(text)
    # A remote image would be fetched by the browser: show its alt text and URL instead.
    clean = _UNSAFE_IMAGE.sub(lambda m: f"[image: {m.group(1)}]", clean)
    return _HTML_TAG.sub(lambda m: f"&lt;{m.group(1)}&gt;", clean)
