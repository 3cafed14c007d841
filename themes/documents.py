"""A theme's original documents: where they are kept, and how a writer changes them.

Ingestion keeps every original file so that a theme can be re-indexed. Two places exist:
the theme's ``documents/`` folder (``FolderDocuments``, the embedded backend) and the
database (``themes.pg.documents``). Both offer the same reads (``DocumentFiles``) and,
inside an index writer, the same changes (``DocumentChanges``): put a staged file in
place, take one out, undo both if the commit fails.

With the folder, a change is a rename into ``documents/`` (the previous file is kept in
the staging folder until the index commit succeeds, then dropped); with the database, it
is a row written in the writer's own transaction, committed with the index or not at all.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import stat
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

from themes.atomic_write import fsync_path
from themes.readers import RejectedFile

if TYPE_CHECKING:
    from themes.index_storage import IndexWriter

logger = logging.getLogger(__name__)

STAGING_DIR = ".ingest-staging"
BACKUP_DIR = "replaced"

DocumentKind = Literal["file", "link", "folder", "other"]


@dataclass(frozen=True)
class StoredDocument:
    """One visible entry where a theme keeps its documents."""

    name: str
    kind: DocumentKind
    size: int | None = None
    modified_at: str | None = None  # ISO 8601, UTC


class DocumentChanges(Protocol):
    """What an index writer does to the documents; undone if its commit fails."""

    def install(self, staged: Path, name: str) -> None:
        """Put the staged file in place under ``name`` (replacing any previous one)."""
        ...

    def take_out(self, name: str) -> None:
        """Remove the document ``name``."""
        ...

    def rollback(self) -> None:
        """Undo every change of this writer."""
        ...

    def make_durable(self) -> None:
        """Before the index commit: the changes survive a crash."""
        ...


class DocumentFiles(Protocol):
    """Where one theme's original documents live."""

    def entries(self) -> list[StoredDocument]:
        """Visible entries (hidden names skipped), sorted by name."""
        ...

    def names(self) -> list[str]:
        """The stored documents (regular files), sorted."""
        ...

    def exists(self, name: str) -> bool:
        """Whether an entry of that name exists (a file, a link...)."""
        ...

    def digest(self, name: str) -> tuple[str, int]:
        """(sha256, size) of a stored document; ``RejectedFile`` when unreadable."""
        ...

    def read_bytes(self, name: str) -> bytes:
        """The document's content (``FileNotFoundError`` when there is none)."""
        ...

    def readable_path(self, name: str, scratch: Path) -> Path:
        """A local file holding the document (copied into ``scratch`` when needed)."""
        ...

    def staging(self) -> AbstractContextManager[Path]:
        """A fresh, empty folder for a writer's uploads, removed afterwards."""
        ...

    def changes(self, writer: IndexWriter, staging: Path) -> DocumentChanges:
        """The writer's changes to the documents (``staging`` is ``staging()``'s folder)."""
        ...


def is_hidden(name: str) -> bool:
    return name.startswith(".")


def open_regular(path: Path, name: str) -> tuple[int, os.stat_result]:
    """Open a regular file without following links (or hanging on a FIFO)."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise RejectedFile(name, "file not found, not ingested") from None
    except OSError:
        raise RejectedFile(name, "file not readable (or a link), not ingested") from None
    except ValueError:  # a NUL byte in the path: no such file can exist
        raise RejectedFile(name, "file name holds a NUL byte, not ingested") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise RejectedFile(name, "not a regular file (a folder or device?), not ingested")
    return fd, info


def hash_file(path: Path, name: str) -> tuple[str, int]:
    """(sha256, size) of a regular file, read in 1 MB blocks."""
    fd, _info = open_regular(path, name)
    digest = hashlib.sha256()
    size = 0
    with os.fdopen(fd, "rb") as src:
        while block := src.read(1 << 20):
            size += len(block)
            digest.update(block)
    return digest.hexdigest(), size


@dataclass
class FolderChanges:
    """Files put into documents/ (or taken out) during a call, undone if the commit fails."""

    documents_dir: Path
    backup_dir: Path
    done: list[tuple[str, bool]] = field(default_factory=list)  # (name, had an old file)

    def install(self, staged: Path, name: str) -> None:
        target = self.documents_dir / name
        had_old = target.exists() or target.is_symlink()
        if had_old:
            os.replace(target, self.backup_dir / name)
        os.replace(staged, target)
        self.done.append((name, had_old))

    def take_out(self, name: str) -> None:
        target = self.documents_dir / name
        os.replace(target, self.backup_dir / name)
        self.done.append((name, True))

    def rollback(self) -> None:
        for name, had_old in reversed(self.done):
            target = self.documents_dir / name
            try:
                if had_old:
                    os.replace(self.backup_dir / name, target)
                else:
                    target.unlink(missing_ok=True)
            except OSError as exc:
                logger.error("could not restore %s after a failed commit: %s", target, exc)
        self.done.clear()

    def make_durable(self) -> None:
        if self.done:
            # documents/ is durable before the commit publishes an index that needs it.
            fsync_path(self.documents_dir)


class FolderDocuments:
    """The theme's ``documents/`` folder; implements ``DocumentFiles``."""

    def __init__(self, documents_dir: Path) -> None:
        self.documents_dir = documents_dir

    def entries(self) -> list[StoredDocument]:
        if not self.documents_dir.is_dir():
            return []
        with os.scandir(self.documents_dir) as it:
            found = sorted((e for e in it if not is_hidden(e.name)), key=lambda e: e.name)
        return [_entry(e) for e in found]

    def names(self) -> list[str]:
        return [e.name for e in self.entries() if e.kind == "file"]

    def exists(self, name: str) -> bool:
        path = self.documents_dir / name
        return path.exists() or path.is_symlink()

    def digest(self, name: str) -> tuple[str, int]:
        return hash_file(self.documents_dir / name, name)

    def read_bytes(self, name: str) -> bytes:
        return (self.documents_dir / name).read_bytes()

    def readable_path(self, name: str, scratch: Path) -> Path:
        return self.documents_dir / name

    @contextmanager
    def staging(self) -> Iterator[Path]:
        # Inside documents/ (hidden): on the same file system, so a move in is a rename.
        self.documents_dir.mkdir(parents=True, exist_ok=True)
        staging = self.documents_dir / STAGING_DIR
        # Left by a crashed writer; the caller holds the theme's lock, nobody else uses it.
        shutil.rmtree(staging, ignore_errors=True)
        (staging / BACKUP_DIR).mkdir(parents=True)
        try:
            yield staging
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def changes(self, writer: IndexWriter, staging: Path) -> DocumentChanges:
        return FolderChanges(self.documents_dir, staging / BACKUP_DIR)


def _entry(entry: os.DirEntry[str]) -> StoredDocument:
    kind: DocumentKind
    if entry.is_symlink():
        kind = "link"
    elif entry.is_dir():
        kind = "folder"
    elif entry.is_file():
        kind = "file"
    else:
        kind = "other"
    size: int | None = None
    modified: str | None = None
    if kind == "file":
        try:
            info = entry.stat(follow_symlinks=False)
            size = info.st_size
            modified = datetime.fromtimestamp(info.st_mtime, UTC).isoformat(timespec="seconds")
        except OSError:
            pass
    return StoredDocument(entry.name, kind, size, modified)
