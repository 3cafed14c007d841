"""ToolRouter: routed top-k by embedding similarity, plus the always-on tools."""

from __future__ import annotations

import pytest
from llama_index.core.tools import BaseTool

from engine.router import ToolRouter
from engine.tools.general import ALWAYS_ON_GENERAL_TOOLS, GeneralToolKit
from engine.tools.registry import tool_from_function
from models.embeddings import LlamaIndexEmbeddingAdapter, load_packaged_minilm


@pytest.fixture(scope="module")
def minilm() -> LlamaIndexEmbeddingAdapter:
    return load_packaged_minilm()


def _names(tools: list[BaseTool]) -> list[str]:
    return [t.metadata.get_name() for t in tools]


def test_date_question_routes_to_date_tools(minilm: LlamaIndexEmbeddingAdapter) -> None:
    router = ToolRouter(
        GeneralToolKit().tools(), minilm, top_k=2, always_on=ALWAYS_ON_GENERAL_TOOLS
    )
    chosen = _names(router.select("What date will it be in three weeks from today?"))
    assert set(ALWAYS_ON_GENERAL_TOOLS) <= set(chosen)
    assert len(chosen) == 2 + len(ALWAYS_ON_GENERAL_TOOLS)
    assert {"date_add", "now"} & set(chosen), chosen


def test_word_question_routes_to_text_tools(minilm: LlamaIndexEmbeddingAdapter) -> None:
    router = ToolRouter(
        GeneralToolKit().tools(), minilm, top_k=2, always_on=ALWAYS_ON_GENERAL_TOOLS
    )
    chosen = _names(router.select("How many words are in this sentence: the cat sat down"))
    assert "word_count" in chosen, chosen
    assert "date_diff" not in chosen


def test_no_routing_when_tools_fit_in_top_k() -> None:
    tools = GeneralToolKit().tools()
    router = ToolRouter(tools, None, top_k=len(tools))
    assert not router.routes
    assert _names(router.select("anything")) == _names(tools)


def test_routing_without_embedding_model_is_refused() -> None:
    with pytest.raises(ValueError, match="embedding model"):
        ToolRouter(GeneralToolKit().tools(), None, top_k=1)


def test_duplicate_tool_names_are_refused() -> None:
    def ping(text: str) -> str:
        """Echo the text."""
        return text

    with pytest.raises(ValueError, match="duplicate"):
        ToolRouter([tool_from_function(ping), tool_from_function(ping)], None, top_k=5)
