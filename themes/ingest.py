"""Ingestion: files in, chunks out; at most one new index version per call.

    report = ingest_files(theme, [Path("guide.pdf"), Path("folder/")], embed_model)
    report = sync_theme(theme, embed_model)        # "update": documents/ -> index
    report = reindex(theme, embed_model, ["guide.pdf"])  # re-embed even if unchanged
    remove_document(theme, "guide.pdf")
    health(theme); repair(theme, embed_model); clear_index(theme)

What happens to one file (``ingest_files``): its name is made safe
(``safe_file_name``), links, hidden files, unsupported types and oversized
files are refused with a reason; the bytes are copied (and hashed) into a
private staging folder under the safe name, parsed there by
``themes.readers.read_document``, and only when parsing succeeded and the new
chunks are embedded is the copy moved into ``documents/`` (``os.replace``, so
the same name replaces the old file atomically), just before the commit
publishes the new index version; if the commit fails the previous files are
moved back. A file that fails anywhere changes nothing: neither ``documents/``
nor the index. A bad file never stops the others. A call that changes nothing
in the index (all files unchanged or rejected) publishes no version. After a
crash between the move and the commit, ``documents/`` is ahead of the index and
the next ``sync_theme`` re-embeds the difference.

Text files (.txt, .md) are not read whole: they are checked in one streaming pass,
then chunked and embedded section by section (``themes.chunking``, ``themes.text_stream``),
so memory stays bounded whatever their size, and progress events keep coming. Before
anything is embedded, the indexing time is estimated (``themes.ingest_estimate``) and
files beyond the call's budget (``INGEST_MAX_MINUTES``) are refused with the estimate.
Two things are decided here, before chunking: whether a file changed (by the sha256 of its
bytes against the docstore's hash; parsing a PDF costs a child process, so unchanged files
are never parsed), and which documents disappeared from ``documents/``.

Damage: a writer on a damaged index raises ``IndexCorrupted`` before touching anything;
``repair`` then rebuilds the index from ``documents/`` and ``clear_index`` publishes an
empty one, neither reading the damaged version. A refused write (read-only folder, full
disk) raises ``IndexWriteFailed``: nothing is published, ``documents/`` is restored.

Locking: every public writer here takes ``IndexStorage.writer()`` first and
does everything inside it; a concurrent one raises :class:`IngestBusy` (a
``ThemeBusy``) before touching anything.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from llama_index.core import Document
from llama_index.core.embeddings import BaseEmbedding
from llama_index.core.storage.docstore import BaseDocumentStore

from themes.chunking import (
    CHUNK_MARGIN_TOKENS,
    EMBED_BATCH_SIZE,
    FileDocument,
    FileStatus,
    IngestProgress,
    PendingFile,
    ProgressTracker,
    Stage,
    chunk_parameters,
    embed_pending,
    token_counter,
)
from themes.documents import DocumentChanges, StoredDocument, open_regular
from themes.documents import is_hidden as _is_hidden
from themes.index_storage import (
    IndexCorrupted,
    IndexWriteFailed,
    IndexWriter,
    ThemeBusy,
    ThemeFolderGone,
)
from themes.ingest_estimate import DEFAULT_MAX_MINUTES, TimeBudget
from themes.readers import SUPPORTED_EXTENSIONS, RejectedFile, read_document, safe_file_name
from themes.text_stream import STREAMED_FILE_TYPES, TextSource, inspect_text
from themes.theme import Theme

__all__ = [
    "CHUNK_MARGIN_TOKENS",
    "EMBED_BATCH_SIZE",
    "FileDocument",
    "FileResult",
    "FileStatus",
    "HealthReport",
    "IngestBusy",
    "IngestProgress",
    "IngestReport",
    "Stage",
    "chunk_parameters",
    "clear_index",
    "health",
    "ingest_files",
    "reindex",
    "remove_document",
    "repair",
    "sync_theme",
    "token_counter",
]

logger = logging.getLogger(__name__)

MAX_FILE_BYTES = 50 * 2**20

_SUPPORTED = frozenset(SUPPORTED_EXTENSIONS)


# ------------------------------------------------------------------------------------------
# Public data types
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FileResult:
    """What happened to one file.

    ``chunks``: the file's chunks in the index after the call; ``removed_chunks``: chunks
    deleted by the call (the previous version of an updated file, or a removed file).
    ``reason`` says why a file was rejected; ``warning`` what the admin should check in a
    file that was indexed (not valid UTF-8, name changed to a safe one).
    """

    file_name: str
    status: FileStatus
    chunks: int = 0
    removed_chunks: int = 0
    reason: str | None = None
    warning: str | None = None


@dataclass
class IngestReport:
    """Outcome of one ingest/sync/remove/repair call.

    ``version`` is the index version published by the call, or ``None`` when nothing in
    the index changed (no version is written then). ``timings`` holds seconds spent
    "reading", "chunking", "embedding", "writing" and in "total". ``rebuilt``: the
    published index was damaged and this call rebuilt it from the documents (``repair``).
    """

    theme: str
    files: list[FileResult] = field(default_factory=list)
    version: str | None = None
    chunks_embedded: int = 0
    timings: dict[str, float] = field(default_factory=dict)
    rebuilt: bool = False

    def result(self, file_name: str) -> FileResult | None:
        return next((r for r in self.files if r.file_name == file_name), None)

    def names(self, status: FileStatus) -> list[str]:
        return [r.file_name for r in self.files if r.status == status]

    @property
    def changed(self) -> bool:
        return self.version is not None

    def summary(self) -> str:
        """One line per file, for the admin."""
        lines = []
        for r in self.files:
            if r.status == "rejected":
                lines.append(f"{r.file_name}: rejected: {r.reason}")
            elif r.status == "removed":
                lines.append(f"{r.file_name}: removed ({r.removed_chunks} chunks)")
            else:
                lines.append(f"{r.file_name}: {r.status} ({r.chunks} chunks)")
            if r.warning:
                lines.append(f"{r.file_name}: warning: {r.warning}")
        version = f"index version {self.version}" if self.version else "index unchanged"
        if self.rebuilt:
            version += " (rebuilt from the documents: the previous index was damaged)"
        lines.append(f"theme {self.theme!r}: {version}")
        return "\n".join(lines)


@dataclass(frozen=True)
class HealthReport:
    """Consistency of a theme's published index with its ``documents/`` folder.

    Orphans: ``orphan_chunks`` (ref doc -> chunks whose document has no file or no
    docstore entry; ``""`` for chunks without a document), ``entries_without_chunks``,
    ``unindexed_files`` and the vector/keyword node id mismatches. ``stale_files`` (file
    changed since it was indexed) are not orphans: ``sync_theme`` re-embeds them.
    """

    theme: str
    version: str | None
    files: tuple[str, ...]
    docstore_entries: Mapping[str, str | None]
    chunks_per_document: Mapping[str, int]
    vector_chunks: int
    keyword_chunks: int
    orphan_chunks: Mapping[str, int]
    entries_without_chunks: tuple[str, ...]
    unindexed_files: tuple[str, ...]
    stale_files: tuple[str, ...]
    vector_only_ids: tuple[str, ...]
    keyword_only_ids: tuple[str, ...]

    @property
    def orphan_count(self) -> int:
        return (
            sum(self.orphan_chunks.values())
            + len(self.entries_without_chunks)
            + len(self.unindexed_files)
            + len(self.vector_only_ids)
            + len(self.keyword_only_ids)
        )

    @property
    def ok(self) -> bool:
        return self.orphan_count == 0 and not self.stale_files

    def summary(self) -> str:
        parts = [
            f"theme {self.theme!r}, index version {self.version or '(none)'}",
            f"{len(self.files)} files, {len(self.docstore_entries)} docstore entries, "
            f"{self.vector_chunks} chunks in {len(self.chunks_per_document)} documents, "
            f"{self.keyword_chunks} keyword entries",
        ]
        if self.orphan_chunks:
            parts.append(f"orphan chunks: {dict(self.orphan_chunks)}")
        if self.entries_without_chunks:
            parts.append(f"docstore entries without chunks: {list(self.entries_without_chunks)}")
        if self.unindexed_files:
            parts.append(f"files not indexed: {list(self.unindexed_files)}")
        if self.stale_files:
            parts.append(f"files changed since indexed: {list(self.stale_files)}")
        if self.vector_only_ids or self.keyword_only_ids:
            parts.append(
                f"vector/keyword mismatch: {len(self.vector_only_ids)} only in vectors, "
                f"{len(self.keyword_only_ids)} only in keywords"
            )
        parts.append("OK" if self.ok else f"{self.orphan_count} orphans")
        return "\n".join(parts)


class IngestBusy(ThemeBusy):
    """Another ingest, update, repair or removal is writing the theme's index."""

    def __init__(self, theme: Theme, timeout: float) -> None:
        super().__init__(theme.directory, timeout)
        self.args = (
            f"theme {theme.name!r} is busy: another ingest, update or repair is writing its "
            f"index (still running after {timeout:g} s). Nothing was changed; try again when "
            "it has finished.",
        )


