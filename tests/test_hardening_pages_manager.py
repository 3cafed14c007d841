"""Issue 11, the RAG Manager (AppTest, real MiniLM): findings 3, 4 and 6, the traversal
table through the forms and uploads, payloads shown as text, secrets kept out.

The real-browser counterparts are in tests/e2e/test_hardening_manager_browser.py.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from config.settings import get_config
from manager.auth import hash_password
from manager.operations import ingest_batch
from tests.e2e.payloads import payloads
from tests.test_hardening_pages_chat import files_under, live_tokens
from tests.test_manager_page import (  # noqa: F401 - fixtures
    PAGE_TITLES,
    PASSWORD,
    _fresh_page_state,
    admin,
    logged_in,
    minilm,
    new_app,
    open_page,
    page_titles,
    repo,
)
from themes.feedback import FeedbackEntry, FeedbackSource, record_feedback
from themes.theme import ThemeRepository

TRACKER = "http://127.0.0.1:9"  # never contacted: these tests read the page's Markdown


def every_markdown(at: AppTest) -> list[str]:
    """Every piece of the page that Streamlit renders as Markdown, labels included."""
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption]
    alerts = ("error", "warning", "info", "success")
    parts += [getattr(e, "value", "") for k in alerts for e in at.get(k)]
    parts += [e.label for e in at.expander] + [t.value for t in at.title]
    widgets = ("text_input", "checkbox", "toggle")
    parts += [getattr(w, "label", "") for k in widgets for w in at.get(k)]
    return [str(p) for p in parts]


PAGE_FILES = ("documents", "settings", "inspect", "health", "regression", "review")


def every_page(at: AppTest) -> Iterator[AppTest]:
    """The app on each of the RAG Manager's pages in turn (what its tabs showed at once)."""
    for name in PAGE_FILES:
        yield open_page(at, name)


def create_theme(at: AppTest, name: str, title: str = "") -> AppTest:
    at.sidebar.text_input(key="new_theme_name").input(name)
    at.sidebar.text_input(key="new_theme_title").input(title)
    next(b for b in at.sidebar.button if b.label == "Créer").click()
    return at.run()


# --- finding 3 -----------------------------------------------------------------------------
def test_creating_a_second_theme_selects_it(admin: None, repo: ThemeRepository) -> None:  # noqa: F811
    # Issue 11 finding 3: with a theme already there, creating one raised
    # StreamlitAPIException (theme_select set after its selectbox was drawn); the theme
    # was written but the page showed the error box.
    at = create_theme(logged_in(), "maintenance", "Maintenance usine")
    assert not at.exception
    at = create_theme(at, "qualite", "Qualité")
    assert not at.exception and not at.error
    assert repo.names() == ["maintenance", "qualite"]
    assert at.sidebar.selectbox(key="theme_select").value == "qualite"
    assert "Thème « qualite » créé." in [s.value for s in at.success]
    assert page_titles(at) == PAGE_TITLES
    at = create_theme(at, "securite")  # and a third
    assert not at.exception and at.sidebar.selectbox(key="theme_select").value == "securite"


# --- finding 6 -----------------------------------------------------------------------------
def test_logging_out_without_an_identity_provider(admin: None, repo: ThemeRepository) -> None:  # noqa: F811
    # Issue 11 finding 6: AttributeError: st.user has no attribute "is_logged_in".
    repo.create("rh")
    at = logged_in()
    assert page_titles(at) == PAGE_TITLES
    at.sidebar.button(key="logout").click()
    at.run()
    assert not at.exception and not at.error
    assert page_titles(at) == [] and [w.label for w in at.text_input] == ["Mot de passe"]


# --- inputs: the traversal table through the form ------------------------------------------
THEME_NAMES = {
    "dot_dot": "../x",
    "encoded_dot_dot": "..%2Fx",
    "absolute": "/etc/x",
    "windows_absolute": "C:\\x",
    "device_upper": "CON",
    "nul_byte": "a\x00b",
    "newline": "a\nb",
    "rtl_override": "\u202eab",
    "three_hundred_chars": "a" * 300,
    "markdown_image": f"![x]({TRACKER}/p.png)",
    "script": "<script>alert(1)</script>",
}


