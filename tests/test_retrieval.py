"""HybridRetriever over small synthetic corpora, with the real (English-only) MiniLM model.

Each corpus is a dict ``node_id -> (file name, page, text)`` written through a theme's
storage writer the way ingestion publishes a theme's index, on both backends (embedded
files, PostgreSQL + pgvector). What is checked:
BM25 finds exact rare words the vectors miss, vectors find paraphrases BM25
cannot, the fusion and re-ranking scores, compression (one embedding batch),
French questions over English documents through the translator, and that a
retriever never returns another theme's chunks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from llama_index.core.schema import QueryBundle, TextNode
from llama_index.core.vector_stores.types import VectorStoreQuery

from models.embeddings import LlamaIndexEmbeddingAdapter, load_packaged_minilm
from tests.backends import BACKENDS, Backend, open_backend
from themes.index_storage import IndexStorage, IndexVersion
from themes.retrieval import (
    RRF_K,
    HybridRetriever,
    clean_translation,
    detect_language,
    split_sentences,
    unwrap_lines,
    with_announced,
)
from themes.theme import RetrievalSettings, ThemeRepository

Corpus = Mapping[str, tuple[str, int | None, str]]

# An HR / IT / facilities corpus, in English.
OFFICE: Corpus = {
    "remote": (
        "hr-policy.pdf",
        3,
        "Remote work policy. Employees may work from home up to two days per week. "
        "Fire drills are organised by the safety officer. "
        "Parking spaces are assigned by seniority.",
    ),
    "leave": (
        "hr-policy.pdf",
        4,
        "Paid leave. Every employee receives twenty-five days of paid vacation per year.",
    ),
    "wedding": (
        "hr-policy.pdf",
        5,
        "Family events. Employees get four days of special leave for their own wedding.",
    ),
    "security": (
        "it-guide.pdf",
        3,
        "Passwords must be changed every ninety days and must contain at least twelve characters.",
    ),
    "vpn": (
        "it-guide.pdf",
        2,
        "Connecting to the VPN. Install the client, then sign in with your employee number.",
    ),
    "expenses": (
        "finance.pdf",
        1,
        "Travel expenses are reimbursed within thirty days when receipts are attached.",
    ),
}

# Near-identical badges: the vectors cannot tell ZK-4491 from ZK-4419, BM25 can.
BADGES: Corpus = {
    "b1": ("badges.pdf", 1, "Badge ZK-4419 opens the server room in the basement."),
    "b2": ("badges.pdf", 1, "Badge ZK-4941 opens the archive room in the basement."),
    "b3": ("badges.pdf", 2, "Badge ZK-4149 opens the archive room on the first floor."),
    "b4": ("badges.pdf", 2, "Badge ZK-9414 opens the meeting rooms of the basement."),
    "garage": ("badges.pdf", 3, "The delivery garage is reserved for holders of the ZK-4491 pass."),
    "security": OFFICE["security"],
}

FRENCH_TO_ENGLISH = {
    "Combien de jours de congé pour mon mariage ?": "How many days of leave for my wedding?",
}


@pytest.fixture(scope="module")
def minilm() -> LlamaIndexEmbeddingAdapter:
    model = load_packaged_minilm()
    model.get_text_embedding("warm-up")  # the first inference is slow: not in a test's time
    return model


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    server = request.getfixturevalue("postgres_server") if request.param == "postgres" else None
    with open_backend(request.param, server) as chosen:
        yield chosen


def corpus_nodes(corpus: Corpus, embed_model: LlamaIndexEmbeddingAdapter) -> list[TextNode]:
    ids = list(corpus)
    vectors = embed_model.get_text_embedding_batch([corpus[i][2] for i in ids])
    return [
        TextNode(
            id_=node_id,
            text=corpus[node_id][2],
            metadata={"file_name": corpus[node_id][0], "page": corpus[node_id][1]},
            embedding=vector,
        )
        for node_id, vector in zip(ids, vectors, strict=True)
    ]


def build_theme_version(
    backend: Backend,
    directory: Path,
    corpus: Corpus,
    embed_model: LlamaIndexEmbeddingAdapter,
) -> IndexVersion:
    """Publish ``corpus`` as a new theme's index on ``backend`` and load it back (read-only)."""
    theme = ThemeRepository(directory.parent, backend.store).create(directory.name)
    with theme.storage.writer() as writer:
        writer.vectors.add(corpus_nodes(corpus, embed_model))
    return theme.load_data()


