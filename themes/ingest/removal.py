"""Removing one stored document, or every chunk of a theme's index."""

from __future__ import annotations

import time

from themes.documents import is_hidden as _is_hidden
from themes.index_storage import IndexWriter
from themes.ingest.reports import FileResult, IngestReport
from themes.ingest.writing import write_session
from themes.readers import RejectedFile, safe_file_name
from themes.theme import Theme


def drop_document(w: IndexWriter, name: str) -> int:
    """Delete a document's chunks and docstore entry; return the chunks removed."""
    removed = len(w.vectors.delete_document(name))
    w.docstore.delete_document(name, raise_error=False)
    return removed


def remove_document(theme: Theme, file_name: str, *, lock_timeout: float = 2.0) -> IngestReport:
    """Delete a stored document: its file in documents/, its chunks and its docstore entry.

    ``file_name`` must be a plain stored name: anything with a folder part, leading dots or
    characters ``safe_file_name`` would change ("../theme.json") is refused (status
    "rejected"), as is a name that is neither stored nor indexed.
    """
    report = IngestReport(theme.name)
    try:
        safe = safe_file_name(file_name)
    except RejectedFile:
        safe = ""
    # An empty name would designate documents/ itself (issue 11: the table of hostile names).
    if not file_name or safe != file_name or _is_hidden(file_name):
        report.files.append(
            FileResult(
                file_name,
                "rejected",
                reason="not a stored document name (no folders, no leading dot), nothing removed",
            )
        )
        return report
    started = time.perf_counter()
    with write_session(theme, lock_timeout) as (w, moves, _staging):
        on_disk = theme.documents.exists(file_name)
        indexed = (
            w.docstore.get_document_hash(file_name) is not None
            or file_name in w.vectors.ref_doc_ids()
        )
        if not on_disk and not indexed:
            report.files.append(
                FileResult(file_name, "rejected", reason="no such document, nothing removed")
            )
            w.discard()
        else:
            if on_disk:
                moves.take_out(file_name)  # restored if the commit fails
            removed = drop_document(w, file_name) if indexed else 0
            report.files.append(FileResult(file_name, "removed", removed_chunks=removed))
            if not indexed:
                w.discard()
    report.version = w.committed_version
    report.timings = {"total": time.perf_counter() - started}
    return report


def clear_index(theme: Theme, *, lock_timeout: float = 2.0) -> str | None:
    """Publish an empty index version (documents/ is kept; ``sync_theme`` rebuilds it).

    Works on a damaged index too: the published version is not read. Returns the new
    version's name.
    """
    with write_session(theme, lock_timeout, rebuild=True) as (w, _moves, _staging):
        w.clear()
    return w.committed_version
