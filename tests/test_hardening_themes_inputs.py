"""Issue 11, inputs: hostile theme and file names through every themes entry point (the CLI,
the library the admin page calls, uploads), and every CLI error on one line with its code.

For each name of the traversal table the file system is compared before and after: a
refused theme name writes nothing at all; a file name is refused, or stored *inside* its
folder under a safe name (no folder part, no control or bidi character, no Windows device
name, at most 120 characters), and the ingest report says it was renamed.
"""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest

from manager.uploads import stage_uploads
from tests.fakes import Upload
from tests.themes_hardening import fast_embedding, one_error_line, run_cli, snapshot
from themes.cli import EXIT_BUSY, EXIT_FAILED, EXIT_OK, EXIT_USAGE
from themes.ingest import ingest_files
from themes.names import InvalidThemeName
from themes.readers import MAX_NAME_CHARS
from themes.theme import ThemeRepository

# The traversal table (issue 11, "Inputs").
HOSTILE = {
    "parent": "../x",
    "parent, encoded": "..%2Fx",
    "parent, encoded twice": "%2e%2e%2fx",
    "absolute": "/etc/x",
    "windows parent": "..\\x",
    "windows absolute": "C:\\Windows\\x",
    "device CON": "CON",
    "device con": "con",
    "device NUL": "NUL",
    "device nul": "nul",
    "device com1": "com1",
    "device LPT1": "LPT1",
    "NUL byte": "a\x00b",
    "newline": "a\nb",
    "RTL override": "a\u202eexe",
    "300 characters": "a" * 300,
    "empty": "",
    "dot": ".",
    "dot dot": "..",
    "hidden": ".hidden",
}
DEVICE_NAMES = (
    {"con", "prn", "aux", "nul"} | {f"com{i}" for i in range(10)} | {f"lpt{i}" for i in range(10)}
)


def assert_safe_base_name(name: str) -> None:
    assert name and "/" not in name and "\\" not in name and not name.startswith(".")
    assert len(name) <= MAX_NAME_CHARS
    assert all(unicodedata.category(ch) not in ("Cc", "Cf", "Cs") for ch in name)
    assert name.split(".")[0].lower() not in DEVICE_NAMES


# ------------------------------------------------------------------------------ theme names


@pytest.mark.parametrize("label", list(HOSTILE))
def test_hostile_theme_names_are_refused_everywhere_and_write_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, _isolated_data_dir: Path, label: str
) -> None:
    name = HOSTILE[label]
    repo = ThemeRepository(_isolated_data_dir)
    repo.create("ok")
    source = tmp_path / "doc.md"
    source.write_text("Un document.\n", encoding="utf-8")
    before = snapshot(tmp_path)
    for argv in (
        ["create", name],
        ["ingest", name, str(source)],
        ["stats", name],
        ["search", name, "q"],
        ["update", name],
        ["repair", name],
        ["remove", name, "doc.md"],
        ["clear", name, "--yes"],
    ):
        code, out, err = run_cli(capsys, *argv)
        line = one_error_line(err)
        assert code == EXIT_FAILED and out == "", (argv, line)
        assert "invalid theme name" in line, line
    for call in (repo.create, repo.get, repo.delete, repo.path_of):
        with pytest.raises(InvalidThemeName):
            call(name)
    assert snapshot(tmp_path) == before


# ------------------------------------------------------------------------------ file names


@pytest.mark.parametrize("label", list(HOSTILE))
def test_hostile_upload_names_stay_inside_the_staging_folder(tmp_path: Path, label: str) -> None:
    staging = tmp_path / "staging"
    outside = snapshot(tmp_path)
    batch = stage_uploads(
        [Upload(HOSTILE[label] + ".md", b"# Titre\n\nTexte.\n")], staging, max_bytes=2**20
    )
    after = snapshot(tmp_path)
    new = {p for p in after if p not in outside}
    assert all(p == "staging" or p.startswith("staging/") for p in new), new
    if batch.rejected:
        (refusal,) = batch.rejected
        assert refusal.reason and not batch.paths
        assert new <= {"staging"}
    else:
        (path,) = batch.paths
        assert path.parent == staging
        assert_safe_base_name(path.name)
        assert new == {"staging", f"staging/{path.name}"}