def build_version(
    directory: Path, corpus: Corpus, embed_model: LlamaIndexEmbeddingAdapter
) -> IndexVersion:
    """Publish ``corpus`` as the embedded index in ``directory`` (a theme's folder or a bare
    one) and load it back (read-only); for tests of the engine on a folder theme."""
    directory.mkdir(parents=True, exist_ok=True)  # the writer wants an existing theme folder
    storage = IndexStorage(directory)
    with storage.writer() as writer:
        writer.vectors.add(corpus_nodes(corpus, embed_model))
    return storage.load_current()


@pytest.fixture(scope="module")
def office(tmp_path_factory: pytest.TempPathFactory, minilm: Any, backend: Backend) -> IndexVersion:
    return build_theme_version(backend, tmp_path_factory.mktemp("data") / "office", OFFICE, minilm)


@pytest.fixture(scope="module")
def badges(tmp_path_factory: pytest.TempPathFactory, minilm: Any, backend: Backend) -> IndexVersion:
    return build_theme_version(backend, tmp_path_factory.mktemp("data") / "badges", BADGES, minilm)


@pytest.fixture
def embed_calls(minilm: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[list[str]]]:
    """Every batch the embedding backend receives, in order."""
    calls: list[list[str]] = []
    real = minilm.wrapper.embed_batch

    def spy(texts: list[str]) -> list[list[float]]:
        calls.append(list(texts))
        return real(texts)

    monkeypatch.setattr(minilm.wrapper, "embed_batch", spy)
    yield calls


def retriever(version: IndexVersion, minilm: Any, **settings: Any) -> HybridRetriever:
    values: dict[str, Any] = {"wide_k": 10, "top_k": 3, "compression": False}
    values.update(settings)
    translator = values.pop("translator", None)
    return HybridRetriever(version, minilm, RetrievalSettings(**values), translator=translator)


def ids(result: Any) -> list[str]:
    return [item.node_id for item in result.items]


# --- hybrid search ------------------------------------------------------------------------


def test_a_rare_identifier_is_found_by_keywords_where_vectors_miss_it(
    badges: IndexVersion, minilm: Any
) -> None:
    query = "badge ZK-4491"
    vector_only = badges.vectors.query(
        VectorStoreQuery(query_embedding=minilm.get_query_embedding(query), similarity_top_k=6)
    ).ids
    assert vector_only is not None
    # The English model sees "a badge opening something": the garage is only fifth.
    assert vector_only.index("garage") >= 3
    result = retriever(badges, minilm).retrieve(query)
    assert ids(result)[0] == "garage"
    garage = result.items[0]
    assert garage.keyword_score > 0
    assert garage.keyword_score == max(item.keyword_score for item in result.items)


def test_a_paraphrase_is_found_by_vectors_without_any_shared_word(
    office: IndexVersion, minilm: Any
) -> None:
    query = "How often should the secret login code be renewed?"
    assert office.keywords.query(query, 10) == []  # no word in common with any chunk
    result = retriever(office, minilm).retrieve(query)
    assert ids(result)[0] == "security"
    assert result.items[0].keyword_score == 0.0
    assert result.items[0].vector_score > 0.5


def test_fusion_is_reciprocal_rank_and_rerank_blends_cosine(
    office: IndexVersion, minilm: Any
) -> None:
    # No keyword match: the vector list is the only ranking, so each chunk's fused
    # score is exactly 1 / (k + its vector rank).
    query = "How often should the secret login code be renewed?"
    result = retriever(office, minilm, top_k=len(OFFICE)).retrieve(query)
    assert len(result.items) == len(OFFICE)
    by_cosine = sorted(result.items, key=lambda item: -item.vector_score)
    for position, item in enumerate(by_cosine, start=1):
        assert item.fused_score == pytest.approx(1.0 / (RRF_K + position))
    best_fused = max(item.fused_score for item in result.items)
    for item in result.items:
        expected = 0.5 * item.vector_score + 0.5 * item.fused_score / best_fused
        assert item.rerank_score == pytest.approx(expected)
    assert [item.rank for item in result.items] == list(range(1, len(OFFICE) + 1))
    scores = [item.rerank_score for item in result.items]
    assert scores == sorted(scores, reverse=True)


