"""What an index version's files must be: sizes and checksums, written at commit, checked at load.

A version's ``VERSION.json`` lists every other file of the version folder with its size and
sha256 (``"files": {"vectors/vectors.npy": [size, "sha256"], ...}``). Parsing alone misses
damage that still parses: a ``.npy`` whose data bytes were overwritten, a ``nodes.jsonl``
cut exactly at a line end. Loading checks the list first, so a truncated or altered file
is named in one sentence instead of surfacing later as a wrong answer or a traceback.
Versions written before the list existed are loaded without it (parsing still checks them).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from themes.errors import ThemesError

FILES_KEY = "files"
_BLOCK = 1 << 20


class DamagedFile(ThemesError, ValueError):
    """A file of a version folder is missing, truncated or altered; ``str()`` says which."""


def file_digest(path: Path) -> tuple[int, str]:
    """(size, sha256 hex) of one file, read in 1 MB blocks."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as handle:
        while block := handle.read(_BLOCK):
            size += len(block)
            digest.update(block)
    return size, digest.hexdigest()


def describe_files(folder: Path, *, skip: str) -> dict[str, list[Any]]:
    """``{relative path: [size, sha256]}`` of every file under ``folder`` but ``skip``."""
    out: dict[str, list[Any]] = {}
    for root, _dirs, files in os.walk(folder):
        for name in sorted(files):
            path = Path(root) / name
            rel = path.relative_to(folder).as_posix()
            if rel != skip:
                out[rel] = list(file_digest(path))
    return dict(sorted(out.items()))


def check_files(folder: Path, info: Mapping[str, Any]) -> None:
    """Raise ``DamagedFile`` naming the first listed file that is missing, cut or altered."""
    listed = info.get(FILES_KEY)
    if listed is None:
        return
    if not isinstance(listed, Mapping):
        raise DamagedFile(f"the file list of {folder.name}/VERSION.json is not readable")
    for rel, expected in listed.items():
        try:
            size, sha = int(expected[0]), str(expected[1])
        except (TypeError, ValueError, IndexError, KeyError):
            raise DamagedFile(
                f"the entry {rel!r} of {folder.name}/VERSION.json is not readable"
            ) from None
        path = folder / rel
        try:
            actual = path.stat().st_size
        except FileNotFoundError:
            raise DamagedFile(f"{folder.name}/{rel} is missing") from None
        if actual != size:
            raise DamagedFile(
                f"{folder.name}/{rel} is truncated or altered ({actual} bytes, {size} expected)"
            )
        if file_digest(path)[1] != sha:
            raise DamagedFile(f"{folder.name}/{rel} is altered (its checksum differs)")