@pytest.mark.parametrize("label", list(HOSTILE))
def test_hostile_names_given_to_remove_change_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, _isolated_data_dir: Path, label: str
) -> None:
    theme = ThemeRepository(_isolated_data_dir).create("t")
    (tmp_path / "x").write_text("outside the data folder", encoding="utf-8")
    before = snapshot(tmp_path)
    code, out, err = run_cli(capsys, "remove", "t", HOSTILE[label])
    line = one_error_line(err)
    assert code == EXIT_FAILED and out == ""
    assert "nothing removed" in line or "embedded null" in line, line
    # A name that is safe but unknown took the theme's lock: its (empty) lock file and
    # index folder may appear; nothing else.
    internal = {"data/themes/t/.write.lock", "data/themes/t/index"}
    assert {k: v for k, v in snapshot(tmp_path).items() if k not in internal} == before
    assert theme.directory.is_dir()


# Names a Linux file can carry (no "/" nor NUL, at most 255 bytes).
ON_DISK = {
    label: HOSTILE[label] + ".md"
    for label in (
        "parent, encoded",
        "windows parent",
        "device CON",
        "device nul",
        "newline",
        "RTL override",
        "hidden",
    )
}


@pytest.mark.parametrize("label", list(ON_DISK))
def test_hostile_source_file_names_are_stored_safely_with_a_warning(
    tmp_path: Path, _isolated_data_dir: Path, label: str
) -> None:
    theme = ThemeRepository(_isolated_data_dir).create("t")
    sources = tmp_path / "sources"
    sources.mkdir()
    source = sources / ON_DISK[label]
    source.write_text("# Titre\n\nUn texte assez long pour un chunk.\n", encoding="utf-8")
    outside = {k: v for k, v in snapshot(tmp_path).items() if not k.startswith("data/")}

    report = ingest_files(theme, [source], fast_embedding())

    assert {k: v for k, v in snapshot(tmp_path).items() if not k.startswith("data/")} == outside
    (result,) = report.files
    if result.status == "rejected":
        assert source.name.startswith(".") and result.reason == "hidden file, not ingested"
        assert [p.name for p in theme.documents_dir.iterdir()] == []
        return
    assert result.status == "ingested"
    assert_safe_base_name(result.file_name)
    assert (theme.documents_dir / result.file_name).is_file()
    if result.file_name != source.name:
        assert result.warning and "was made safe" in result.warning


# ------------------------------------------------------------------------------ every error


def test_every_cli_error_is_one_line_with_its_exit_code(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, _isolated_data_dir: Path
) -> None:
    theme = ThemeRepository(_isolated_data_dir).create("t")
    missing = tmp_path / "missing.md"
    binary = tmp_path / "binary.md"
    binary.write_bytes(b"\x00\x01\x02" * 100)
    table: list[tuple[list[str], int, str]] = [
        ([], EXIT_USAGE, "usage error"),
        (["frobnicate"], EXIT_USAGE, "invalid choice"),
        (["stats"], EXIT_USAGE, "required: name"),
        (["search", "t", "q", "-k", "abc"], EXIT_USAGE, "invalid int value"),
        (["create", "t"], EXIT_FAILED, "already exists"),
        (["stats", "nope"], EXIT_FAILED, "no theme named 'nope'"),
        (["ingest", "t", str(missing)], EXIT_FAILED, "nothing indexed"),
        (["ingest", "t", str(binary)], EXIT_FAILED, "nothing indexed"),
        (["ingest", "t", "http://127.0.0.1:1/x"], EXIT_FAILED, "rejected: "),
        (["remove", "t", "nope.md"], EXIT_FAILED, "no such document"),
        (["clear", "t"], EXIT_FAILED, "without --yes"),
        (["ingest", "t", "a\x00b.md"], EXIT_FAILED, "nothing indexed"),
    ]
    for argv, expected_code, expected in table:
        code, _out, err = run_cli(capsys, *argv)
        assert code == expected_code, (argv, err)
        lines = err.strip("\n").split("\n")
        assert "Traceback" not in err and expected in err, (argv, err)
        if argv[:1] != ["ingest"]:
            assert len(lines) == 1, (argv, err)
        else:  # the refusal of each input on its own line, then the one-line verdict
            assert lines[-1].startswith("error: nothing indexed") or "rejected: " in err
    with theme.storage.exclusive():
        for argv in (["ingest", "t", str(binary)], ["update", "t"], ["repair", "t"]):
            code, _out, err = run_cli(capsys, *argv)
            assert code == EXIT_BUSY and one_error_line(err).startswith("busy: "), argv
    code, _out, err = run_cli(capsys, "clear", "t", "--yes")
    assert code == EXIT_OK and err == ""
