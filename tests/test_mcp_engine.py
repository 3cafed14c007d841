"""MCP tools inside a turn: routing, the live intent, a server killed mid-turn.

The model is scripted (``ScriptedLocalLLM`` for the compact profile, whose
intent classifier answers from ``side_script``); the MCP servers are real
processes over stdio.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine import ReActEngine, ReActType, StopReason
from engine.intent import Intent, intent_messages, plausible
from engine.tools.mcp import MCP_TOOLS
from tests.fakes import ScriptedLLM, ScriptedLocalLLM
from tests.test_engine_corpus import corpus_config
from tests.test_theme_rag import make_theme, minilm  # noqa: F401 - fixture
from themes.mcp_config import McpServerConfig
from themes.theme import Theme

QUESTION = "Quelle est la température de la presse 2 ?"
ATELIER = McpServerConfig(
    name="atelier", command="python -m demo_mcp.atelier", allowed_tools=("etat_machine",)
)


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    MCP_TOOLS.clear()
    yield
    MCP_TOOLS.clear()


def theme_with(data_dir: Path, embed: Any, *servers: McpServerConfig) -> Theme:
    theme = make_theme(data_dir, embed, search_first=True)
    theme.settings.mcp_servers = list(servers)
    theme.save_settings()
    return theme


def engine_with(llm: Any, embed: Any, **config: Any) -> ReActEngine:
    # The tool timeout leaves room for spawning a stdio server on a busy CPU.
    values = {"tool_timeout_s": 20.0, **config}
    return ReActEngine(config=corpus_config(**values), llm=llm, embed_model=embed)


async def consume(engine: ReActEngine, prompt: str) -> str:
    return "".join([delta async for delta in engine.stream(prompt)])


def test_the_live_class_exists_only_with_live_tools() -> None:
    summaries = ["etat_machine: Température, état et production d'une machine"]
    with_live = intent_messages(QUESTION, summaries)
    assert "live - " in (with_live[0].content or "") and "etat_machine" in (
        with_live[0].content or ""
    )
    assert "live" not in (intent_messages(QUESTION)[0].content or "")
    assert plausible(Intent.LIVE, QUESTION, live=False) is Intent.OTHER
    assert plausible(Intent.LIVE, QUESTION, live=True) is Intent.LIVE


async def test_a_live_data_question_goes_to_the_mcp_tool_not_the_documents(
    _isolated_data_dir: Path,
    minilm: Any,  # noqa: F811 - fixture
) -> None:
    llm = ScriptedLocalLLM(
        [
            'Thought: live data.\nAction: etat_machine\nAction Input: {"machine": "presse 2"}',
            "Answer: La presse 2 est à 74 °C.",
        ],
        side_script=["live"],
    )
    engine = engine_with(llm, minilm)
    engine.start(theme_with(_isolated_data_dir, minilm, ATELIER))
    await consume(engine, QUESTION)
    outcome = engine.last_outcome
    assert outcome is not None and outcome.stop_reason is StopReason.ANSWERED
    assert outcome.route == "live"
    assert [c.name for c in outcome.tool_calls] == ["etat_machine"]
    assert "presse 2" in outcome.tool_calls[0].output and "°C" in outcome.tool_calls[0].output
    # The classifier saw the tool's short description; the step got the MCP tool only.
    assert "etat_machine" in str(llm.side_calls[0][0].content)
    grammar = llm.call_kwargs[0]["grammar"]
    assert '"etat_machine"' in grammar and '"search_documents"' not in grammar
    system = llm.calls[0][0].content or ""
    assert "- etat_machine: Température" in system


async def test_the_router_offers_the_mcp_tool_for_a_live_question(
    _isolated_data_dir: Path,
    minilm: Any,  # noqa: F811 - fixture
) -> None:
    engine = engine_with(ScriptedLLM([]), minilm, router_top_k=2, prompt_profile="full")
    engine.start(theme_with(_isolated_data_dir, minilm, ATELIER))
    live = await engine._live_tools()
    chosen = [t.metadata.get_name() for t in engine._router_with(live).select(QUESTION)]
    assert "etat_machine" in chosen
    assert "etat_machine" not in [t.metadata.get_name() for t in engine._router.tools]


async def test_a_server_killed_mid_turn_ends_with_a_forced_answer_in_time(
    _isolated_data_dir: Path,
    minilm: Any,  # noqa: F811 - fixture
) -> None:
    faulty = McpServerConfig(
        name="faulty",
        command="python -m tests.mcp_faulty_server",
        allowed_tools=("crash",),
        timeout_s=6.0,
    )
    llm = ScriptedLocalLLM(
        [
            "Thought: read it.\nAction: crash\nAction Input: {}",
            "Thought: again.\nAction: crash\nAction Input: {}",
            "Answer: Les données en direct sont indisponibles, réessayez dans une minute.",
        ],
        side_script=["live"],
    )
    engine = engine_with(llm, minilm)
    engine.start(theme_with(_isolated_data_dir, minilm, faulty))
    started = time.monotonic()
    text = await consume(engine, QUESTION)
    outcome = engine.last_outcome
    assert time.monotonic() - started < 2 * 6.0 + 8.0
    assert outcome is not None and outcome.stop_reason is StopReason.FORCED_FINAL
    assert [c.is_error for c in outcome.tool_calls] == [True, True]
    assert "faulty" in outcome.tool_calls[0].output
    assert "try again in a minute" in outcome.tool_calls[1].output
    assert "indisponibles" in outcome.answer and "indisponibles" in text


async def test_a_theme_whose_server_is_down_still_answers_from_its_documents(
    _isolated_data_dir: Path,
    minilm: Any,  # noqa: F811 - fixture
) -> None:
    absent = McpServerConfig(name="absent", command="no-such-mcp", allowed_tools=("x",))
    llm = ScriptedLocalLLM(["Answer: From the handbook."], side_script=["other"])
    engine = engine_with(llm, minilm)
    engine.start(theme_with(_isolated_data_dir, minilm, absent))
    await consume(engine, "How many vacation days?")
    outcome = engine.last_outcome
    assert outcome is not None and outcome.stop_reason is StopReason.ANSWERED
    assert outcome.route == "documents"
    # The user is told (the panel's first Thought), and the model read it too.
    note = "The live-data server 'absent' is unavailable (its command was not found)"
    thoughts = [b.content for b in outcome.blocks if b.type is ReActType.THOUGHT]
    assert thoughts and thoughts[0].startswith(note), thoughts
    assert any(note in str(m.content) for m in llm.calls[-1]), "the model was not told"
