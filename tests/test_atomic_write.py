"""The one atomic-write helper: old content or new, never half; the file and folder synced."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from themes.atomic_write import atomic_write


def test_replaces_content_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "settings.json"
    target.write_text("old", encoding="utf-8")
    atomic_write(target, "nouveau réglage")
    assert target.read_text(encoding="utf-8") == "nouveau réglage"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["settings.json"]


def test_bytes_and_mode(tmp_path: Path) -> None:
    target = tmp_path / "page.html"
    atomic_write(target, b"<p>x</p>", mode=0o640)
    assert target.read_bytes() == b"<p>x</p>"
    assert target.stat().st_mode & 0o777 == 0o640


def test_a_failed_write_keeps_the_old_content(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "CURRENT"
    target.write_text("v000001\n", encoding="ascii")

    def full_disk(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(OSError):
        atomic_write(target, "v000002\n")
    assert target.read_text(encoding="ascii") == "v000001\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["CURRENT"]


def test_a_link_at_the_target_is_replaced_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me", encoding="utf-8")
    folder = tmp_path / "documents"
    folder.mkdir()
    (folder / "doc.txt").symlink_to(outside)
    atomic_write(folder / "doc.txt", "fetched")
    assert outside.read_text(encoding="utf-8") == "keep me"
    assert not (folder / "doc.txt").is_symlink()


def test_the_file_then_its_folder_are_fsynced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced_inodes: list[int] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        synced_inodes.append(os.fstat(fd).st_ino)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    steps: list[str] = []
    target = tmp_path / "CURRENT"
    atomic_write(target, "v1\n", temp_path=tmp_path / "CURRENT.tmp", checkpoint=steps.append)
    # The renamed temporary file keeps its inode: the target's is the one synced first.
    assert synced_inodes == [target.stat().st_ino, tmp_path.stat().st_ino]
    assert steps == ["written", "replaced"]
