"""``python -m themes``: the scriptable CLI, driven in-process through ``main(argv)``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from themes.cli import EXIT_BUSY, EXIT_FAILED, EXIT_OK, main
from themes.index_storage import IndexStorage
from themes.theme import ThemeRepository


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "pompes.md").write_text(
        "# Maintenance des pompes\n\nLa pompe P-42 doit être purgée tous les six mois.\n"
        "Le joint torique se remplace avec une clé de 17.\n",
        encoding="utf-8",
    )
    (folder / "conges.md").write_text(
        "# Congés\n\nLes demandes de congés se font dans l'intranet, rubrique RH.\n",
        encoding="utf-8",
    )
    return folder


def test_create_list_ingest_search_stats_remove_clear(
    capsys: pytest.CaptureFixture[str], docs: Path, _isolated_data_dir: Path
) -> None:
    assert run(capsys, "create", "maintenance", "--title", "Maintenance")[0] == EXIT_OK
    code, out, _ = run(capsys, "--json", "ingest", "maintenance", str(docs))
    assert code == EXIT_OK
    statuses = {f["file_name"]: f["status"] for f in json.loads(out)["files"]}
    assert statuses == {"pompes.md": "ingested", "conges.md": "ingested"}

    code, out, _ = run(capsys, "list", "--json")
    (row,) = json.loads(out)
    assert row["name"] == "maintenance" and row["documents"] == 2 and row["chunks"] >= 2

    code, out, _ = run(
        capsys, "search", "maintenance", "purge de la pompe P-42", "-k", "1", "--json"
    )
    assert code == EXIT_OK
    (hit,) = json.loads(out)
    assert set(hit) == {"text", "source", "page", "score"}
    assert hit["source"] == "pompes.md" and "P-42" in hit["text"]

    code, out, _ = run(capsys, "stats", "maintenance", "--json")
    stats = json.loads(out)
    assert code == EXIT_OK and not stats["orphan_chunks"] and stats["version"]
    assert stats["vector_chunks"] == stats["keyword_chunks"] > 0

    assert run(capsys, "remove", "maintenance", "conges.md")[0] == EXIT_OK
    code, out, _ = run(capsys, "search", "maintenance", "demandes de congés intranet", "--json")
    assert all(hit["source"] != "conges.md" for hit in json.loads(out))

    assert run(capsys, "clear", "maintenance")[0] == EXIT_FAILED  # needs --yes
    assert run(capsys, "clear", "maintenance", "--yes")[0] == EXIT_OK
    code, out, _ = run(capsys, "list", "--json")
    assert json.loads(out)[0]["chunks"] == 0


@pytest.mark.parametrize("name", ["../etc", "Maintenance", "a b", "_x", "", "x" * 65])
def test_invalid_theme_names_fail_with_one_line(
    capsys: pytest.CaptureFixture[str], name: str
) -> None:
    code, out, err = run(capsys, "create", name)
    assert code == EXIT_FAILED
    assert err.startswith("error:") and err.count("\n") == 1
    assert out == ""


def test_unknown_theme_is_reported(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "stats", "nope")
    assert code == EXIT_FAILED and "nope" in err


def test_busy_theme_exits_3(
    capsys: pytest.CaptureFixture[str], docs: Path, _isolated_data_dir: Path
) -> None:
    assert run(capsys, "create", "rh")[0] == EXIT_OK
    theme = ThemeRepository(_isolated_data_dir).get("rh")
    with IndexStorage(theme.directory).writer():
        code, _, err = run(capsys, "ingest", "rh", str(docs / "conges.md"))
    assert code == EXIT_BUSY and "busy" in err


def test_private_url_is_refused_and_other_paths_go_on(
    capsys: pytest.CaptureFixture[str], docs: Path, _isolated_data_dir: Path
) -> None:
    assert run(capsys, "create", "web")[0] == EXIT_OK
    code, out, err = run(
        capsys, "--json", "ingest", "web", "http://169.254.169.254/latest", str(docs / "pompes.md")
    )
    assert code == EXIT_OK
    assert "rejected:" in err and "169.254.169.254" in err
    assert [f["file_name"] for f in json.loads(out)["files"]] == ["pompes.md"]
