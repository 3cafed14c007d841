"""KeywordIndex: BM25 with French and English stemming, accent folding and stopwords."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from themes.keyword_index import KeywordIndex, ReadOnlyIndexError, analyze, fold

CHUNKS = [
    ("fr-proc", "La procédure de remboursement des frais de déplacement."),
    ("fr-secu", "Règles de sécurité informatique : mot de passe et réseau."),
    ("fr-conges", "Les congés payés sont posés dans l'outil RH."),
    ("en-run", "How to run the nightly build on the CI server."),
    ("en-policy", "Our travel policy covers trains and hotels."),
    ("en-invoice", "Send every invoice to the accounting team."),
    ("noise-1", "Le menu de la cantine change chaque semaine."),
    ("noise-2", "The parking lot is closed on Sundays."),
]


@pytest.fixture
def index() -> KeywordIndex:
    idx = KeywordIndex()
    idx.build(CHUNKS)
    return idx


def top(idx: KeywordIndex, text: str, k: int = 3) -> list[str]:
    return [node_id for node_id, _ in idx.query(text, k)]


def test_fold_strips_accents_and_case() -> None:
    assert fold("Procédure ÉTÉ Œuvre Ça") == "procedure ete oeuvre ca"


def test_analyze_indexes_french_and_english_stems_without_stopwords() -> None:
    terms = analyze("Les procédures de sécurité, running the tests")
    assert "procedur" in terms and "securit" in terms
    assert "run" in terms  # English stem of "running"
    for stopword in ("les", "de", "the"):
        assert stopword not in terms
    assert analyze("le la les the of and") == []


def test_french_plural_finds_singular(index: KeywordIndex) -> None:
    assert top(index, "procédures")[0] == "fr-proc"
    assert top(index, "remboursements")[0] == "fr-proc"


def test_english_inflections_find_the_base_form(index: KeywordIndex) -> None:
    assert top(index, "running")[0] == "en-run"
    assert top(index, "policies")[0] == "en-policy"
    assert top(index, "invoices")[0] == "en-invoice"


def test_accents_are_optional_on_both_sides(index: KeywordIndex) -> None:
    assert top(index, "securite")[0] == "fr-secu"
    assert top(index, "SÉCURITÉ")[0] == "fr-secu"
    assert top(index, "conges payes")[0] == "fr-conges"
    idx = KeywordIndex()
    idx.build([("plain", "la procedure est simple"), ("other", "autre chose")])
    assert top(idx, "procédure")[0] == "plain"


def test_results_are_positive_sorted_and_capped(index: KeywordIndex) -> None:
    hits = index.query("procédure sécurité congés", k=2)
    assert len(hits) == 2
    assert hits[0][1] >= hits[1][1] > 0
    assert index.query("zzz inconnu", 5) == []
    assert index.query("the and of", 5) == []  # stopwords only
    assert index.query("procédure", 0) == []
    assert {node_id for node_id, _ in index.query("procédure sécurité congés", 50)} == {
        "fr-proc",
        "fr-secu",
        "fr-conges",
    }


def test_node_ids_restrict_the_candidates(index: KeywordIndex) -> None:
    assert index.query("procédure sécurité", 5, node_ids={"fr-secu"})[0][0] == "fr-secu"
    assert index.query("procédure", 5, node_ids={"en-run", "unknown"}) == []


def test_add_replace_delete_and_sync(index: KeywordIndex) -> None:
    index.add([("new", "Procédure d'astreinte du week-end")])
    assert set(top(index, "astreinte")) == {"new"}
    index.add([("new", "Nothing about that any more")])
    assert top(index, "astreinte") == []
    assert index.delete(["new", "unknown"]) == 1
    assert index.count() == len(CHUNKS) and "new" not in index

    assert index.sync(CHUNKS) is False
    changed = [*CHUNKS[1:], ("fr-proc", "Tout autre sujet : la cafétéria")]
    assert index.sync(changed) is True
    assert "fr-proc" not in top(index, "procédure")
    assert top(index, "cafeteria") == ["fr-proc"]
    assert index.sync(CHUNKS[:2]) is True
    assert sorted(index.node_ids()) == ["fr-proc", "fr-secu"]


def test_persist_and_load_round_trip(index: KeywordIndex, tmp_path: Path) -> None:
    index.delete(["noise-1"])
    index.persist(tmp_path)
    loaded = KeywordIndex.load(tmp_path)
    assert loaded.node_ids() == index.node_ids()
    for query in ("procédures", "running", "securite", "policies travel hotel"):
        got, expected = loaded.query(query, 5), index.query(query, 5)
        assert [i for i, _ in got] == [i for i, _ in expected] != []
        assert [s for _, s in got] == pytest.approx([s for _, s in expected])
    # A loaded index keeps its tokens, so it can be updated without the original texts.
    loaded.add([("x", "Procédure spéciale")])
    assert "x" in top(loaded, "procédure", 5)
    assert "fr-proc" in top(loaded, "procédure", 5)


def test_empty_index_round_trip(tmp_path: Path) -> None:
    empty = KeywordIndex()
    assert empty.query("anything", 5) == []
    empty.persist(tmp_path)
    loaded = KeywordIndex.load(tmp_path)
    assert loaded.count() == 0 and loaded.query("anything", 5) == []
    loaded.build([("a", "le la les")])  # a chunk with no indexable word
    assert loaded.query("le", 5) == []


def test_frozen_index_refuses_mutation_but_answers_from_many_threads(
    index: KeywordIndex,
) -> None:
    index.add([("late", "ajout tardif")])  # leaves the BM25 matrix to be rebuilt lazily
    index.freeze()
    for mutate in (
        lambda: index.add([("y", "text")]),
        lambda: index.delete(["fr-proc"]),
        lambda: index.build([]),
        lambda: index.sync([]),
    ):
        with pytest.raises(ReadOnlyIndexError):
            mutate()
    results: list[list[str]] = []

    def worker() -> None:
        for _ in range(20):
            results.append(top(index, "procédure tardif", 2))

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 80
    assert all(sorted(r) == ["fr-proc", "late"] for r in results)