# ------------------------------------------------------------------------------------------
# Files
# ------------------------------------------------------------------------------------------


def _expand_inputs(paths: Iterable[Path]) -> list[Path]:
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


def _copy_hashing(source: Path, target: Path, name: str) -> tuple[str, int]:
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


def _read_content(path: Path, name: str) -> tuple[list[Document] | None, TextSource | None]:
    """(pages, None) read in memory, or (None, text) checked for streaming (.txt, .md);
    any unexpected failure is turned into a refusal of this file only."""
    try:
        if Path(name).suffix.lower() in STREAMED_FILE_TYPES:
            if path.is_symlink():
                raise RejectedFile(name, "symbolic link, not ingested (upload the file itself)")
            return None, inspect_text(path, name, max_bytes=MAX_FILE_BYTES)
        return read_document(path, max_bytes=MAX_FILE_BYTES), None
    except RejectedFile:
        raise
    except Exception as exc:  # noqa: BLE001 - a reader bug must not stop the other files
        logger.exception("unexpected error while reading %s", path)
        raise RejectedFile(
            name, f"could not be read ({type(exc).__name__}: {exc}), not ingested"
        ) from None


def _pending(
    path: Path, name: str, sha: str, size: int, status: FileStatus, staged: Path | None = None
) -> PendingFile:
    pages, text = _read_content(path, name)
    return PendingFile(name, sha, size, status, pages=pages, text=text, staged=staged)


