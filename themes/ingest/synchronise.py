"""Bringing the index in line with ``documents/``: update, reindex and repair."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping
from pathlib import Path

from llama_index.core.embeddings import BaseEmbedding

from themes.chunking import IngestProgress, PendingFile, ProgressTracker
from themes.documents import StoredDocument
from themes.index_storage import IndexCorrupted, IndexWriter
from themes.ingest.indexing import close_report, embed_within_budget, record_indexed
from themes.ingest.reading import docstore_hashes, read_each, read_if_changed
from themes.ingest.removal import drop_document
from themes.ingest.reports import FileResult, IngestReport
from themes.ingest.writing import write_session
from themes.readers import RejectedFile, safe_file_name
from themes.theme import Theme


def _unowned_node_ids(w: IndexWriter) -> list[str]:
    """Chunks with no source document at all."""
    owned = {n for doc in w.vectors.ref_doc_ids() for n in w.vectors.document_node_ids(doc)}
    return [n for n in w.vectors.node_ids() if n not in owned]


def sync_theme(
    theme: Theme,
    embed_model: BaseEmbedding,
    *,
    progress: Callable[[IngestProgress], None] | None = None,
    lock_timeout: float = 2.0,
    max_minutes: float | None = None,
) -> IngestReport:
    """Bring the index in line with ``documents/`` (the CLI's "update").

    New files are ingested, files whose sha256 differs from the docstore's are re-embedded
    (their old chunks replaced), and documents whose file is gone are removed from the
    vectors, the docstore and (at commit) the keyword index. A file that cannot be read,
    or that does not fit the time budget, is reported ``rejected`` and its previously
    indexed version is kept (the next update takes it up again).
    """
    return _synchronise(theme, embed_model, progress, lock_timeout, max_minutes, repair_mode=False)


def repair(
    theme: Theme,
    embed_model: BaseEmbedding,
    *,
    progress: Callable[[IngestProgress], None] | None = None,
    lock_timeout: float = 2.0,
    max_minutes: float | None = None,
) -> IngestReport:
    """Fix every orphan ``health`` reports, in one write; rebuild a damaged index.

    Chunks of a document with no file (or without any document) are deleted, docstore
    entries without chunks are dropped so their file is indexed again, files not indexed
    are indexed, and a new version is published even when only the keyword index disagreed
    with the vectors (the commit rebuilds it from them). When the published index cannot be
    read (``IndexCorrupted``: a truncated or altered file, a garbled ``CURRENT``), a new
    index is built from ``documents/`` without reading it (``report.rebuilt``); documents
    are never touched. Files beyond the time budget stay for the next ``sync_theme``.
    """
    try:
        return _synchronise(
            theme, embed_model, progress, lock_timeout, max_minutes, repair_mode=True
        )
    except IndexCorrupted:
        report = _synchronise(
            theme, embed_model, progress, lock_timeout, max_minutes, repair_mode=True, rebuild=True
        )
        report.rebuilt = True
        return report


def reindex(
    theme: Theme,
    embed_model: BaseEmbedding,
    names: Collection[str] | None = None,
    *,
    progress: Callable[[IngestProgress], None] | None = None,
    lock_timeout: float = 2.0,
    max_minutes: float | None = None,
) -> IngestReport:
    """``sync_theme``, plus re-chunking and re-embedding the stored documents named in
    ``names`` (all of them when ``None``) even when unchanged: after a change of chunk
    size, or of embedding model. One new version; the old chunks stay until it is published.
    """
    wanted = None if names is None else frozenset(names)
    return _synchronise(
        theme,
        embed_model,
        progress,
        lock_timeout,
        max_minutes,
        repair_mode=False,
        force=lambda name: wanted is None or name in wanted,
    )


def _synchronise(
    theme: Theme,
    embed_model: BaseEmbedding,
    progress: Callable[[IngestProgress], None] | None,
    lock_timeout: float,
    max_minutes: float | None,
    *,
    repair_mode: bool,
    rebuild: bool = False,
    force: Callable[[str], bool] = lambda name: False,
) -> IngestReport:
    started = time.perf_counter()
    report = IngestReport(theme.name)
    tracker = ProgressTracker(progress)
    with write_session(theme, lock_timeout, rebuild=rebuild) as (w, _changes, staging):
        entries = theme.documents.entries()
        tracker.files_total = len(entries)
        known = docstore_hashes(w.docstore)
        changed = rebuild
        if repair_mode:
            changed = _drop_orphans(w) or changed

        def read_entry(entry: StoredDocument) -> PendingFile | FileResult | None:
            tracker.emit("reading", entry.name)
            return _entry_to_index(theme, entry, staging, w, known, force)

        pending = read_each(entries, tracker, report, read_entry, lambda entry: entry.name)
        indexed = embed_within_budget(w, theme, embed_model, pending, tracker, report, max_minutes)
        writing_started = time.perf_counter()
        present = {entry.name for entry in entries}
        gone = (set(known) | w.vectors.ref_doc_ids()) - present
        for name in sorted(gone):
            report.files.append(FileResult(name, "removed", removed_chunks=drop_document(w, name)))
        changed = changed or bool(indexed) or bool(gone)
        record_indexed(report, w, tracker, indexed, changed=changed)
    close_report(report, w, tracker, started, writing_started)
    return report


def _drop_orphans(w: IndexWriter) -> bool:
    """Delete chunks without a document; whether the repair must publish a new version."""
    unowned = _unowned_node_ids(w)
    if unowned:
        w.vectors.delete_nodes(unowned)
    # A keyword index that disagrees with the vectors is re-derived from them by the commit.
    return bool(unowned) or set(w.keywords.node_ids()) != set(w.vectors.node_ids())


def _entry_to_index(
    theme: Theme,
    entry: StoredDocument,
    staging: Path,
    w: IndexWriter,
    known: Mapping[str, str | None],
    force: Callable[[str], bool],
) -> PendingFile | FileResult:
    """A stored document: to index (read), unchanged (its result), or ``RejectedFile``."""
    name = entry.name
    if entry.kind == "link":
        raise RejectedFile(name, "symbolic link in documents/, not indexed")
    if entry.kind == "folder":
        raise RejectedFile(name, "folder in documents/, not indexed")
    try:
        safe = safe_file_name(name)
    except RejectedFile:
        safe = ""
    if safe != name:
        raise RejectedFile(name, "unsafe file name, not indexed (rename the file)")
    digest = theme.documents.digest(name)
    item = read_if_changed(
        name,
        digest,
        w,
        known,
        lambda: theme.documents.readable_path(name, staging),
        force=force(name),
    )
    if item is None:
        return FileResult(name, "unchanged", chunks=len(w.vectors.document_node_ids(name)))
    return item