def test_agreement_of_keywords_and_vectors_wins_the_fusion(
    office: IndexVersion, minilm: Any
) -> None:
    result = retriever(office, minilm).retrieve("How many days per week can I work from home?")
    first = result.items[0]
    assert first.node_id == "remote"
    assert first.keyword_score > 0
    # First in the vector list, the BM25 list and the rare-word list.
    assert first.fused_score == pytest.approx(3.0 / (RRF_K + 1))
    assert all(item.fused_score < first.fused_score for item in result.items[1:])


# --- compression ----------------------------------------------------------------------------


def test_compression_keeps_the_relevant_sentence_in_one_embedding_batch(
    office: IndexVersion, minilm: Any, embed_calls: list[list[str]]
) -> None:
    rag = retriever(office, minilm, compression=True, top_k=2)  # default threshold, 0.25
    result = rag.retrieve("How many days per week can I work from home?")
    remote = result.items[0]
    assert remote.node_id == "remote"
    assert remote.text == OFFICE["remote"][2]  # the full chunk is kept beside the short one
    # The heading and the answer stay, in their order; the two unrelated sentences go.
    assert remote.compressed_text == (
        "Remote work policy. Employees may work from home up to two days per week. […]"
    )
    # One call for the query, ONE for every sentence of the kept multi-sentence chunks.
    assert len(embed_calls) == 2
    assert embed_calls[0] == ["How many days per week can I work from home?"]
    expected = [
        OFFICE[item.node_id][2][a:b]
        for item in result.items
        if len(split_sentences(OFFICE[item.node_id][2])) > 1
        for a, b in split_sentences(OFFICE[item.node_id][2])
    ]
    assert embed_calls[1] == expected
    assert len(expected) >= 4


def test_compression_always_keeps_the_best_sentence_of_each_chunk(
    office: IndexVersion, minilm: Any
) -> None:
    # A threshold above 1 drops everything but each chunk's best sentence.
    rag = retriever(office, minilm, compression=True, compression_threshold=1.0, top_k=3)
    result = rag.retrieve("Where are the parking spaces assigned?")
    remote = next(item for item in result.items if item.node_id == "remote")
    assert remote.compressed_text == "[…] Parking spaces are assigned by seniority."
    assert all(item.compressed_text.strip(" […]") for item in result.items)


def test_compression_keeps_what_a_kept_sentence_announces_with_a_colon() -> None:
    text = (
        "The generator is never closed.\n\nIt can cause the error:\n\n"
        "OSError: [Errno 24] Too many open files\n\nWhy reset() closes nothing."
    )
    spans = split_sentences(text)
    assert len(spans) == 4
    keep = with_announced(text, spans, [False, True, False, False])
    assert keep == [False, True, True, False]
    # The announced line itself ends with no colon: nothing more is added.
    assert with_announced(text, spans, [False, False, True, False]) == [False, False, True, False]
    listed = (
        "Key settings:\nragkwargs must contain at least:\n- theme\n- detail\n- language\n\nEnd."
    )
    spans = split_sentences(listed)
    assert len(spans) == 6
    assert with_announced(listed, spans, [False, True, False, False, False, False]) == [
        False,
        True,
        True,
        True,
        True,
        False,
    ]
    # The block a colon announces comes with its lines, not only its list items; prose
    # after a blank line does not.
    layers = (
        "It rests on two layers:\n\nFactory\n- Installs the models.\n"
        "Wrapper Normalisation of the backend:\n- Unifies the backends.\n\nThe result is kept."
    )
    spans = split_sentences(layers)
    assert len(spans) == 6
    assert with_announced(layers, spans, [True, False, False, False, False, False]) == [
        *[True] * 5,
        False,
    ]


def test_without_compression_the_chunks_are_whole(office: IndexVersion, minilm: Any) -> None:
    result = retriever(office, minilm).retrieve("How many days per week can I work from home?")
    assert all(item.compressed_text == item.text for item in result.items)


def test_the_passages_shown_join_wrapped_lines(tmp_path: Path, minilm: Any) -> None:
    wrapped = {
        "guide": (
            "guide.md",
            None,
            "## Updating documents\nA modified file is re-indexed, an unchanged file is\n"
            "skipped, and a deleted file leaves the index.",
        )
    }
    version = build_version(tmp_path / "guide", wrapped, minilm)
    for compression in (False, True):
        result = retriever(version, minilm, compression=compression).retrieve(
            "What happens to an unchanged file?"
        )
        shown = result.items[0].compressed_text
        assert "an unchanged file is skipped, and a deleted file" in shown
        assert shown.startswith("## Updating documents\n")


