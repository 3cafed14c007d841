"""Issue 11, finding 1: a damaged index (any file of ``index/vNNNNNN/`` truncated, altered or
missing; ``CURRENT`` truncated or garbled) is named in one line by every command, shown as
damaged by ``list`` (the other themes stay listed), and ``repair`` rebuilds it from the
theme's documents, which are never touched.

Seen: a truncated file made ``stats``, ``search``, ``clear --yes`` and ``update`` print
40-60-line tracebacks and ``python -m themes list`` fail for every theme; there was no
``repair``, and the Santé tab did not show the « Réparer » / « Vider l'index » buttons the
page's message pointed to. Only ``rm -rf`` of the index and ``update`` recovered.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from manager.operations import (
    clear_theme_index,
    index_damage,
    repair_batch,
    theme_summaries,
    user_message,
)
from models.embeddings import load_packaged_minilm
from tests.themes_hardening import one_error_line, run_cli, snapshot
from themes.cli import EXIT_FAILED, EXIT_OK
from themes.index_storage import CURRENT_FILE, IndexCorrupted
from themes.ingest import ingest_files
from themes.theme import Theme, ThemeRepository

PUMP = "# Pompes\n\nLa pompe P-42 doit être purgée tous les six mois avec la vanne ZK-7.\n"
LEAVE = "Les demandes de congés se font dans l'intranet, rubrique RH, un mois avant.\n"

# Every file a version folder holds; test_every_index_file_is_covered keeps this list true.
INDEX_FILES = [
    "VERSION.json",
    "docstore.json",
    "keywords/bm25/data.csc.index.npy",
    "keywords/bm25/indices.csc.index.npy",
    "keywords/bm25/indptr.csc.index.npy",
    "keywords/bm25/params.index.json",
    "keywords/bm25/vocab.index.json",
    "keywords/keywords.json",
    "keywords/offsets.npy",
    "keywords/tokens.npy",
    "vectors/manifest.json",
    "vectors/nodes.jsonl",
    "vectors/vectors.npy",
]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data folder with theme "rh" (two documents, one published version), built once."""
    root = tmp_path_factory.mktemp("damage-template")
    sources = root / "sources"
    sources.mkdir()
    (sources / "pompes.md").write_text(PUMP, encoding="utf-8")
    (sources / "conges.txt").write_text(LEAVE, encoding="utf-8")
    theme = ThemeRepository(root / "data").create("rh")
    report = ingest_files(theme, sorted(sources.iterdir()), load_packaged_minilm())
    assert report.version == "v000001"
    return root / "data"


@pytest.fixture
def theme(template: Path, _isolated_data_dir: Path) -> Theme:
    shutil.copytree(template, _isolated_data_dir)
    return ThemeRepository(_isolated_data_dir).get("rh")


def version_dir(theme: Theme) -> Path:
    return theme.directory / "index" / "v000001"


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def garble(path: Path) -> None:
    """Same size, different bytes in the middle: only the checksum can tell."""
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    for i in range(middle, min(len(data), middle + 8)):
        data[i] ^= 0x5A
    path.write_bytes(bytes(data))


Damage = Callable[[Theme], None]


def _file_case(rel: str, how: Callable[[Path], None]) -> Damage:
    return lambda theme: how(version_dir(theme) / rel)


def _current(content: bytes) -> Damage:
    return lambda theme: (theme.directory / "index" / CURRENT_FILE).write_bytes(content)


CASES: dict[str, tuple[Damage, str]] = {
    **{f"truncated {rel}": (_file_case(rel, truncate), rel) for rel in INDEX_FILES},
    **{
        f"altered {rel}": (_file_case(rel, garble), rel)
        for rel in ("vectors/vectors.npy", "keywords/tokens.npy", "vectors/nodes.jsonl")
    },
    "missing vectors/nodes.jsonl": (
        _file_case("vectors/nodes.jsonl", lambda p: p.unlink()),
        "vectors/nodes.jsonl",
    ),
    "CURRENT empty": (_current(b""), CURRENT_FILE),
    "CURRENT truncated": (_current(b"v0000"), CURRENT_FILE),
    "CURRENT garbled": (_current(b"\xff\xfe\x00v1\n"), CURRENT_FILE),
    "CURRENT names a missing version": (_current(b"v000009\n"), "v000009"),
}


def test_every_index_file_is_covered(theme: Theme) -> None:
    on_disk = sorted(
        p.relative_to(version_dir(theme)).as_posix()
        for p in version_dir(theme).rglob("*")
        if p.is_file()
    )
    assert on_disk == INDEX_FILES


