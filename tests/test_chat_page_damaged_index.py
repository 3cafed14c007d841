"""Issue 11: the chat page on a theme whose index is damaged says so, never a traceback.

Every damage of ``tests/test_hardening_themes_damage.py`` (a truncated, altered or
missing index file; ``CURRENT`` empty, truncated, garbled or naming a missing
version) is opened in the chat page through Streamlit's AppTest: the page names the
damaged file, says how to repair it, keeps the theme picker, and offers no chat box
(a question could not be answered from a broken index). After ``repair`` the same
session chats again.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from engine import ReActEngine
from tests.test_chat_page import llm, open_page  # noqa: F401 - fixture
from tests.test_hardening_themes_damage import CASES, template  # noqa: F401 - fixture
from tests.test_theme_rag import minilm  # noqa: F401 - fixture
from themes.index_storage import IndexCorrupted
from themes.ingest import repair
from themes.theme import Theme, ThemeRepository
from tracer.render import escape_markdown


@pytest.fixture
def theme(template: Path, _isolated_data_dir: Path) -> Theme:  # noqa: F811
    """Theme "rh" (two documents, one version); the page's model fixture made the folder."""
    shutil.copytree(template, _isolated_data_dir, dirs_exist_ok=True)
    return ThemeRepository(_isolated_data_dir).get("rh")


PURGE = "Thought: Le document le dit.\nAnswer: La pompe P-42 se purge tous les six mois."


def page_text(at: Any) -> str:
    parts = [e.value for e in (*at.error, *at.warning, *at.info, *at.markdown, *at.caption)]
    return "\n".join(str(p) for p in parts)


@pytest.mark.parametrize("case", list(CASES))
def test_a_damaged_index_is_named_with_its_repair_not_a_traceback(
    llm: Any,  # noqa: F811 - the imported fixture
    theme: Theme,
    case: str,
) -> None:
    damage, named = CASES[case]
    damage(theme)
    at = open_page({}, theme="rh")
    assert not at.exception
    [error] = [e.value for e in at.error]
    assert "Les documents du thème « rh » sont endommagés" in error
    assert escape_markdown(named) in error  # Markdown source: the dots are escaped
    assert "python -m themes repair rh" in error and "« Réparer »" in error
    assert "Traceback" not in page_text(at)
    assert not at.chat_input  # no question on a broken index
    assert at.sidebar.selectbox  # the theme and language pickers stay


def test_the_message_is_in_english_too(llm: Any, theme: Theme) -> None:  # noqa: F811
    CASES["truncated vectors/vectors.npy"][0](theme)
    at = open_page({}, theme="rh")
    at.sidebar.selectbox[1].set_value("en").run()
    assert not at.exception
    [error] = [e.value for e in at.error]
    assert "The documents of theme “rh” are damaged" in error
    assert escape_markdown("vectors/vectors.npy") in error
    assert "python -m themes repair rh" in error


def test_after_repair_the_same_session_chats_again(
    llm: Any,  # noqa: F811 - the imported fixture
    theme: Theme,
    minilm: Any,  # noqa: F811
) -> None:
    theme.settings.retrieval.translate_queries = False  # one model call: the answer
    theme.save_settings()
    CASES["CURRENT garbled"][0](theme)
    at = open_page({}, theme="rh")
    assert at.error and not at.chat_input
    repair(theme, minilm)
    llm.enqueue(PURGE)
    at.run()
    assert not at.exception and not at.error
    at.chat_input[0].set_value("Quand purger la pompe P-42 ?").run()
    assert not at.exception
    assert any("tous les six mois" in m.value for m in at.markdown)


def test_engine_start_on_a_damaged_theme_raises_the_typed_error(
    theme: Theme,
    _isolated_data_dir: Path,
) -> None:
    # The library says what is wrong (IndexCorrupted names the file); pages and the
    # terminal chat turn it into a sentence.
    CASES["missing vectors/nodes.jsonl"][0](theme)
    engine = ReActEngine(config={"data_dir": str(_isolated_data_dir)})
    with pytest.raises(IndexCorrupted, match="vectors/nodes.jsonl"):
        engine.start(theme="rh")
    assert engine.theme is None  # a failed start leaves the previous configuration whole