# ------------------------------------------------------------------------------------------
# Index helpers
# ------------------------------------------------------------------------------------------


def _docstore_hashes(docstore: BaseDocumentStore) -> dict[str, str | None]:
    """Every docstore entry (doc id -> stored hash)."""
    ids = set(docstore.docs) | set(docstore.get_all_document_hashes().values())
    return {doc_id: docstore.get_document_hash(doc_id) for doc_id in sorted(ids)}


def _unowned_node_ids(w: IndexWriter) -> list[str]:
    """Chunks with no source document at all."""
    owned = {n for doc in w.vectors.ref_doc_ids() for n in w.vectors.document_node_ids(doc)}
    return [n for n in w.vectors.node_ids() if n not in owned]


def _drop_document(w: IndexWriter, name: str) -> int:
    """Delete a document's chunks and docstore entry; return the chunks removed."""
    removed = len(w.vectors.delete_document(name))
    w.docstore.delete_document(name, raise_error=False)
    return removed


@contextmanager
def _writing(
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


def _embed(
    w: IndexWriter,
    theme: Theme,
    embed_model: BaseEmbedding,
    pending: list[PendingFile],
    tracker: ProgressTracker,
    report: IngestReport,
    max_minutes: float | None,
) -> list[PendingFile]:
    """Chunk and embed what was read, within the time budget; refusals go to the report."""
    chunk_size, overlap = chunk_parameters(theme.settings.retrieval, embed_model)
    budget = TimeBudget(_limit_minutes(max_minutes), chunk_size, overlap)
    indexed, refused = embed_pending(
        w, embed_model, theme.settings.retrieval, pending, tracker, budget, theme_name=theme.name
    )
    report.files.extend(FileResult(r.name, "rejected", reason=r.reason) for r in refused)
    return indexed


def _limit_minutes(max_minutes: float | None) -> float:
    if max_minutes is not None:
        return max_minutes
    try:
        from config.settings import get_config

        return float(get_config().ingest_max_minutes)
    except Exception:  # noqa: BLE001 - an unreadable configuration must not stop ingestion
        logger.warning("configuration unreadable: ingest time limit %s min", DEFAULT_MAX_MINUTES)
        return DEFAULT_MAX_MINUTES


def _finish(
    report: IngestReport,
    w: IndexWriter,
    tracker: ProgressTracker,
    indexed: list[PendingFile],
    changed: bool,
    renamed: Mapping[str, str] | None = None,
) -> None:
    """Record the indexed files, and publish (or not) the version."""
    for item in indexed:
        warnings = [item.warning] if item.warning else []
        if renamed and item.name in renamed:
            warnings.append(
                f"stored as {item.name!r} (the name {renamed[item.name]!r} was made safe)"
            )
        report.files.append(
            FileResult(
                item.name,
                item.status,
                chunks=len(w.vectors.document_node_ids(item.name)),
                removed_chunks=item.removed_chunks,
                warning="; ".join(warnings) or None,
            )
        )
    report.chunks_embedded = tracker.chunks_done
    if changed:
        tracker.emit("writing")
    else:
        w.discard()


# ------------------------------------------------------------------------------------------
# Public API
# ------------------------------------------------------------------------------------------


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
    files = _expand_inputs(paths)
    tracker.files_total = len(files)
    renamed: dict[str, str] = {}
    with _writing(theme, lock_timeout) as (w, moves, staging):
        known = _docstore_hashes(w.docstore)
        seen: set[str] = set()
        pending: list[PendingFile] = []
        unchanged: list[tuple[str, Path]] = []
        read_started = time.perf_counter()
        for path in files:
            display = path.name
            try:
                name = safe_file_name(path.name)
                display = name
                tracker.emit("reading", name)
                _check_input(path, name, seen, theme)
                seen.add(name)
                if name != path.name:
                    renamed[name] = path.name
                staged = staging / name
                sha, size = _copy_hashing(path, staged, name)
                if known.get(name) == sha and w.vectors.document_node_ids(name):
                    unchanged.append((name, staged))
                    continue
                status: FileStatus = "updated" if name in known else "ingested"
                pending.append(_pending(staged, name, sha, size, status, staged))
            except RejectedFile as exc:
                report.files.append(FileResult(display, "rejected", reason=exc.reason))
            finally:
                tracker.files_done += 1
        tracker.timings["reading"] = time.perf_counter() - read_started

        indexed = _embed(w, theme, embed_model, pending, tracker, report, max_minutes)
        writing_started = time.perf_counter()
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
        _finish(report, w, tracker, indexed, changed=bool(indexed), renamed=renamed)
    tracker.timings["writing"] = time.perf_counter() - writing_started
    report.version = w.committed_version
    report.timings = {**tracker.timings, "total": time.perf_counter() - started}
    return report


def _check_input(path: Path, name: str, seen: set[str], theme: Theme) -> None:
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
    with _writing(theme, lock_timeout, rebuild=rebuild) as (w, _changes, staging):
        entries = theme.documents.entries()
        tracker.files_total = len(entries)
        known = _docstore_hashes(w.docstore)
        changed = rebuild
        if repair_mode:
            unowned = _unowned_node_ids(w)
            if unowned:
                w.vectors.delete_nodes(unowned)
                changed = True
            if set(w.keywords.node_ids()) != set(w.vectors.node_ids()):
                changed = True  # the commit re-derives the keyword index from the vectors

        pending: list[PendingFile] = []
        present: set[str] = set()
        read_started = time.perf_counter()
        for entry in entries:
            present.add(entry.name)
            tracker.emit("reading", entry.name)
            try:
                item = _entry_to_index(theme, entry, staging, w, known, force)
                if isinstance(item, FileResult):
                    report.files.append(item)
                else:
                    pending.append(item)
            except RejectedFile as exc:
                report.files.append(FileResult(entry.name, "rejected", reason=exc.reason))
            finally:
                tracker.files_done += 1
        tracker.timings["reading"] = time.perf_counter() - read_started

        indexed = _embed(w, theme, embed_model, pending, tracker, report, max_minutes)
        writing_started = time.perf_counter()
        gone = (set(known) | w.vectors.ref_doc_ids()) - present
        for name in sorted(gone):
            report.files.append(FileResult(name, "removed", removed_chunks=_drop_document(w, name)))
        changed = changed or bool(indexed) or bool(gone)
        _finish(report, w, tracker, indexed, changed=changed)
    tracker.timings["writing"] = time.perf_counter() - writing_started
    report.version = w.committed_version
    report.timings = {**tracker.timings, "total": time.perf_counter() - started}
    return report


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
    sha, size = theme.documents.digest(name)
    old = known.get(name)
    has_chunks = bool(w.vectors.document_node_ids(name))
    if old == sha and has_chunks and not force(name):
        return FileResult(name, "unchanged", chunks=len(w.vectors.document_node_ids(name)))
    status: FileStatus = "updated" if old is not None or has_chunks else "ingested"
    return _pending(theme.documents.readable_path(name, staging), name, sha, size, status)


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
    with _writing(theme, lock_timeout) as (w, moves, _staging):
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
            removed = _drop_document(w, file_name) if indexed else 0
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
    with _writing(theme, lock_timeout, rebuild=True) as (w, _moves, _staging):
        w.clear()
    return w.committed_version


def health(theme: Theme, *, check_hashes: bool = True) -> HealthReport:
    """Compare the published index with documents/ (no lock needed, nothing written).

    With ``check_hashes`` every file is hashed to find the ones changed since indexing.
    """
    version = theme.storage.load_current()
    files: list[str] = []
    hashes: dict[str, str] = {}
    for entry in theme.documents.entries():
        if entry.kind != "file":
            continue
        files.append(entry.name)
        if check_hashes:
            try:
                hashes[entry.name] = theme.documents.digest(entry.name)[0]
            except RejectedFile:
                pass
    entries = _docstore_hashes(version.docstore)
    vectors = version.vectors
    per_doc = {doc: len(vectors.document_node_ids(doc)) for doc in sorted(vectors.ref_doc_ids())}
    file_set = set(files)
    orphans = {doc: n for doc, n in per_doc.items() if doc not in file_set or doc not in entries}
    unowned = vectors.count() - sum(per_doc.values())
    if unowned:
        orphans[""] = unowned
    vector_ids = set(vectors.node_ids())
    keyword_ids = set(version.keywords.node_ids())
    return HealthReport(
        theme=theme.name,
        version=version.name,
        files=tuple(files),
        docstore_entries=MappingProxyType(entries),
        chunks_per_document=MappingProxyType(per_doc),
        vector_chunks=vectors.count(),
        keyword_chunks=version.keywords.count(),
        orphan_chunks=MappingProxyType(orphans),
        entries_without_chunks=tuple(sorted(e for e in entries if e not in per_doc)),
        unindexed_files=tuple(f for f in files if f not in entries),
        stale_files=tuple(
            f for f in files if f in entries and f in hashes and hashes[f] != entries[f]
        ),
        vector_only_ids=tuple(sorted(vector_ids - keyword_ids)),
        keyword_only_ids=tuple(sorted(keyword_ids - vector_ids)),
    )