@pytest.mark.parametrize("case", list(CASES))
def test_damaged_index_is_named_in_one_line_and_repaired(
    capsys: pytest.CaptureFixture[str], theme: Theme, case: str
) -> None:
    damage, named = CASES[case]
    documents = snapshot(theme.documents_dir)
    damage(theme)

    for command in (["stats", "rh"], ["search", "rh", "pompe"], ["update", "rh"]):
        code, out, err = run_cli(capsys, *command)
        line = one_error_line(err)
        assert code == EXIT_FAILED and out == "", command
        assert "the index of theme 'rh' is damaged" in line and named in line, line
        assert "python -m themes repair rh" in line

    code, out, err = run_cli(capsys, "--json", "list")
    assert code == EXIT_OK and err == ""
    (row,) = json.loads(out)
    assert row["name"] == "rh" and named in row["damaged"] and row["chunks"] is None

    code, out, err = run_cli(capsys, "--json", "repair", "rh")
    assert code == EXIT_OK, err
    report = json.loads(out)
    assert report["rebuilt"] is True
    assert {f["file_name"]: f["status"] for f in report["files"]} == {
        "pompes.md": "ingested",
        "conges.txt": "ingested",
    }

    code, out, _ = run_cli(capsys, "--json", "stats", "rh")
    stats = json.loads(out)
    assert code == EXIT_OK and not stats["orphan_chunks"] and stats["vector_chunks"] == 2
    code, out, _ = run_cli(capsys, "--json", "search", "rh", "purge de la pompe P-42", "-k", "1")
    assert code == EXIT_OK and json.loads(out)[0]["source"] == "pompes.md"
    assert snapshot(theme.documents_dir) == documents  # nothing lost


def test_clear_works_on_a_damaged_index_and_update_rebuilds(
    capsys: pytest.CaptureFixture[str], theme: Theme
) -> None:
    truncate(version_dir(theme) / "vectors" / "vectors.npy")
    code, out, err = run_cli(capsys, "clear", "rh", "--yes")
    assert (code, err) == (EXIT_OK, "") and "documents kept" in out
    code, out, _ = run_cli(capsys, "--json", "update", "rh")
    assert code == EXIT_OK
    assert sorted(f["file_name"] for f in json.loads(out)["files"]) == ["conges.txt", "pompes.md"]
    assert theme.load_data().vectors.count() == 2


def test_list_never_fails_because_one_theme_is_damaged(
    capsys: pytest.CaptureFixture[str], theme: Theme, _isolated_data_dir: Path
) -> None:
    repo = ThemeRepository(_isolated_data_dir)
    repo.create("healthy")
    broken = repo.create("broken-settings")
    (broken.directory / "theme.json").write_text('{"name": "broken-settings", "titl', "utf-8")
    truncate(version_dir(theme) / "docstore.json")

    code, out, err = run_cli(capsys, "--json", "list")
    assert code == EXIT_OK and err == ""
    rows = {r["name"]: r for r in json.loads(out)}
    assert set(rows) == {"broken-settings", "healthy", "rh"}
    assert rows["healthy"]["damaged"] is None and rows["healthy"]["chunks"] == 0
    assert "docstore.json" in rows["rh"]["damaged"]
    assert "settings unreadable" in rows["broken-settings"]["damaged"]
    code, out, err = run_cli(capsys, "list")
    assert code == EXIT_OK and "DAMAGED" in out and "python -m themes repair rh" in out

    summaries = {s.name: s for s in theme_summaries(repo)}  # the admin page's sidebar
    assert summaries["healthy"].damaged is None
    assert summaries["rh"].damaged and summaries["broken-settings"].damaged


def test_the_health_tab_library_names_the_damage_and_repairs(theme: Theme) -> None:
    garble(version_dir(theme) / "vectors" / "vectors.npy")
    damage = index_damage(theme)
    assert isinstance(damage, IndexCorrupted)
    message = user_message(damage, "fr")
    assert message is not None
    assert "vectors/vectors.npy" in message and "« Réparer »" in message
    assert "« Vider l'index »" in message

    outcome = repair_batch(theme, load_packaged_minilm())
    assert outcome.report is not None and outcome.report.rebuilt
    assert index_damage(theme) is None
    assert theme.load_data().vectors.count() == 2

    truncate(theme.directory / "index" / CURRENT_FILE)
    assert clear_theme_index(theme) is not None  # « Vider l'index » works on damage too
    assert index_damage(theme) is None and theme.load_data().vectors.count() == 0


def test_a_repair_of_a_healthy_index_changes_nothing(
    capsys: pytest.CaptureFixture[str], theme: Theme
) -> None:
    before = snapshot(theme.directory)
    code, out, _ = run_cli(capsys, "--json", "repair", "rh")
    assert code == EXIT_OK
    report = json.loads(out)
    assert report["rebuilt"] is False and report["version"] is None
    assert snapshot(theme.directory) == before
