"""Issue 11: the RAG Manager shows why a file needs a look, not only why it was refused.

``FileResult.warning`` (a text that was not valid UTF-8 and was read as cp1252 or
latin-1; a name changed to a safe one) used to stay in the report: the Documents tab
showed the file as ingested with an empty reason, and the admin never learnt that its
accents may be wrong.
"""

from __future__ import annotations

from tests.test_manager_page import (  # noqa: F401 - fixtures used by name
    PUMP,
    _fresh_page_state,
    admin,
    logged_in,
    minilm,
    repo,
    texts_of,
)
from themes.theme import ThemeRepository


def test_a_text_read_as_latin1_shows_its_warning_in_the_statuses(
    admin: None,  # noqa: F811 - the imported fixture
    repo: ThemeRepository,  # noqa: F811
) -> None:
    repo.create("maintenance")
    at = logged_in()
    at.file_uploader[0].set_value(
        [
            ("guide.txt", PUMP.encode(), "text/plain"),
            ("vieux.txt", "Résumé des procédures, \x81 ancien.\n".encode("latin-1"), "text/plain"),
            ("vide.txt", b"", "text/plain"),
        ]
    )
    at.run()
    at.button(key="ingest").click()
    at.run()
    assert not at.exception
    statuses = at.dataframe[0].value
    rows = {r["Fichier"]: r for _, r in statuses.iterrows()}
    assert rows["vieux.txt"]["Statut"] == "ingéré"
    assert "not valid UTF-8" in rows["vieux.txt"]["Raison"]
    assert "latin-1" in rows["vieux.txt"]["Raison"]
    assert rows["guide.txt"]["Raison"] == ""
    assert rows["vide.txt"]["Statut"] == "refusé" and rows["vide.txt"]["Raison"]
    assert "1 fichier(s) indexé(s) avec une remarque à vérifier" in texts_of(at)


def test_a_clean_batch_has_no_note(
    admin: None,  # noqa: F811
    repo: ThemeRepository,  # noqa: F811
) -> None:
    repo.create("maintenance")
    at = logged_in()
    at.file_uploader[0].set_value([("guide.txt", PUMP.encode(), "text/plain")])
    at.run()
    at.button(key="ingest").click()
    at.run()
    assert not at.exception
    assert "remarque à vérifier" not in texts_of(at)