@pytest.mark.parametrize("name", list(THEME_NAMES.values()), ids=list(THEME_NAMES))
def test_theme_names_of_the_traversal_table_are_refused_with_a_message(
    admin: None,  # noqa: F811
    repo: ThemeRepository,  # noqa: F811
    name: str,
    _isolated_data_dir: Path,
) -> None:
    at = logged_in()
    before = files_under(_isolated_data_dir.parent)
    at = create_theme(at, name)
    assert not at.exception
    assert any("Nom de thème refusé" in e.value for e in at.error)
    for part in every_markdown(at):
        assert live_tokens(part) == [], part
    assert repo.names() == [] and files_under(_isolated_data_dir.parent) == before


@pytest.mark.parametrize("title", list(payloads(TRACKER).values()), ids=list(payloads(TRACKER)))
def test_theme_titles_with_payloads_are_shown_as_text(
    admin: None,  # noqa: F811
    repo: ThemeRepository,  # noqa: F811
    title: str,
) -> None:
    at = create_theme(logged_in(), "piege", title)
    assert not at.exception
    assert repo.get("piege").settings.title  # kept as typed (stripped), shown as text
    for page in every_page(at):
        for part in every_markdown(page):
            assert live_tokens(part) == [], part


# --- inputs: upload file names --------------------------------------------------------------
UPLOAD_NAMES = {
    "dot_dot": ("../../evil.txt", "evil.txt"),
    "encoded_dot_dot": ("..%2F..%2Fevil.txt", "%2F..%2Fevil.txt"),  # no hidden file
    "absolute": ("/etc/cron.d/evil.txt", "evil.txt"),
    "windows_absolute": ("C:\\Windows\\evil.txt", "evil.txt"),
    "device": ("CON.txt", "_CON.txt"),
    "newline": ("ev\nil.txt", "evil.txt"),
    "rtl_override": ("fac\u202etxt.exe.txt", "factxt.exe.txt"),
    "three_hundred_chars": ("a" * 300 + ".txt", "a" * 116 + ".txt"),
}


@pytest.mark.parametrize(
    ("uploaded", "stored"), list(UPLOAD_NAMES.values()), ids=list(UPLOAD_NAMES)
)
def test_upload_names_of_the_traversal_table_stay_in_the_theme_folder(
    admin: None,  # noqa: F811
    repo: ThemeRepository,  # noqa: F811
    uploaded: str,
    stored: str,
    _isolated_data_dir: Path,
) -> None:
    theme = repo.create("maintenance")
    outside = files_under(_isolated_data_dir.parent) - files_under(_isolated_data_dir)
    at = logged_in()
    at.file_uploader[0].set_value([(uploaded, b"La vanne se purge dix minutes.", "text/plain")])
    at.run()
    at.button(key="ingest").click()
    at.run()
    assert not at.exception
    statuses = at.dataframe[0].value
    assert list(statuses["Fichier"]) == [stored] and list(statuses["Statut"]) == ["ingéré"]
    assert [p.name for p in theme.documents_dir.iterdir()] == [stored]
    # Nothing written outside the data folder.
    assert files_under(_isolated_data_dir.parent) - files_under(_isolated_data_dir) == outside
    if stored != uploaded:  # the admin is told, the names shown as text
        notice = [i.value for i in at.info if "est enregistré sous le nom" in i.value]
        assert notice and live_tokens(notice[0]) == []


@pytest.mark.parametrize(
    "uploaded", ["ev\x00il.txt", "..", "evil.exe"], ids=["nul_byte", "dot_dot", "exe"]
)
def test_streamlit_refuses_some_upload_names_before_the_page_runs(
    admin: None,  # noqa: F811
    repo: ThemeRepository,  # noqa: F811
    uploaded: str,
    _isolated_data_dir: Path,
) -> None:
    # A browser cannot send these (no such file on disk; the picker filters the types):
    # only a forged upload can, and Streamlit refuses it while reading the widget, before
    # the page's code runs. Nothing is written.
    theme = repo.create("maintenance")
    at = logged_in()
    before = files_under(_isolated_data_dir.parent)
    at.file_uploader[0].set_value([(uploaded, b"x", "text/plain")])
    at.run()
    # Shown without its details (client.showErrorDetails = "none"); the log has them.
    assert "original error message is redacted" in at.exception[0].message
    assert list(theme.documents_dir.iterdir()) == []
    assert files_under(_isolated_data_dir.parent) == before


