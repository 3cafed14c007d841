"""Answer benchmark scoring: the shipped eval set, fact matching and the eval-set validator."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from bench.answer_eval import (
    DEFAULT_EVAL_SET,
    THEME_CORPORA,
    EvalQuestion,
    cites_expected,
    fact_present,
    facts_score,
    is_correct,
    load_eval_set,
    normalise,
)

EVAL_SET = load_eval_set()
DOCUMENT_QUESTIONS = [q for q in EVAL_SET if q.kind == "document"]


def _question(facts: list[list[str]], cite: list[str] | None = None) -> EvalQuestion:
    return EvalQuestion(
        id="q",
        theme="demo" if cite else None,
        lang="en",
        kind="document" if cite else "general",
        question="?",
        facts=tuple(tuple(fact) for fact in facts),
        cite=None if cite is None else tuple(cite),
    )


# --- The shipped eval set ----------------------------------------------------


def test_shipped_eval_set_sizes() -> None:
    assert DEFAULT_EVAL_SET.name == "questions.jsonl"
    assert len(DOCUMENT_QUESTIONS) >= 44
    assert len(EVAL_SET) - len(DOCUMENT_QUESTIONS) >= 8
    per_theme = Counter((q.theme, q.lang) for q in DOCUMENT_QUESTIONS)
    assert per_theme[("demo", "fr")] >= 7 and per_theme[("demo", "en")] >= 7
    assert per_theme[("conception", "fr")] >= 20 and per_theme[("conception", "en")] >= 5
    kinds = Counter(q.kind for q in EVAL_SET)
    assert kinds["calculator"] >= 3 and kinds["date"] >= 2 and kinds["general"] >= 2


def test_shipped_ids_are_unique() -> None:
    ids = [q.id for q in EVAL_SET]
    assert len(ids) == len(set(ids))


def test_mandatory_questions_from_the_bug_report() -> None:
    by_text = {q.question: q for q in EVAL_SET}
    create = by_text["Comment créer un nouveau thème ?"]
    assert create.theme == "demo"
    assert is_correct("Avec le RAG Manager ou en ligne de commande (python -m themes).", create)
    formats = by_text["Quels formats de documents puis-je importer ?"]
    assert formats.theme == "demo"
    assert {fact[0] for fact in formats.facts} >= {"PDF", "DOCX", "HTML", "Markdown"}
    percent = by_text["Combien font 15 % de 2 340 € ?"]
    assert percent.kind == "calculator" and percent.facts == (("351",),)


def _corpus_text(theme: str, name: str) -> str:
    return (THEME_CORPORA[theme] / name).read_text(encoding="utf-8")


@pytest.mark.parametrize("question", DOCUMENT_QUESTIONS, ids=lambda q: q.id)
def test_every_cited_file_exists(question: EvalQuestion) -> None:
    assert question.theme is not None and question.cite is not None
    for name in question.cite:
        assert (THEME_CORPORA[question.theme] / name).is_file(), name


@pytest.mark.parametrize("question", DOCUMENT_QUESTIONS, ids=lambda q: q.id)
def test_every_fact_is_stated_in_a_cited_file(question: EvalQuestion) -> None:
    # Catches typos in facts: the documents themselves must pass the check.
    assert question.theme is not None and question.cite is not None
    texts = [_corpus_text(question.theme, name) for name in question.cite]
    for fact in question.facts:
        assert any(fact_present(text, fact) for text in texts), fact


@pytest.mark.parametrize("question", EVAL_SET, ids=lambda q: q.id)
def test_no_fact_is_given_away_by_the_question(question: EvalQuestion) -> None:
    # An answer that only repeats the question must not score.
    assert facts_score(question.question, question) == 0.0


def test_conception_questions_cover_every_corpus_file() -> None:
    cited = {name for q in DOCUMENT_QUESTIONS if q.theme == "conception" for name in q.cite or ()}
    files = {path.name for path in THEME_CORPORA["conception"].glob("*.md")}
    assert files and files <= cited


# --- normalise ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("2 340 €", "2340 €"),
        ("2\u00a0340\u202f€", "2340 €"),
        ("2,340", "2340"),
        ("2.340", "2340"),
        ("1 234 567", "1234567"),
        ("351,00", "351.00"),
        ("2 340,50 €", "2340.50 €"),
        ("0.823", "0.823"),
        ("1,5", "1.5"),
        ("2025", "2025"),
        ("6 mars 2025", "6 mars 2025"),
        ("Élève  À\tl\u2019école", "eleve a l'ecole"),
        ("\u201cRome\u201d", '"rome"'),
        ("USB\u2011C", "usb-c"),
    ],
)
def test_normalise(raw: str, expected: str) -> None:
    assert normalise(raw) == expected


# --- fact_present -----------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "alternatives", "expected"),
    [
        ("15 % de 2 340 € font 351 €.", ["351"], True),
        ("Le résultat est 351,00 €", ["351"], True),
        ("Result: 351.0", ["351"], True),
        ("Result: 351.5", ["351"], False),
        ("Result: 1351", ["351"], False),
        ("Le produit vaut 1\u202f517.", ["1517"], True),
        ("It is 1,517.", ["1517"], True),
        ("There are 60 days.", ["60"], True),
        ("There are 600 days.", ["60"], False),
        ("There are 160 days.", ["60"], False),
        ("score 0,50", ["0.5"], True),
        ("score 10.5", ["0.5"], False),
        ("Formats: PDF, DOCX.", ["PDF"], True),
        ("Formats (PDF)", ["pdf"], True),
        ("PDFs only", ["PDF"], False),
        ("les fichiers, pages et scores", ["fichier"], True),
        ("les fichiers, pages et scores", ["page"], True),
        ("a pager", ["page"], False),
        ("Le fichier est refusé.", ["refusé"], True),
        ("Le fichier est REFUSE.", ["refusé"], True),
        ("Type FINAL_ANSWER only", ["ANSWER"], False),
        ("la méthode take_step()", ["take_step"], True),
        ("Utilisez le RAG\u00a0Manager", ["RAG Manager"], True),
        ("Le 6 mars 2025", ["2025-03-06", "6 mars 2025"], True),
        ("Rome", [], False),
    ],
)
def test_fact_present(answer: str, alternatives: list[str], expected: bool) -> None:
    assert fact_present(answer, alternatives) is expected


def test_facts_score_and_is_correct() -> None:
    question = _question([["PDF"], ["DOCX"], ["texte", "text"]])
    assert facts_score("PDF and DOCX", question) == pytest.approx(2 / 3)
    assert not is_correct("PDF and DOCX", question)
    assert is_correct("PDF, DOCX and plain text", question)
    assert facts_score("nothing", question) == 0.0


def test_cites_expected() -> None:
    question = _question([["x"]], cite=["user-guide.md", "guide-utilisateur.md"])
    assert cites_expected(["themes/demo/User-Guide.md"], question)
    assert cites_expected(["other.md", "C:\\docs\\guide-utilisateur.md"], question)
    assert not cites_expected(["other.md"], question)
    assert not cites_expected([], question)
    assert not cites_expected(["user-guide.md"], _question([["x"]]))


# --- The validator ------------------------------------------------------------

GOOD = {
    "id": "demo-fr-formats",
    "theme": "demo",
    "lang": "fr",
    "kind": "document",
    "question": "Quels formats ?",
    "facts": [["PDF"]],
    "cite": ["user-guide.md"],
}
TOOL = {**GOOD, "id": "calc", "theme": None, "kind": "calculator", "cite": None}


def _write(tmp_path: Path, rows: list[object]) -> Path:
    path = tmp_path / "questions.jsonl"
    lines = [row if isinstance(row, str) else json.dumps(row) for row in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_validator_accepts_good_lines(tmp_path: Path) -> None:
    questions = load_eval_set(_write(tmp_path, [GOOD, "", TOOL]))
    assert [q.id for q in questions] == ["demo-fr-formats", "calc"]
    assert questions[0].facts == (("PDF",),) and questions[0].cite == ("user-guide.md",)
    assert questions[1].cite is None


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("{not json", "invalid JSON"),
        ('["a list"]', "JSON object"),
        ({**GOOD, "extra": 1}, "unknown key"),
        ({k: v for k, v in GOOD.items() if k != "facts"}, "missing key"),
        ({**GOOD, "facts": []}, "facts"),
        ({**GOOD, "facts": [[]]}, "each fact"),
        ({**GOOD, "facts": [["  "]]}, "each fact"),
        ({**GOOD, "facts": "PDF"}, "facts"),
        ({**GOOD, "kind": "quiz"}, "kind"),
        ({**GOOD, "lang": "de"}, "lang"),
        ({**GOOD, "cite": None}, "cite"),
        ({**GOOD, "cite": []}, "cite"),
        ({**TOOL, "cite": ["user-guide.md"]}, "cite must be null"),
        ({**GOOD, "theme": None}, "theme"),
        ({**TOOL, "theme": "demo"}, "theme must be null"),
        ({**GOOD, "id": ""}, "id"),
        ({**GOOD, "question": 3}, "question"),
        ({**GOOD, "id": "calc"}, "duplicate id"),
    ],
)
def test_validator_names_the_bad_line(tmp_path: Path, bad: object, message: str) -> None:
    path = _write(tmp_path, [TOOL, "", bad])
    with pytest.raises(ValueError, match=message) as caught:
        load_eval_set(path)
    assert "line 3" in str(caught.value)


def test_validator_rejects_an_empty_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no questions"):
        load_eval_set(_write(tmp_path, [""]))