# --- query translation ------------------------------------------------------------------------


def test_a_french_question_over_english_documents_needs_the_translation(
    office: IndexVersion, minilm: Any
) -> None:
    question = "Combien de jours de congé pour mon mariage ?"
    asked: list[str] = []

    def translator(text: str) -> str | None:
        asked.append(text)
        return FRENCH_TO_ENGLISH.get(text)

    with_translation = retriever(office, minilm, translator=translator).retrieve(question)
    assert with_translation.variants == (question, FRENCH_TO_ENGLISH[question])
    assert ids(with_translation)[0] == "wedding"
    assert with_translation.items[0].vector_score > 0.5
    assert with_translation.items[0].keyword_score > 0  # the English words match BM25 too
    # The English-only model barely relates the French question to the English chunk.
    alone = retriever(office, minilm, top_k=len(OFFICE)).retrieve(question)
    assert alone.variants == (question,)
    wedding = next(item for item in alone.items if item.node_id == "wedding")
    assert wedding.vector_score < 0.3
    assert asked == [question]


def test_translation_only_when_the_languages_differ(office: IndexVersion, minilm: Any) -> None:
    asked: list[str] = []

    def translator(text: str) -> str | None:
        asked.append(text)
        return "unused"

    rag = retriever(office, minilm, translator=translator)
    assert rag.corpus_languages == {"en"}
    assert rag.query_variants("How many days of leave for my wedding?") == (
        "How many days of leave for my wedding?",
    )
    assert rag.query_variants("VPN") == ("VPN",)  # no language evidence: nothing to translate
    assert asked == []
    off = retriever(office, minilm, translator=translator, translate_queries=False)
    assert off.query_variants("Combien de jours de congé ?") == ("Combien de jours de congé ?",)
    assert asked == []


def test_a_failing_translator_only_loses_the_variant(office: IndexVersion, minilm: Any) -> None:
    calls = 0

    def broken(text: str) -> str | None:
        nonlocal calls
        calls += 1
        raise ConnectionError("model unreachable")

    rag = retriever(office, minilm, translator=broken)
    result = rag.retrieve("Combien de jours de congé pour mon mariage ?")
    assert result.variants == ("Combien de jours de congé pour mon mariage ?",)
    assert result.items  # still a result, from the original query
    rag.retrieve("Combien de jours de congé pour mon mariage ?")
    assert calls == 2  # failures are not cached: the next question tries again


def test_translations_are_cached(office: IndexVersion, minilm: Any) -> None:
    asked: list[str] = []

    def translator(text: str) -> str | None:
        asked.append(text)
        return '"How many days of leave for my wedding?"\nNote: literal translation.'

    rag = retriever(office, minilm, translator=translator)
    question = "Combien de jours de congé pour mon mariage ?"
    first = rag.query_variants(question)
    assert rag.query_variants(question) == first
    assert first[1] == "How many days of leave for my wedding?"  # first line, no quotes
    assert asked == [question]


# --- scope, empty index, llama-index interface -----------------------------------------------


def test_a_retriever_never_returns_another_themes_chunks(
    office: IndexVersion, badges: IndexVersion, minilm: Any
) -> None:
    # "security" exists in both themes with the same text; ids are compared per theme.
    office_rag = retriever(office, minilm, top_k=10)
    badge_rag = retriever(badges, minilm, top_k=10)
    for query in ("badge ZK-4491 garage", "How many days per week can I work from home?"):
        assert set(ids(office_rag.retrieve(query))) <= set(OFFICE)
        assert set(ids(badge_rag.retrieve(query))) <= set(BADGES)
    assert "garage" not in ids(office_rag.retrieve("badge ZK-4491 garage"))
    assert "remote" not in ids(badge_rag.retrieve("work from home two days per week"))


def test_an_empty_index_gives_an_empty_result(
    tmp_path: Path, minilm: Any, backend: Backend
) -> None:
    empty = ThemeRepository(tmp_path, backend.store).create("empty").load_data()
    result = retriever(empty, minilm).retrieve("anything at all")
    assert result.items == []
    assert len(result) == 0
    assert result.context_text() == ""
    assert retriever(empty, minilm).retrieve("   ").variants == ()


