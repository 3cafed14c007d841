"""Theme settings that change the engine: enabled tools and LLM extraction of passages."""

from __future__ import annotations

from pathlib import Path

import pytest

from config.settings import AppConfig
from engine import ReActEngine, StopReason
from models.embeddings import LlamaIndexEmbeddingAdapter, load_packaged_minilm
from tests.fakes import ScriptedLLM
from themes.ingest import ingest_files
from themes.theme import Theme, ThemeRepository


@pytest.fixture(scope="module")
def minilm() -> LlamaIndexEmbeddingAdapter:
    return load_packaged_minilm()


@pytest.fixture
def theme(tmp_path: Path, minilm: LlamaIndexEmbeddingAdapter) -> Theme:
    doc = tmp_path / "pompes.md"
    doc.write_text(
        "# Pompes\n\nLe joint torique de la pompe P-42 se remplace avec une clé de 17.\n\n"
        "La cantine ouvre à midi.\n",
        encoding="utf-8",
    )
    theme = ThemeRepository(tmp_path / "data").create("maintenance", title="Maintenance")
    ingest_files(theme, [doc], minilm)
    theme.settings.retrieval.search_first = False  # the scripts below search themselves
    theme.save_settings()
    return theme


def _engine(theme: Theme, llm: ScriptedLLM, minilm: LlamaIndexEmbeddingAdapter) -> ReActEngine:
    engine = ReActEngine(config=AppConfig(router_top_k=50), llm=llm, embed_model=minilm)
    engine.start(theme=theme, language="fr")
    engine.set_history([])
    return engine


def test_enabled_tools_limit_the_general_tools(
    theme: Theme, minilm: LlamaIndexEmbeddingAdapter
) -> None:
    theme.settings.enabled_tools = ["calculate"]
    theme.save_settings()
    llm = ScriptedLLM(["Thought: ok.\nAnswer: oui"])
    engine = _engine(ThemeRepository(theme.directory.parent.parent).get("maintenance"), llm, minilm)
    engine.get_engine_response("Combien font 2 + 2 ?")
    system = llm.calls[0][0].content or ""
    assert "Tool Name: calculate" in system
    assert "Tool Name: search_documents" in system  # the theme's RAG tool is never removed
    assert "Tool Name: date_add" not in system
    assert "Tool Name: word_count" not in system


def test_llm_extraction_replaces_the_passages_in_the_observation(
    theme: Theme, minilm: LlamaIndexEmbeddingAdapter
) -> None:
    theme.settings.retrieval.llm_extraction = True
    theme.save_settings()
    llm = ScriptedLLM(
        [
            'Thought: je cherche.\nAction: search_documents\nAction Input: {"query": "joint P-42"}',
            "EXTRAIT : une clé de 17 pour le joint de la P-42 [Source 1]",
            "Thought: trouvé.\nAnswer: Avec une clé de 17 [Source 1].",
        ]
    )
    engine = _engine(ThemeRepository(theme.directory.parent.parent).get("maintenance"), llm, minilm)
    answer = engine.get_engine_response("Avec quelle clé remplacer le joint de la P-42 ?")
    outcome = engine.last_outcome
    assert outcome is not None and outcome.stop_reason is StopReason.ANSWERED
    assert answer == "Avec une clé de 17 [Source 1]."
    extraction_prompt = " ".join(m.content or "" for m in llm.calls[1])
    assert "copy only the sentences" in extraction_prompt
    assert "[End of source 1]" in extraction_prompt  # the extractor read the passages
    observation = " ".join(m.content or "" for m in llm.calls[2])
    assert "EXTRAIT : une clé de 17 pour le joint de la P-42 [Source 1]" in observation
    assert "[End of source 1]" not in observation  # the extraction replaced the passages
    assert outcome.sources and outcome.sources[0].file == "pompes.md"