def test_an_upload_name_with_nothing_usable_is_refused_with_a_reason(
    admin: None,  # noqa: F811
    repo: ThemeRepository,  # noqa: F811
) -> None:
    theme = repo.create("maintenance")
    at = logged_in()
    at.file_uploader[0].set_value([("\u202e.txt", b"x", "text/plain")])  # only a dot left
    at.run()
    at.button(key="ingest").click()
    at.run()
    assert not at.exception
    statuses = at.dataframe[0].value
    assert list(statuses["Statut"]) == ["refusé"] and statuses.iloc[0]["Raison"]
    assert list(theme.documents_dir.iterdir()) == []


# --- output: documents, file names, feedback -----------------------------------------------
def test_payloads_in_documents_answers_and_feedback_are_shown_as_text(
    admin: None,  # noqa: F811
    repo: ThemeRepository,  # noqa: F811
    tmp_path: Path,
    minilm: Any,  # noqa: F811
) -> None:
    table = payloads(TRACKER)
    theme = repo.create("rh", title=table["md_image"])
    src = tmp_path / "src"
    src.mkdir()
    doc = src / "![x](pixel.png) <img src=x onerror=alert(1)>.txt"
    doc.write_text("Congés : vingt-cinq jours.\n\n" + "\n\n".join(table.values()), "utf-8")
    ingest_batch(theme, [doc], minilm)
    [stored] = theme.load_data().vectors.ref_doc_ids()  # the safe name it was given
    chunk_id = theme.load_data().vectors.document_node_ids(stored)[0]
    # Issue 11 finding 4: a chat user's question with an image, sent with a thumb down,
    # was rendered in the Avis expander label and fetched by the admin's browser.
    record_feedback(
        theme.directory,
        FeedbackEntry(
            rating=-1,
            question=f"Combien ? {table['md_image']} {table['md_image_nested_alt']}",
            answer="\n\n".join(table.values()),
            sources=[FeedbackSource(file=stored, chunk_id=chunk_id)],
        ),
    )
    at = open_page(logged_in(), "inspect")
    at.text_input(key="retrieval_question").input("congés jours")
    next(b for b in at.main.button if b.label == "Chercher").click()
    at.run()
    assert not at.exception
    review: list[str] = []
    for page in every_page(at):  # the retrieval result stays shown on the Inspect page
        rendered = every_markdown(page)
        review += [p for p in rendered if p.startswith("👎")]
        for part in rendered:
            assert live_tokens(part, links=False) == [], part
        assert all(not m.allow_html for m in page.markdown)
        assert not any("\u202e" in t.value or "\x1b" in t.value for t in page.text)
    assert review and all(live_tokens(p) == [] for p in review)


# --- secrets --------------------------------------------------------------------------------
def test_the_admin_hash_never_reaches_the_page_or_the_logs(
    repo: ThemeRepository,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    line = hash_password(PASSWORD, n=2**10)
    monkeypatch.setenv("ADMIN_PASSWORD_HASH", line)
    get_config.cache_clear()
    repo.create("rh")
    at = new_app()
    at.text_input[0].input("wrong")
    at.button[0].click()
    at.run()
    shown = "\n".join(every_markdown(at))
    salt, key = line.split("$")[4:]
    assert salt not in shown and key not in shown and salt not in caplog.text
    # A damaged hash: the message says how to fix it, without quoting it.
    damaged = line[:-10] + "!!!!!!!!!!"
    monkeypatch.setenv("ADMIN_PASSWORD_HASH", damaged)
    get_config.cache_clear()
    at = new_app()
    at.text_input[0].input("anything")
    at.button[0].click()
    at.run()
    errors = "\n".join(e.value for e in at.error)
    assert "hash\\-password" in errors or "hash-password" in errors
    assert salt not in errors and damaged[-30:] not in errors
    assert salt not in caplog.text
    get_config.cache_clear()
