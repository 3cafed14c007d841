"""The files given to ``ingest_files``: folders walked, names checked, bytes copied and hashed."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

from themes.documents import is_hidden as _is_hidden
from themes.documents import open_regular
from themes.readers import SUPPORTED_EXTENSIONS, RejectedFile
from themes.theme import Theme

MAX_FILE_BYTES = 50 * 2**20

_SUPPORTED = frozenset(SUPPORTED_EXTENSIONS)


def expand_inputs(paths: Iterable[Path]) -> list[Path]:
    """Files to ingest: files as given, folders walked (hidden entries skipped, links not
    followed but listed so that they are reported as refused)."""
    out: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir() and not path.is_symlink():
            for folder, dirs, files in os.walk(path, followlinks=False):
                here = Path(folder)
                linked_dirs = [d for d in dirs if (here / d).is_symlink() and not _is_hidden(d)]
                dirs[:] = sorted(d for d in dirs if not _is_hidden(d) and d not in linked_dirs)
                names = sorted(
                    [f for f in files if not _is_hidden(f)] + linked_dirs,
                )
                out.extend(here / name for name in names)
        else:
            out.append(path)
    return out


def _too_large(name: str, size: int) -> RejectedFile:
    return RejectedFile(
        name,
        f"file too large ({size / 2**20:.1f} MB, limit {MAX_FILE_BYTES / 2**20:.1f} MB), "
        "not ingested (split it into smaller files)",
    )


def copy_hashing(source: Path, target: Path, name: str) -> tuple[str, int]:
    """Copy ``source`` to a new file ``target`` (fsynced); return (sha256, size)."""
    fd, info = open_regular(source, name)
    digest = hashlib.sha256()
    size = 0
    with os.fdopen(fd, "rb") as src:
        if info.st_size > MAX_FILE_BYTES:
            raise _too_large(name, info.st_size)
        out_fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        with os.fdopen(out_fd, "wb") as dst:
            while block := src.read(1 << 20):
                size += len(block)
                if size > MAX_FILE_BYTES:
                    raise _too_large(name, size)
                digest.update(block)
                dst.write(block)
            dst.flush()
            # Durable before it is renamed into documents/: a crash must not leave an empty
            # file under the real name.
            os.fsync(dst.fileno())
    return digest.hexdigest(), size


def check_input(path: Path, name: str, seen: set[str], theme: Theme) -> None:
    """Refuse (``RejectedFile``) what ``ingest_files`` never stores."""
    if _is_hidden(path.name):
        raise RejectedFile(name, "hidden file, not ingested")
    if path.is_symlink():
        raise RejectedFile(name, "symbolic link, not ingested (give the file itself)")
    if Path(name).suffix.lower() not in _SUPPORTED:
        raise RejectedFile(
            name,
            f"unsupported file type '{Path(name).suffix or '(no extension)'}', "
            f"not ingested (supported: {', '.join(SUPPORTED_EXTENSIONS)})",
        )
    if name in seen:
        raise RejectedFile(name, "another file of this batch has the same name, not ingested")
    target = theme.documents_dir / name
    if target.parent != theme.documents_dir or name in (".", ".."):
        raise RejectedFile(name, "unusable file name, not ingested")
