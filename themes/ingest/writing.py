"""One write session on a theme: its index writer, its document changes, a staging folder."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from themes.documents import DocumentChanges
from themes.index_storage import IndexWriteFailed, IndexWriter, ThemeBusy, ThemeFolderGone
from themes.theme import Theme


class IngestBusy(ThemeBusy):
    """Another ingest, update, repair or removal is writing the theme's index."""

    def __init__(self, theme: Theme, timeout: float) -> None:
        super().__init__(theme.directory, timeout)
        self.args = (
            f"theme {theme.name!r} is busy: another ingest, update or repair is writing its "
            f"index (still running after {timeout:g} s). Nothing was changed; try again when "
            "it has finished.",
        )


@contextmanager
def write_session(
    theme: Theme, lock_timeout: float, *, rebuild: bool = False
) -> Iterator[tuple[IndexWriter, DocumentChanges, Path]]:
    """The theme's writer, its changes to the documents and a fresh staging folder; undoes
    the document changes on failure.

    A write the file system refuses becomes ``IndexWriteFailed`` (one sentence: what, what
    is still served, what to do) after the documents are restored.
    """
    storage = theme.storage
    changes: DocumentChanges | None = None
    # Entered under the lock, left after the commit: a failed commit still finds the
    # previous files there to put back.
    staging_folder: AbstractContextManager[Path] | None = None
    try:
        with storage.writer(lock_timeout=lock_timeout, rebuild=rebuild) as w:
            staging_folder = theme.documents.staging()
            staging = staging_folder.__enter__()
            changes = theme.documents.changes(w, staging)
            yield w, changes, staging
            changes.make_durable()
    except BaseException as exc:
        if changes is None and isinstance(exc, ThemeBusy):
            raise IngestBusy(theme, lock_timeout) from exc
        if changes is not None:
            changes.rollback()
        if isinstance(exc, OSError) and not isinstance(exc, (IndexWriteFailed, ThemeFolderGone)):
            raise IndexWriteFailed(theme.directory, exc, storage.published_or_none()) from exc
        raise
    finally:
        if staging_folder is not None:
            staging_folder.__exit__(None, None, None)
