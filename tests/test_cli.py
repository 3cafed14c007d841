"""The terminal chat: live rendering and a whole session over the scripted model."""

from __future__ import annotations

import asyncio
import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from config.settings import AppConfig
from engine.cli import TerminalRenderer, chat_loop, settings_table
from engine.engine import ReActEngine
from tests.fakes import ScriptedLLM

RAW = (
    "Thought: I need a tool.\nAction: calculate\n"
    'Action Input: {"expression": "12 * 12"}\nObservation: 144\n'
    "Thought: I can answer.\nAnswer: 144 est le résultat.\nSur deux lignes."
)


def _render(chunks: list[str], show_all: bool) -> str:
    out = io.StringIO()
    renderer = TerminalRenderer(out, show_all=show_all, color=False)
    for chunk in chunks:
        renderer.feed(chunk)
    renderer.close()
    return out.getvalue()


def test_show_all_prints_reasoning_and_answer() -> None:
    text = _render([RAW], show_all=True)
    assert "Action: calculate" in text
    assert "Observation: 144" in text
    assert "» 144 est le résultat.\nSur deux lignes." in text


def test_show_answer_hides_reasoning() -> None:
    text = _render([RAW], show_all=False)
    assert text.strip() == "144 est le résultat.\nSur deux lignes."


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=len(RAW)), max_size=12))
def test_rendering_does_not_depend_on_chunking(cuts: list[int]) -> None:
    points = sorted(set(cuts))
    chunks = [RAW[a:b] for a, b in zip([0, *points], [*points, len(RAW)], strict=True)]
    assert _render(chunks, show_all=True) == _render([RAW], show_all=True)


def test_chat_session_keeps_history_and_exits() -> None:
    llm = ScriptedLLM(
        [
            "Thought: easy.\nAnswer: Bonjour !",
            "Thought: I remember.\nAnswer: Vous avez dit bonjour.",
        ]
    )
    engine = ReActEngine(config=AppConfig(router_top_k=50), llm=llm)
    engine.start(language="fr")
    out = io.StringIO()
    asyncio.run(chat_loop(engine, False, io.StringIO("Salut\nQu'ai-je dit ?\nexit\n"), out))
    assert "Bonjour !" in out.getvalue()
    assert "Vous avez dit bonjour." in out.getvalue()
    second_call = " ".join(m.content or "" for m in llm.calls[1])
    assert "Salut" in second_call and "Bonjour !" in second_call


def test_settings_table_lists_every_setting() -> None:
    table = settings_table()
    for name in AppConfig.model_fields:
        expected = "CHATITEGO_DATA_DIR" if name == "data_dir" else name.upper()
        assert f"`{expected}`" in table


@pytest.mark.parametrize("show_all", [True, False])
def test_empty_stream_renders_nothing_visible(show_all: bool) -> None:
    assert _render([], show_all=show_all).strip() == ""
