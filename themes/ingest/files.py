"""``ingest_files``: store and index files given by the admin (uploads, a folder)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

from llama_index.core.embeddings import BaseEmbedding

from themes.chunking import IngestProgress, PendingFile, ProgressTracker
from themes.documents import DocumentChanges
from themes.index_storage import IndexWriter
from themes.ingest.indexing import close_report, embed_within_budget, record_indexed
from themes.ingest.inputs import check_input, copy_hashing, expand_inputs
from themes.ingest.reading import docstore_hashes, read_each, read_if_changed
from themes.ingest.reports import FileResult, IngestReport
from themes.ingest.writing import write_session
from themes.readers import RejectedFile, safe_file_name
from themes.theme import Theme


def ingest_files(
    theme: Theme,
    paths: Sequence[Path],
    embed_model: BaseEmbedding,
    *,
    progress: Callable[[IngestProgress], None] | None = None,
    lock_timeout: float = 2.0,
    max_minutes: float | None = None,
) -> IngestReport:
    """Store and index files (folders are walked, hidden entries skipped).

    Each file is ``ingested`` (new name), ``updated`` (same name, new content: its old
    chunks are replaced), ``unchanged`` (same content: nothing embedded) or ``rejected``
    with a reason (link, hidden, unsupported type, too large, unreadable, a second file
    of the batch with the same safe name, or an estimated indexing time beyond
    ``max_minutes`` for the call, default ``INGEST_MAX_MINUTES``); a rejected file changes
    nothing, not even a previous version stored under its name. Indexed files carry a
    ``warning`` when their name was made safe or their text was not valid UTF-8. Raises
    :class:`IngestBusy` when another writer holds the theme (nothing changed then); an
    exception raised by ``progress`` cancels the call with nothing changed.
    """
    started = time.perf_counter()
    report = IngestReport(theme.name)
    tracker = ProgressTracker(progress)
    files = expand_inputs(paths)
    tracker.files_total = len(files)
    renamed: dict[str, str] = {}
    with write_session(theme, lock_timeout) as (w, moves, staging):
        known = docstore_hashes(w.docstore)
        seen: set[str] = set()
        unchanged: list[tuple[str, Path]] = []

        def stage_and_read(path: Path) -> PendingFile | None:
            name = safe_file_name(path.name)
            tracker.emit("reading", name)
            check_input(path, name, seen, theme)
            seen.add(name)
            if name != path.name:
                renamed[name] = path.name
            staged = staging / name
            digest = copy_hashing(path, staged, name)
            item = read_if_changed(name, digest, w, known, lambda: staged, staged=staged)
            if item is None:
                unchanged.append((name, staged))
            return item

        pending = read_each(files, tracker, report, stage_and_read, _shown_name)
        indexed = embed_within_budget(w, theme, embed_model, pending, tracker, report, max_minutes)
        writing_started = time.perf_counter()
        _install(moves, w, report, indexed, unchanged)
        record_indexed(report, w, tracker, indexed, changed=bool(indexed), renamed=renamed)
    close_report(report, w, tracker, started, writing_started)
    return report


def _install(
    moves: DocumentChanges,
    w: IndexWriter,
    report: IngestReport,
    indexed: list[PendingFile],
    unchanged: list[tuple[str, Path]],
) -> None:
    """Move the staged copies into ``documents/`` (restored if the commit fails)."""
    for item in indexed:
        assert item.staged is not None
        moves.install(item.staged, item.name)
    for name, staged in unchanged:
        # The index already has this content; documents/ gets it too (it may hold a
        # version dropped there by hand and not yet synchronised).
        moves.install(staged, name)
        report.files.append(
            FileResult(name, "unchanged", chunks=len(w.vectors.document_node_ids(name)))
        )


def _shown_name(path: Path) -> str:
    """The name a refusal is reported under: the safe name when there is one."""
    try:
        return safe_file_name(path.name)
    except RejectedFile:
        return path.name