async def test_it_is_a_llama_index_retriever(office: IndexVersion, minilm: Any) -> None:
    rag = retriever(office, minilm, compression=True, compression_threshold=0.5)
    nodes = await rag.aretrieve("How many days per week can I work from home?")
    assert nodes[0].node.node_id == "remote"
    assert "Fire drills" not in nodes[0].node.get_content()  # the compressed text
    assert nodes[0].node.metadata["file_name"] == "hr-policy.pdf"
    same = await asyncio.to_thread(
        rag.retrieve, QueryBundle("How many days per week can I work from home?")
    )
    assert [n.node.node_id for n in same] == [n.node.node_id for n in nodes]
    assert nodes[0].score == pytest.approx(same.items[0].rerank_score)


def test_context_text_numbers_and_delimits_the_sources(office: IndexVersion, minilm: Any) -> None:
    result = retriever(office, minilm, top_k=2).retrieve("Passwords and VPN client")
    text = result.context_text()
    first, second = result.items
    assert text.startswith(f"[Source 1: {first.file_name}, p. {first.page}]\n{first.text}\n")
    assert "[End of source 1]\n\n[Source 2: " in text
    assert text.endswith(f"{second.text}\n[End of source 2]")
    assert result.context_text(escape=str.upper).count("[SOURCE") == 0  # escape: text only


# --- helpers ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "sentences"),
    [
        ("One. Two! Three?", ["One.", "Two!", "Three?"]),
        (
            "See p. 3 for details, e.g. the table. Next one.",
            ["See p. 3 for details, e.g. the table.", "Next one."],
        ),
        (
            "Remote work\nwrapped line of text.\n1. First item\n2. Second",
            ["Remote work\nwrapped line of text.", "1. First item", "2. Second"],
        ),
        ("  Title:\nbody text  \n\nNew paragraph", ["Title:", "body text", "New paragraph"]),
        ("", []),
        ("   \n ", []),
    ],
)
def test_split_sentences(text: str, sentences: list[str]) -> None:
    assert [text[a:b] for a, b in split_sentences(text)] == sentences


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        # A hard-wrapped paragraph reads as one: "is / skipped" was read as two clauses.
        (
            "A modified file is re-indexed, an unchanged file is\nskipped, and a deleted "
            "file leaves the index.\nNext sentence.",
            "A modified file is re-indexed, an unchanged file is skipped, and a deleted "
            "file leaves the index.\nNext sentence.",
        ),
        # A wrapped list item joins its own continuation, not the next item.
        (
            "Expose :\n- has_final_answer() tells whether a final answer block is\n  there\n"
            "- get_final_answer()",
            "Expose :\n- has_final_answer() tells whether a final answer block is there\n"
            "- get_final_answer()",
        ),
        # Headings, short labels, tables and code keep their lines.
        (
            "## Adding or updating documents that is a long heading\nBody text here.",
            "## Adding or updating documents that is a long heading\nBody text here.",
        ),
        ("ReActEngine v1\nNe conserve aucun état.", None),
        # Lines without bullets that each start with a capital are a list.
        ("La segmentation du flux brut en blocs ReActBlock\nL'identification du type", None),
        (
            "Accepted formats are PDF, DOCX, HTML,\nMarkdown and plain text.",
            "Accepted formats are PDF, DOCX, HTML, Markdown and plain text.",
        ),
        ("| a long table cell without an end | b |\n| c | d |", None),
        ("```\nfactory = ModelLoaderFactory() with a long line\nembedding = x\n```", None),
        ("Paragraph one ends here and is long enough\n\nParagraph two", None),
    ],
)
def test_unwrap_lines_joins_wrapped_lines_only(text: str, shown: str | None) -> None:
    assert unwrap_lines(text) == (text if shown is None else shown)


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("Quelle est la politique de télétravail ?", "fr"),
        ("What is the remote work policy?", "en"),
        ("congés", "fr"),
        ("VPN ZK-4491", None),
    ],
)
def test_detect_language(text: str, language: str | None) -> None:
    assert detect_language(text) == language


def test_clean_translation() -> None:
    assert clean_translation('\n  Translation: "Remote work"  \nmore') == "Remote work"
    assert clean_translation("   ") is None
    assert clean_translation(None) is None
