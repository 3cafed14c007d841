"""Safe rendering of ReAct blocks and answers, and the display modes."""

from __future__ import annotations

import pytest

from engine.types import ReActBlock, ReActType
from tracer.render import (
    DisplayMode,
    escape_markdown,
    is_visible,
    render_answer,
    render_block,
)

T = ReActType

PAYLOADS = [
    "<script>alert(1)</script>",
    '<img src=x onerror="alert(1)">',
    "![pixel](https://tracker.example/p.png)",
    "[click](javascript:alert(1))",
]


@pytest.mark.parametrize("payload", PAYLOADS)
def test_block_content_is_shown_as_text(payload: str) -> None:
    rendered = render_block(ReActBlock(T.OBSERVATION, payload), "en")
    assert "<script" not in rendered and "<img" not in rendered
    assert "](" not in rendered  # no link or image syntax survives
    assert rendered.startswith(":green[**Observation**]")


def test_escaping_keeps_every_character_visible() -> None:
    text = "a*b_c [d](e) <f> #g :h $i & j"
    escaped = escape_markdown(text)
    unescaped = escaped.replace("\\", "").replace("&lt;", "<").replace("&gt;", ">")
    assert unescaped.replace("&amp;", "&") == text


@pytest.mark.parametrize("payload", PAYLOADS[:3])
def test_answer_keeps_markdown_but_not_html_or_remote_images(payload: str) -> None:
    rendered = render_answer(f"**Réponse** : 42\n\n{payload}")
    assert rendered.startswith("**Réponse** : 42")
    assert "<script" not in rendered and "<img" not in rendered
    assert "https://tracker.example" not in rendered.split("[image:")[0]
    assert "![" not in rendered


def test_control_and_bidi_characters_are_stripped() -> None:
    assert render_answer("a\x00b\u202ec\x1bd") == "abcd"


@pytest.mark.parametrize(
    ("mode", "visible"),
    [
        (DisplayMode.EVERYTHING, {T.THOUGHT, T.ACTION, T.ACTION_INPUT, T.OBSERVATION}),
        (DisplayMode.HIDE_THOUGHTS, {T.ACTION, T.ACTION_INPUT, T.OBSERVATION}),
        (DisplayMode.TOOL_CALLS_ONLY, {T.ACTION, T.ACTION_INPUT, T.OBSERVATION}),
        (DisplayMode.ANSWER_ONLY, set()),
    ],
)
def test_display_modes(mode: DisplayMode, visible: set[ReActType]) -> None:
    kinds = [T.THOUGHT, T.ACTION, T.ACTION_INPUT, T.OBSERVATION, T.ANSWER, T.FINAL_ANSWER]
    assert {k for k in kinds if is_visible(k, mode)} == visible


def test_labels_follow_the_language() -> None:
    assert "**Pensée**" in render_block(ReActBlock(T.THOUGHT, "x"), "fr")
    assert "**Thought**" in render_block(ReActBlock(T.THOUGHT, "x"), "en")
