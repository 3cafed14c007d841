"""Issue 11, finding 12: removals that say what happened, a theme deletion that waits for
(or refuses on) its lock, and text that is not UTF-8 reported to the operator.

Seen: ``themes remove t nope.md`` (or ``../theme.json``) printed ``removed …`` and exited 0;
deleting a theme during an ingest pulled the folder from under it (the ingest failed 5 min
later); invalid UTF-8 was read as latin-1 without a word.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest
from llama_index.core.bridge.pydantic import PrivateAttr

from tests.themes_hardening import FastEmbedding, fast_embedding, one_error_line, run_cli
from themes.cli import EXIT_FAILED, EXIT_OK
from themes.index_storage import ThemeBusy, ThemeFolderGone
from themes.ingest import IngestReport, ingest_files
from themes.theme import ThemeRepository


class PausingEmbedding(FastEmbedding):
    """Signals ``entered`` at its first batch, then waits for ``release``."""

    _entered: threading.Event = PrivateAttr(default_factory=threading.Event)
    _release: threading.Event = PrivateAttr(default_factory=threading.Event)

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        self._entered.set()
        assert self._release.wait(30), "the test never released the embedding"
        return super()._get_text_embeddings(texts)


def pausing() -> PausingEmbedding:
    fast = fast_embedding()
    return PausingEmbedding(fast.wrapper, model_name=fast.model_name)


@pytest.fixture
def repo(_isolated_data_dir: Path) -> ThemeRepository:
    return ThemeRepository(_isolated_data_dir)


@pytest.fixture
def doc(tmp_path: Path) -> Path:
    path = tmp_path / "pompes.md"
    path.write_text("La pompe P-42 se purge tous les six mois.\n", encoding="utf-8")
    return path


# ------------------------------------------------------------------------------ remove


def test_removing_an_unknown_or_traversing_name_fails_in_one_line(
    capsys: pytest.CaptureFixture[str], repo: ThemeRepository, doc: Path
) -> None:
    theme = repo.create("t")
    ingest_files(theme, [doc], fast_embedding())
    settings = (theme.directory / "theme.json").read_bytes()
    cases = {
        "nope.md": "no such document, nothing removed",
        "../theme.json": "not a stored document name",
        "..%2Ftheme.json": "not a stored document name",
        "%2E%2E%2Ftheme.json": "no such document",
        "/etc/passwd": "not a stored document name",
        ".write.lock": "not a stored document name",
        "pompes.md\n": "not a stored document name",
    }
    for name, expected in cases.items():
        code, out, err = run_cli(capsys, "remove", "t", name)
        line = one_error_line(err)
        assert code == EXIT_FAILED and out == "" and expected in line, (name, line)
    assert (theme.directory / "theme.json").read_bytes() == settings
    assert theme.load_data().vectors.ref_doc_ids() == {"pompes.md"}

    code, out, err = run_cli(capsys, "remove", "t", "pompes.md")
    assert code == EXIT_OK and err == "" and out.startswith("removed pompes.md (1 chunks)")
    assert not (theme.documents_dir / "pompes.md").exists()
    assert theme.load_data().vectors.count() == 0


# ------------------------------------------------------------------------------ delete


def _ingest_in_thread(
    repo: ThemeRepository, doc: Path, model: FastEmbedding
) -> tuple[threading.Thread, dict[str, object]]:
    outcome: dict[str, object] = {}

    def work() -> None:
        try:
            outcome["report"] = ingest_files(repo.get("t"), [doc], model)
        except Exception as exc:  # noqa: BLE001 - checked by the test
            outcome["error"] = exc

    thread = threading.Thread(target=work)
    thread.start()
    return thread, outcome


def test_deleting_a_theme_during_an_ingest_refuses_then_waits(
    repo: ThemeRepository, doc: Path
) -> None:
    repo.create("t")
    model = pausing()
    ingest, outcome = _ingest_in_thread(repo, doc, model)
    try:
        assert model._entered.wait(30)
        started = time.monotonic()
        with pytest.raises(ThemeBusy, match="'t'"):
            repo.delete("t", lock_timeout=0.2)
        assert time.monotonic() - started < 5
        assert repo.exists("t")  # nothing pulled from under the ingest

        deleted: dict[str, object] = {}

        def delete() -> None:
            repo.delete("t", lock_timeout=30)
            deleted["at"] = time.monotonic()

        waiter = threading.Thread(target=delete)
        waiter.start()
        time.sleep(0.3)
        assert "at" not in deleted and repo.exists("t")  # still waiting for the lock
    finally:
        model._release.set()
        ingest.join(30)
    waiter.join(30)
    assert isinstance(outcome.get("report"), IngestReport), outcome
    assert "at" in deleted and not repo.exists("t")
    assert list(repo.root.iterdir()) == []  # no trash, no ghost folder


def test_a_writer_waiting_while_its_theme_is_deleted_writes_nothing(
    repo: ThemeRepository, doc: Path
) -> None:
    theme = repo.create("t")
    outcome: dict[str, object] = {}

    def ingest() -> None:
        try:
            ingest_files(theme, [doc], fast_embedding(), lock_timeout=30)
            outcome["run"] = "done"
        except Exception as exc:  # noqa: BLE001 - checked below
            outcome["run"] = exc

    with theme.storage.exclusive():
        waiting = threading.Thread(target=ingest)
        waiting.start()
        time.sleep(0.3)  # the ingest polls the lock
        # What ThemeRepository.delete does under the lock: the folder leaves at once.
        os.replace(theme.directory, theme.directory.with_name(".t.deleting"))
    waiting.join(30)
    assert isinstance(outcome["run"], ThemeFolderGone), outcome
    assert "deleted while this operation waited" in str(outcome["run"])
    # filelock would re-create the folder to hold its lock file: it must not stay.
    assert not theme.directory.exists()
    assert not repo.exists("t")


# ------------------------------------------------------------------------------ encodings


def test_text_that_is_not_utf8_is_indexed_with_a_warning(
    capsys: pytest.CaptureFixture[str], repo: ThemeRepository, tmp_path: Path
) -> None:
    repo.create("t")
    cp1252 = tmp_path / "menu.txt"
    cp1252.write_bytes("Café crème à 3 € ; œufs brouillés.\n".encode("cp1252"))
    latin1 = tmp_path / "vieux.txt"
    latin1.write_bytes(b"Fichier \x81 ancien : r\xe9sum\xe9 des proc\xe9dures.\n")
    clean = tmp_path / "propre.txt"
    clean.write_text("Texte en UTF-8 : déjà bien.\n", encoding="utf-8")

    code, out, err = run_cli(capsys, "--json", "ingest", "t", str(cp1252), str(latin1), str(clean))
    assert code == EXIT_OK and err == ""
    files = {f["file_name"]: f for f in json.loads(out)["files"]}
    assert all(f["status"] == "ingested" for f in files.values())
    assert "not valid UTF-8" in files["menu.txt"]["warning"]
    assert "read as cp1252" in files["menu.txt"]["warning"]
    assert "read as latin-1" in files["vieux.txt"]["warning"]
    assert files["propre.txt"]["warning"] is None
    texts = " ".join(node.text for node in repo.get("t").load_data().vectors.get_nodes())
    assert "Café crème à 3 €" in texts and "résumé" in texts

    code, out, _ = run_cli(capsys, "ingest", "t", str(cp1252.with_name("menu.txt")))
    assert code == EXIT_OK and "unchanged" in out


def test_text_warnings_are_printed_by_the_cli(
    capsys: pytest.CaptureFixture[str], repo: ThemeRepository, tmp_path: Path
) -> None:
    repo.create("t")
    odd = tmp_path / "CON.md"
    odd.write_bytes("Caf\xe9".encode("latin-1") + b" au lait.\n")
    code, out, err = run_cli(capsys, "ingest", "t", str(odd))
    assert code == EXIT_OK and err == ""
    assert "ingested   _CON.md" in out
    assert "warning    _CON.md — not valid UTF-8" in out
    assert "stored as '_CON.md' (the name 'CON.md' was made safe)" in out
