"""rag_manager.py through Streamlit's AppTest: the login gate, themes, settings, documents,
the retrieval test, busy themes and the review list."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from config.settings import get_config
from manager.auth import hash_password
from manager.operations import ingest_batch
from models.embeddings import LlamaIndexEmbeddingAdapter, load_packaged_minilm
from tests.pdf_fixtures import make_text_pdf
from themes.feedback import FeedbackEntry, FeedbackSource, FeedbackStep, record_feedback
from themes.index_storage import IndexStorage
from themes.theme import ThemeRepository
from tracer.render import escape_markdown

PAGE = str(Path(__file__).resolve().parents[1] / "rag_manager.py")
PASSWORD = "correct horse battery"
PUMP = "La purge de la pompe hydraulique se fait avec la vanne ZK-4491 ouverte dix minutes."
LEAVE = "Les congés payés sont de vingt-cinq jours ouvrés par an pour chaque salarié."


@pytest.fixture(scope="module")
def minilm() -> LlamaIndexEmbeddingAdapter:
    return load_packaged_minilm()


@pytest.fixture(autouse=True)
def _fresh_page_state(
    monkeypatch: pytest.MonkeyPatch, minilm: LlamaIndexEmbeddingAdapter
) -> Iterator[None]:
    import models.app_settings as app_settings

    # The page loads the embedding model through AppSettings: hand it the test's copy.
    monkeypatch.setitem(app_settings._embedding_cache, "model", minilm)
    st.cache_resource.clear()  # the login throttle is process-wide
    yield
    st.cache_resource.clear()


@pytest.fixture
def admin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADMIN_PASSWORD_HASH", hash_password(PASSWORD, n=2**10))
    get_config.cache_clear()


@pytest.fixture
def repo(_isolated_data_dir: Path) -> ThemeRepository:
    return ThemeRepository(_isolated_data_dir)


def new_app() -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=90)
    at.run()
    return at


def logged_in() -> AppTest:
    at = new_app()
    at.text_input[0].input(PASSWORD)
    at.button[0].click()
    at.run()
    assert not at.exception
    return at


def page_titles(at: AppTest) -> list[str]:
    """The titles the page navigation lists (it lists nothing before the login).

    AppTest has no element for ``st.navigation``: this reads the registry of pages the
    last run registered, the one ``AppTest.switch_page`` resolves against.
    """
    return [info["page_name"] for info in at._registered_pages.values() if "url_pathname" in info]


PAGE_TITLES = ["Documents", "Réglages", "Inspecter", "Santé", "Régression", "Avis"]


def open_page(at: AppTest, name: str) -> AppTest:
    """Go to one of the RAG Manager's pages (``name``: its file in ``admin_pages/``)."""
    at.switch_page(f"admin_pages/{name}.py").run()
    assert not at.exception
    return at


def labelled(widgets: Any, label: str) -> Any:
    """The first widget with that label (settings come before the retrieval test)."""
    return next(w for w in widgets if w.label == label)


def texts_of(at: AppTest) -> str:
    parts = [
        e.value
        for kind in ("markdown", "info", "success", "warning", "error", "caption")
        for e in getattr(at, kind)
    ]
    return "\n".join(str(p) for p in parts)


def test_no_admin_configured_explains_how_and_stays_closed(repo: ThemeRepository) -> None:
    repo.create("rh")
    at = new_app()
    assert not at.exception
    assert "Aucun administrateur n'est configuré" in at.warning[0].value
    assert "python -m manager hash-password" in at.code[0].value
    assert "ADMIN_PASSWORD_HASH" in texts_of(at)
    assert page_titles(at) == [] and len(at.text_input) == 0 and len(at.button) == 0
    assert "rh" not in texts_of(at)


def test_login_gate_shows_nothing_else_then_opens(admin: None, repo: ThemeRepository) -> None:
    repo.create("secret-theme")
    at = new_app()
    assert page_titles(at) == []
    assert [w.label for w in at.text_input] == ["Mot de passe"]
    assert [b.label for b in at.button] == ["Se connecter"]
    assert [s.label for s in at.sidebar.selectbox] == ["Langue / Language"]
    assert "secret-theme" not in texts_of(at)

    at.text_input[0].input("wrong password")
    at.button[0].click()
    at.run()
    assert at.error[0].value == "Mot de passe incorrect."
    assert page_titles(at) == []

    at.text_input[0].input(PASSWORD)
    at.button[0].click()
    at.run()
    assert not at.exception and page_titles(at) == PAGE_TITLES
    assert at.sidebar.selectbox(key="theme_select").value == "secret-theme"


def test_english_interface(admin: None) -> None:
    at = new_app()
    at.sidebar.selectbox(key="lang").select("en")
    at.run()
    assert [b.label for b in at.button] == ["Log in"]


def test_repeated_failures_are_throttled(admin: None) -> None:
    at = new_app()
    for _ in range(5):
        at.text_input[0].input("nope")
        at.button[0].click()
        at.run()
    at.text_input[0].input(PASSWORD)
    at.button[0].click()
    at.run()
    assert "attendez" in at.error[0].value and page_titles(at) == []


def test_session_expires_after_inactivity(admin: None) -> None:
    at = logged_in()
    minutes = get_config().admin_session_minutes
    at.session_state["admin"].last_activity = time.time() - minutes * 60 - 5
    at.run()
    assert page_titles(at) == []
    assert "Session expirée" in at.info[0].value
    assert [w.label for w in at.text_input] == ["Mot de passe"]


