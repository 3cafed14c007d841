"""Writing a fetched document into a theme's folder without replacing or following anything."""

from __future__ import annotations

import os
from pathlib import Path

from themes.atomic_write import atomic_write
from themes.readers.errors import RejectedFile
from themes.readers.file_names import safe_file_name
from themes.readers.url_fetcher import FetchedDocument


def save_fetched(doc: FetchedDocument, folder: Path, *, overwrite: bool = False) -> Path:
    """Write a fetched document into folder under its safe suggested name; return the path.

    Without ``overwrite`` an existing file is never replaced: "name-2.ext", "name-3.ext"... is
    used instead. Files are created without following symbolic links.
    """
    folder = Path(folder)
    name = safe_file_name(doc.suggested_name)
    if overwrite:
        target = folder / name
        atomic_write(target, doc.body, mode=0o644)
        return target
    stem, extension = os.path.splitext(name)
    for number in range(1, 1000):
        target = folder / (name if number == 1 else f"{stem}-{number}{extension}")
        try:
            _write_new(target, doc.body)
        except FileExistsError:
            continue
        return target
    raise RejectedFile(name, "too many files with this name in the folder, not saved")


def _write_new(target: Path, body: bytes) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(target, flags, 0o644)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(body)
    except BaseException:
        target.unlink(missing_ok=True)
        raise
