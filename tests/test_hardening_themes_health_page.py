"""Issue 11, finding 1, on the admin page: with a damaged index the Santé tab names the
damage and shows the « Réparer » and « Vider l'index » buttons its message points to, and
« Réparer » rebuilds the index from the documents.

Seen: the page's message said « utilisez Réparer ou Vider l'index » but the Santé tab
stopped at the error and showed neither button.
"""

from __future__ import annotations

from pathlib import Path

from manager.operations import ingest_batch
from tests.test_manager_page import (  # noqa: F401 - fixtures used by name
    LEAVE,
    _fresh_page_state,
    admin,
    logged_in,
    minilm,
    open_page,
    repo,
)
from themes.theme import ThemeRepository


def test_damaged_index_shows_repair_and_clear_and_repair_rebuilds(
    admin: None,  # noqa: F811 - the imported fixture
    repo: ThemeRepository,  # noqa: F811
    minilm: object,  # noqa: F811
    tmp_path: Path,
) -> None:
    theme = repo.create("rh")
    (tmp_path / "conges.txt").write_text(LEAVE, encoding="utf-8")
    ingest_batch(theme, [tmp_path / "conges.txt"], minilm)  # type: ignore[arg-type]
    vectors = theme.directory / "index" / "v000001" / "vectors" / "vectors.npy"
    vectors.write_bytes(vectors.read_bytes()[:100])

    at = open_page(logged_in(), "health")
    assert not at.exception
    errors = [e.value for e in at.error]
    assert any(
        "L'index de ce thème est endommagé (v000001/vectors/vectors.npy" in e and "« Réparer »" in e
        for e in errors
    ), errors
    repair = at.button(key="repair")
    assert repair.label == "Réparer" and not repair.disabled
    assert at.button(key="clear_index").label == "Vider l'index"
    assert at.button(key="health_sync").disabled  # it would only fail on the damage

    repair.click()
    at.run()
    assert not at.exception
    assert theme.load_data().vectors.ref_doc_ids() == {"conges.txt"}
    assert (theme.documents_dir / "conges.txt").read_text("utf-8") == LEAVE
    assert not any("endommagé" in e.value for e in at.error)