def test_create_theme_and_refuse_a_bad_name(admin: None, repo: ThemeRepository) -> None:
    at = logged_in()
    assert "Aucun thème" in texts_of(at)
    at.sidebar.text_input(key="new_theme_name").input("Bad Name!")
    at.sidebar.button[0].click()
    at.run()
    assert not at.exception and "Nom de thème refusé" in at.error[0].value
    at.sidebar.text_input(key="new_theme_name").input("maintenance")
    at.sidebar.text_input(key="new_theme_title").input("Maintenance usine")
    at.sidebar.button[0].click()
    at.run()
    assert not at.exception
    assert repo.get("maintenance").settings.title == "Maintenance usine"
    assert "Thème « maintenance » créé." in [s.value for s in at.success]
    assert page_titles(at) == PAGE_TITLES


def test_settings_are_saved(admin: None, repo: ThemeRepository) -> None:
    repo.create("rh")
    at = open_page(logged_in(), "settings")
    labelled(at.main.text_input, "Titre").input("Ressources humaines")
    labelled(at.main.selectbox, "Niveau de détail").select("detailed")
    labelled(at.main.number_input, "Passages gardés").set_value(3)
    labelled(at.main.text_area, "Prompt système (Markdown)").input(
        "# Rôle\nTu réponds aux salariés."
    )
    labelled(at.main.button, "Enregistrer").click()
    at.run()
    assert not at.exception
    saved = repo.get("rh")
    assert saved.settings.title == "Ressources humaines"
    assert saved.settings.detail == "detailed"
    assert saved.settings.retrieval.top_k == 3
    assert saved.system_prompt == "# Rôle\nTu réponds aux salariés."
    assert any("Réglages enregistrés" in s.value for s in at.success)


def test_documents_ingested_by_the_library_are_listed_and_searchable(
    admin: None, repo: ThemeRepository, tmp_path: Path, minilm: LlamaIndexEmbeddingAdapter
) -> None:
    theme = repo.create("maintenance")
    src = tmp_path / "src"
    src.mkdir()
    (src / "notice.pdf").write_bytes(make_text_pdf([PUMP, LEAVE]))
    ingest_batch(theme, [src / "notice.pdf"], minilm)
    at = logged_in()
    table = at.dataframe[0].value
    row = table[table["Nom"] == "notice.pdf"].iloc[0]
    assert row["Pages"] == 2 and row["Passages"] >= 1 and row["Statut"] == "indexé"

    open_page(at, "inspect")
    at.text_input(key="retrieval_question").input("vanne ZK-4491")
    labelled(at.main.button, "Chercher").click()
    at.run()
    assert not at.exception
    ranked = at.dataframe[0].value
    assert list(ranked.columns[:7]) == [
        "Rang",
        "Document",
        "Page",
        "Vecteur",
        "Mots-clés",
        "Fusion",
        "Score final",
    ]
    assert ranked.iloc[0]["Document"] == "notice.pdf" and ranked.iloc[0]["Page"] == "1"
    assert ranked.iloc[0]["Cité comme"] == "[Source 1: notice.pdf, p. 1]"
    assert any("ZK-4491" in c.value for c in at.code)  # the compressed context


def test_upload_through_the_page_shows_statuses(admin: None, repo: ThemeRepository) -> None:
    repo.create("maintenance")
    at = logged_in()
    at.file_uploader[0].set_value(
        [("guide.txt", PUMP.encode(), "text/plain"), ("vide.txt", b"", "text/plain")]
    )
    at.run()
    at.button(key="ingest").click()
    at.run()
    assert not at.exception
    statuses = at.dataframe[0].value
    assert dict(zip(statuses["Fichier"], statuses["Statut"], strict=True)) == {
        "guide.txt": "ingéré",
        "vide.txt": "refusé",
    }
    assert statuses[statuses["Fichier"] == "vide.txt"].iloc[0]["Raison"]
    assert repo.get("maintenance").load_data().vectors.count() >= 1


def test_busy_theme_gives_a_clear_message(
    admin: None, repo: ThemeRepository, tmp_path: Path, minilm: LlamaIndexEmbeddingAdapter
) -> None:
    theme = repo.create("rh")
    (theme.documents_dir / "a.txt").write_text(LEAVE, encoding="utf-8")
    at = logged_in()
    with IndexStorage(theme.directory).writer():
        at.button(key="sync_docs").click()
        at.run()
    assert not at.exception
    # Messages are shown as text: Markdown-escaped in the element's source.
    assert escape_markdown(
        "Un autre administrateur met à jour ce thème, réessayez dans un instant."
    ) in [e.value for e in at.error]
    assert theme.load_data().vectors.count() == 0


def test_review_list_shows_feedback_and_opens_chunks(
    admin: None, repo: ThemeRepository, tmp_path: Path, minilm: LlamaIndexEmbeddingAdapter
) -> None:
    theme = repo.create("rh")
    (tmp_path / "conges.txt").write_text(LEAVE, encoding="utf-8")
    ingest_batch(theme, [tmp_path / "conges.txt"], minilm)
    chunk_id = theme.load_data().vectors.document_node_ids("conges.txt")[0]
    record_feedback(
        theme.directory,
        FeedbackEntry(
            rating=-1,
            question="Combien de congés ?",
            answer="<script>alert(1)</script> 25 jours",
            sources=[FeedbackSource(file="conges.txt", chunk_id=chunk_id)],
            reasoning=[FeedbackStep(type="thought", content="Je cherche <b>les congés</b>")],
        ),
    )
    at = open_page(logged_in(), "review")
    assert "Combien de congés ?" in [t.value for t in at.text]
    shown = texts_of(at)
    assert "<script>" not in shown and "&lt;script>" in shown
    at.toggle(key=f"open_{_only_feedback_id(theme.directory)}").set_value(True)
    at.run()
    assert LEAVE in [t.value for t in at.text]


def _only_feedback_id(theme_dir: Path) -> str:
    from themes.feedback import list_feedback

    [entry] = list_feedback(theme_dir)
    return entry.id
