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

Why llama-index's ``IngestionPipeline`` is used *with* the docstore and the
UPSERTS strategy (rather than for the transformations only): the pipeline's
input is one :class:`FileDocument` per file, whose id is the stored file name
and whose ``hash`` is the sha256 of the file's bytes. UPSERTS then does exactly
what a versioned store needs: a document whose hash changed has its old chunks
deleted from the writer's vector store (``vector_store.delete(ref_doc_id)``)
before the new ones are added, and the new hash is written into the writer's
docstore; both are the private copies of ``IndexStorage.writer()``, so nothing
is visible until the commit publishes a whole new version. The transformations
are: ``_ExpandFilePages`` (FileDocument -> the page Documents already read from
that file, each with the FileDocument as SOURCE, which llama-index's node parser
propagates, so every chunk's ``ref_doc_id`` is the file name and
``delete_document`` removes all of its chunks), a ``SentenceSplitter`` counting
tokens with the embedding model's own tokenizer, then the embedding model.
Two things the pipeline cannot do are done here: decide *before parsing*
whether a file changed (parsing a PDF costs a child process, so unchanged files
are never given to the pipeline), and delete documents that disappeared
(UPSERTS_AND_DELETE would need every file parsed). Chunks left without a
docstore entry (which UPSERTS would not see) are deleted explicitly before a
file is indexed, so a document never has two sets of chunks.

Locking: every public writer here takes ``IndexStorage.writer()`` first and
does everything inside it; a concurrent one raises :class:`IngestBusy` (a
``ThemeBusy``) before touching anything.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import stat
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from llama_index.core import Document
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.callbacks import CallbackManager
from llama_index.core.callbacks.base_handler import BaseCallbackHandler
from llama_index.core.callbacks.schema import CBEventType, EventPayload
from llama_index.core.embeddings import BaseEmbedding
from llama_index.core.ingestion import DocstoreStrategy, IngestionPipeline
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import BaseNode, MetadataMode, NodeRelationship, TransformComponent
from llama_index.core.storage.docstore import BaseDocumentStore, SimpleDocumentStore

from themes.index_storage import IndexStorage, IndexWriter, ThemeBusy, fsync_path
from themes.readers import SUPPORTED_EXTENSIONS, RejectedFile, read_document, safe_file_name
from themes.theme import RetrievalSettings, Theme

logger = logging.getLogger(__name__)

MAX_FILE_BYTES = 50 * 2**20
# Tokens kept free below the model's limit: [CLS]/[SEP] plus slack for the splitter, which
# sums the token counts of separately tokenised pieces (joining them can differ by a token).
CHUNK_MARGIN_TOKENS = 16
# When the embedding model does not say how many tokens it reads.
DEFAULT_MODEL_MAX_TOKENS = 512
# Chunks per embedding call: one progress event each. Large enough that the backend still
# batches efficiently (SentenceTransformer sorts by length within a call), small enough
# that the admin sees progress every few seconds on a CPU.
EMBED_BATCH_SIZE = 128
# Shown metadata (title) longer than this is cut: it is repeated in every chunk.
MAX_TITLE_CHARS = 200
STAGING_DIR = ".ingest-staging"
_BACKUP_DIR = "replaced"

Stage = Literal["reading", "chunking", "embedding", "writing"]
FileStatus = Literal["ingested", "updated", "unchanged", "removed", "rejected"]
_SUPPORTED = frozenset(SUPPORTED_EXTENSIONS)


# ------------------------------------------------------------------------------------------
# Public data types
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class IngestProgress:
    """One progress event; ``files_done`` and ``chunks_done`` never decrease within a call.

    ``chunks_total`` is 0 until chunking is finished. ``file_name`` is set while reading.
    """

    stage: Stage
    file_name: str | None
    files_done: int
    files_total: int
    chunks_done: int
    chunks_total: int


@dataclass(frozen=True)
class FileResult:
    """What happened to one file.

    ``chunks``: the file's chunks in the index after the call; ``removed_chunks``: chunks
    deleted by the call (the previous version of an updated file, or a removed file).
    """

    file_name: str
    status: FileStatus
    chunks: int = 0
    removed_chunks: int = 0
    reason: str | None = None


@dataclass
class IngestReport:
    """Outcome of one ingest/sync/remove/repair call.

    ``version`` is the index version published by the call, or ``None`` when nothing in
    the index changed (no version is written then). ``timings`` holds seconds spent
    "reading", "chunking", "embedding", "writing" and in "total".
    """

    theme: str
    files: list[FileResult] = field(default_factory=list)
    version: str | None = None
    chunks_embedded: int = 0
    timings: dict[str, float] = field(default_factory=dict)

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
        version = f"index version {self.version}" if self.version else "index unchanged"
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


class FileDocument(Document):
    """The docstore entry of one stored file: id = file name, ``hash`` = sha256 of its bytes.

    Its text is empty: the chunks hold the text, the entry only says which version of the
    file they were made from.
    """

    @property
    def hash(self) -> str:
        return str(self.metadata["sha256"])


# ------------------------------------------------------------------------------------------
# Chunking parameters
# ------------------------------------------------------------------------------------------

_WORDISH = re.compile(r"\w+|[^\w\s]")


def _fallback_count(text: str) -> list[str]:
    # Words and punctuation marks: closer to sub-word token counts than str.split, and
    # needs no tokenizer download (llama-index's default is tiktoken, fetched online).
    return _WORDISH.findall(text)


_COUNTERS: dict[int, tuple[Any, Callable[[str], list[Any]]]] = {}


def token_counter(embed_model: BaseEmbedding) -> Callable[[str], list[Any]]:
    """``text -> tokens`` with the embedding model's own tokenizer (special tokens excluded).

    For a SentenceTransformer backend (``embed_model.wrapper.embedding.tokenizer``) a
    private copy of the fast tokenizer is used, without truncation: the shared one keeps
    truncation/padding state between calls and is not safe to use from two threads.
    Other models: a tokenizer-free count of words and punctuation.
    """
    wrapper = getattr(embed_model, "wrapper", None)
    backend = getattr(wrapper, "embedding", None)
    tokenizer = getattr(backend, "tokenizer", None)
    if tokenizer is None:
        return _fallback_count
    cached = _COUNTERS.get(id(tokenizer))
    if cached is not None and cached[0] is tokenizer:
        return cached[1]
    counter: Callable[[str], list[Any]]
    fast = getattr(tokenizer, "backend_tokenizer", None)
    if fast is not None:
        from tokenizers import Tokenizer

        private = Tokenizer.from_str(fast.to_str())
        private.no_truncation()
        private.no_padding()

        def counter(text: str) -> list[Any]:
            return list(private.encode(text, add_special_tokens=False).ids)

    elif callable(getattr(tokenizer, "encode", None)):

        def counter(text: str) -> list[Any]:
            return list(tokenizer.encode(text, add_special_tokens=False, verbose=False))

    else:
        return _fallback_count
    _COUNTERS[id(tokenizer)] = (tokenizer, counter)
    return counter


def chunk_parameters(settings: RetrievalSettings, embed_model: BaseEmbedding) -> tuple[int, int]:
    """``(chunk_size, chunk_overlap)`` in tokens for this theme and model.

    The chunk (metadata shown to the embedding included) must fit the model's
    ``max_seq_length`` or the model silently truncates it: the default is that limit
    minus ``CHUNK_MARGIN_TOKENS``, and ``settings.chunk_tokens`` may only make it smaller.
    The overlap is capped at half a chunk so every chunk still advances.
    """
    limit = getattr(embed_model, "max_seq_length", None) or DEFAULT_MODEL_MAX_TOKENS
    size = max(16, int(limit) - CHUNK_MARGIN_TOKENS)
    if settings.chunk_tokens is not None:
        size = min(size, settings.chunk_tokens)
    return size, min(settings.chunk_overlap, size // 2)


# ------------------------------------------------------------------------------------------
# Pipeline components
# ------------------------------------------------------------------------------------------


class _ExpandFilePages(TransformComponent):
    """Pipeline step 1: each FileDocument -> the page Documents read from that file."""

    _pages: dict[str, list[Document]] = PrivateAttr(default_factory=dict)

    def __init__(self, pages: dict[str, list[Document]]) -> None:
        super().__init__()
        self._pages = pages

    def __call__(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        out: list[BaseNode] = []
        for node in nodes:
            out.extend(self._pages[node.node_id])
        return out


def _chunk_id(index: int, doc: BaseNode) -> str:
    # Deterministic: "<file>#<sha256 prefix>#<page index>#<chunk index>". The same bytes
    # always give the same ids; a changed file gets new ones.
    return f"{doc.node_id}#{index}"


class _Tracker(BaseCallbackHandler):
    """Progress and timings: reading per file, then llama-index callback events.

    NODE_PARSING brackets the splitter's whole run, EMBEDDING each embedding batch.
    """

    def __init__(self, progress: Callable[[IngestProgress], None] | None) -> None:
        super().__init__(event_starts_to_ignore=[], event_ends_to_ignore=[])
        self.progress = progress
        self.files_total = 0
        self.files_done = 0
        self.chunks_total = 0
        self.chunks_done = 0
        self.timings = {"reading": 0.0, "chunking": 0.0, "embedding": 0.0, "writing": 0.0}
        self._started: dict[str, float] = {}

    def emit(self, stage: Stage, file_name: str | None = None) -> None:
        if self.progress is not None:
            self.progress(
                IngestProgress(
                    stage,
                    file_name,
                    self.files_done,
                    self.files_total,
                    self.chunks_done,
                    self.chunks_total,
                )
            )

    def on_event_start(
        self,
        event_type: CBEventType,
        payload: dict[str, Any] | None = None,
        event_id: str = "",
        parent_id: str = "",
        **kwargs: Any,
    ) -> str:
        if event_type in (CBEventType.NODE_PARSING, CBEventType.EMBEDDING):
            self._started[event_id] = time.perf_counter()
            if event_type == CBEventType.NODE_PARSING:
                self.emit("chunking")
        return event_id

    def on_event_end(
        self,
        event_type: CBEventType,
        payload: dict[str, Any] | None = None,
        event_id: str = "",
        **kwargs: Any,
    ) -> None:
        if event_type not in (CBEventType.NODE_PARSING, CBEventType.EMBEDDING):
            return
        elapsed = time.perf_counter() - self._started.pop(event_id, time.perf_counter())
        payload = payload or {}
        if event_type == CBEventType.NODE_PARSING:
            self.timings["chunking"] += elapsed
            self.chunks_total += len(payload.get(EventPayload.NODES, ()))
            self.emit("embedding")
        else:
            self.timings["embedding"] += elapsed
            self.chunks_done += len(payload.get(EventPayload.CHUNKS, ()))
            self.emit("embedding")

    def start_trace(self, trace_id: str | None = None) -> None:
        return None

    def end_trace(
        self, trace_id: str | None = None, trace_map: dict[str, list[str]] | None = None
    ) -> None:
        return None


# ------------------------------------------------------------------------------------------
# Files
# ------------------------------------------------------------------------------------------


@dataclass
class _Pending:
    """A file read successfully and waiting to be chunked and embedded."""

    name: str
    sha256: str
    size: int
    pages: list[Document]
    status: FileStatus
    staged: Path | None = None  # ingest_files: the copy to move into documents/
    removed_chunks: int = 0


@dataclass
class _Moves:
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


def _is_hidden(name: str) -> bool:
    return name.startswith(".")


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


def _open_regular(path: Path, name: str) -> tuple[int, os.stat_result]:
    """Open a regular file without following links (or hanging on a FIFO)."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise RejectedFile(name, "file not found, not ingested") from None
    except OSError:
        raise RejectedFile(name, "file not readable (or a link), not ingested") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise RejectedFile(name, "not a regular file (a folder or device?), not ingested")
    return fd, info


def _too_large(name: str, size: int) -> RejectedFile:
    return RejectedFile(
        name,
        f"file too large ({size / 2**20:.1f} MB, limit {MAX_FILE_BYTES / 2**20:.1f} MB), "
        "not ingested (split it into smaller files)",
    )


def _copy_hashing(source: Path, target: Path, name: str) -> tuple[str, int]:
    """Copy ``source`` to a new file ``target`` (fsynced); return (sha256, size)."""
    fd, info = _open_regular(source, name)
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


def _hash_file(path: Path, name: str) -> tuple[str, int]:
    fd, _info = _open_regular(path, name)
    digest = hashlib.sha256()
    size = 0
    with os.fdopen(fd, "rb") as src:
        while block := src.read(1 << 20):
            size += len(block)
            digest.update(block)
    return digest.hexdigest(), size


def _read_pages(path: Path, name: str) -> list[Document]:
    """read_document, with any unexpected failure turned into a refusal of this file only."""
    try:
        return read_document(path, max_bytes=MAX_FILE_BYTES)
    except RejectedFile:
        raise
    except Exception as exc:  # noqa: BLE001 - a reader bug must not stop the other files
        logger.exception("unexpected error while reading %s", path)
        raise RejectedFile(
            name, f"could not be read ({type(exc).__name__}: {exc}), not ingested"
        ) from None


def _document_entries(theme: Theme) -> list[os.DirEntry[str]]:
    """Visible entries of documents/ (our staging folder and other hidden names skipped)."""
    if not theme.documents_dir.is_dir():
        return []
    with os.scandir(theme.documents_dir) as it:
        return sorted((e for e in it if not _is_hidden(e.name)), key=lambda e: e.name)


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


def _prepare_pages(
    pending: _Pending, chunk_size: int, count: Callable[[str], list[Any]]
) -> FileDocument:
    """Link the page Documents to their FileDocument and give them stable ids.

    Raises RejectedFile when the metadata every chunk repeats leaves no room for text (the
    splitter would fail, and with it the whole batch).
    """
    sha = pending.sha256
    file_doc = FileDocument(
        id_=pending.name,
        text="",
        metadata={
            "file_name": pending.name,
            "sha256": sha,
            "size": pending.size,
            "file_type": pending.pages[0].metadata.get("file_type") if pending.pages else None,
            "documents": len(pending.pages),
        },
    )
    source = file_doc.as_related_node_info()
    for index, page in enumerate(pending.pages):
        title = page.metadata.get("title")
        if isinstance(title, str) and len(title) > MAX_TITLE_CHARS:
            page.metadata["title"] = title[: MAX_TITLE_CHARS - 1] + "…"
        for mode in (MetadataMode.EMBED, MetadataMode.LLM):
            if len(count(page.get_metadata_str(mode))) > chunk_size // 2:
                raise RejectedFile(
                    pending.name,
                    "file name or title too long for the chunk size, not ingested "
                    "(rename the file or shorten its title)",
                )
        page.id_ = f"{pending.name}#{sha[:16]}#{index}"
        page.relationships[NodeRelationship.SOURCE] = source
    return file_doc


def _embed_pending(
    w: IndexWriter,
    theme: Theme,
    embed_model: BaseEmbedding,
    pending: list[_Pending],
    tracker: _Tracker,
    results: list[FileResult],
) -> list[_Pending]:
    """Chunk and embed the pending files into the writer's stores (one pipeline run).

    Files whose metadata cannot be chunked are refused (added to ``results``); returns the
    files actually indexed.
    """
    if not pending:
        return []
    chunk_size, overlap = chunk_parameters(theme.settings.retrieval, embed_model)
    count = token_counter(embed_model)
    file_docs: list[Document] = []
    pages: dict[str, list[Document]] = {}
    indexed: list[_Pending] = []
    for item in pending:
        try:
            file_doc = _prepare_pages(item, chunk_size, count)
        except RejectedFile as exc:
            results.append(FileResult(item.name, "rejected", reason=exc.reason))
            continue
        file_docs.append(file_doc)
        pages[item.name] = item.pages
        indexed.append(item)
    if not indexed:
        return []

    model_name = embed_model.model_name
    stored_name = w.vectors.embed_model_name
    if w.vectors.count() == 0 or stored_name is None:
        w.vectors.embed_model_name = model_name
    elif model_name not in (stored_name, "unknown"):
        raise ValueError(
            f"theme {theme.name!r} was indexed with {stored_name!r}, not {model_name!r}: "
            "clear its index (clear_index) and update it to re-embed every document"
        )

    for item in indexed:
        stored = w.docstore.get_document_hash(item.name)
        if stored is None or stored == item.sha256:
            # UPSERTS replaces only a document whose stored hash differs. Chunks without a
            # docstore entry (a hand edit, a crash) would be duplicated, and an entry with
            # the same hash but no chunks would make it skip the file: clear both first.
            w.docstore.delete_document(item.name, raise_error=False)
            item.removed_chunks += len(w.vectors.delete_document(item.name))
        else:
            item.removed_chunks += len(w.vectors.document_node_ids(item.name))

    callbacks = CallbackManager([tracker])
    splitter = SentenceSplitter(
        chunk_size=chunk_size,
        chunk_overlap=overlap,
        tokenizer=count,
        callback_manager=callbacks,
        id_func=_chunk_id,
    )
    # A copy, so the shared (cached) model keeps its own batch size and callbacks.
    embedder = embed_model.model_copy(
        update={
            "embed_batch_size": max(1, min(EMBED_BATCH_SIZE, embed_model.embed_batch_size)),
            "callback_manager": callbacks,
        }
    )
    pipeline = IngestionPipeline(
        name=f"chatitego-{theme.name}",
        transformations=[_ExpandFilePages(pages), splitter, embedder],
        docstore=w.docstore,
        vector_store=w.vectors,
        docstore_strategy=DocstoreStrategy.UPSERTS,
        disable_cache=True,  # the cache would hash and keep every node, for nothing
    )
    pipeline.run(documents=file_docs)
    return indexed


@contextmanager
def _writing(theme: Theme, lock_timeout: float) -> Iterator[tuple[IndexWriter, _Moves, Path]]:
    """The theme's writer plus a fresh staging folder; undoes documents/ moves on failure."""
    storage = IndexStorage(theme.directory)
    moves: _Moves | None = None
    staging = theme.documents_dir / STAGING_DIR
    try:
        with storage.writer(lock_timeout=lock_timeout) as w:
            theme.documents_dir.mkdir(parents=True, exist_ok=True)
            # Left by a crashed writer; we hold the lock, so nobody else uses it.
            shutil.rmtree(staging, ignore_errors=True)
            (staging / _BACKUP_DIR).mkdir(parents=True)
            moves = _Moves(theme.documents_dir, staging / _BACKUP_DIR)
            yield w, moves, staging
            if moves.done:
                # documents/ is durable before the commit publishes an index that needs it.
                fsync_path(theme.documents_dir)
    except BaseException as exc:
        if moves is None:
            if isinstance(exc, ThemeBusy):
                raise IngestBusy(theme, lock_timeout) from exc
            raise
        moves.rollback()
        raise
    finally:
        if moves is not None:
            shutil.rmtree(staging, ignore_errors=True)


def _finish(
    report: IngestReport,
    w: IndexWriter,
    tracker: _Tracker,
    indexed: list[_Pending],
    changed: bool,
) -> None:
    """Record the indexed files, and publish (or not) the version."""
    for item in indexed:
        report.files.append(
            FileResult(
                item.name,
                item.status,
                chunks=len(w.vectors.document_node_ids(item.name)),
                removed_chunks=item.removed_chunks,
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
) -> IngestReport:
    """Store and index files (folders are walked, hidden entries skipped).

    Each file is ``ingested`` (new name), ``updated`` (same name, new content: its old
    chunks are replaced), ``unchanged`` (same content: nothing embedded) or ``rejected``
    with a reason (link, hidden, unsupported type, too large, unreadable, or a second file
    of the batch with the same safe name); a rejected file changes nothing, not even a
    previous version stored under its name. Raises :class:`IngestBusy` when another writer
    holds the theme (nothing changed then); an exception raised by ``progress`` cancels
    the call with nothing changed.
    """
    started = time.perf_counter()
    report = IngestReport(theme.name)
    tracker = _Tracker(progress)
    files = _expand_inputs(paths)
    tracker.files_total = len(files)
    with _writing(theme, lock_timeout) as (w, moves, staging):
        known = _docstore_hashes(w.docstore)
        seen: set[str] = set()
        pending: list[_Pending] = []
        unchanged: list[tuple[str, Path]] = []
        read_started = time.perf_counter()
        for path in files:
            display = path.name
            try:
                name = safe_file_name(path.name)
                display = name
                tracker.emit("reading", name)
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
                    raise RejectedFile(
                        name, "another file of this batch has the same name, not ingested"
                    )
                target = theme.documents_dir / name
                if target.parent != theme.documents_dir or name in (".", ".."):
                    raise RejectedFile(name, "unusable file name, not ingested")
                seen.add(name)
                staged = staging / name
                sha, size = _copy_hashing(path, staged, name)
                if known.get(name) == sha and w.vectors.document_node_ids(name):
                    unchanged.append((name, staged))
                    continue
                pages = _read_pages(staged, name)
                status: FileStatus = "updated" if name in known else "ingested"
                pending.append(_Pending(name, sha, size, pages, status, staged=staged))
            except RejectedFile as exc:
                report.files.append(FileResult(display, "rejected", reason=exc.reason))
            finally:
                tracker.files_done += 1
        tracker.timings["reading"] = time.perf_counter() - read_started

        indexed = _embed_pending(w, theme, embed_model, pending, tracker, report.files)
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
        _finish(report, w, tracker, indexed, changed=bool(indexed))
    tracker.timings["writing"] = time.perf_counter() - writing_started
    report.version = w.committed_version
    report.timings = {**tracker.timings, "total": time.perf_counter() - started}
    return report


def sync_theme(
    theme: Theme,
    embed_model: BaseEmbedding,
    *,
    progress: Callable[[IngestProgress], None] | None = None,
    lock_timeout: float = 2.0,
) -> IngestReport:
    """Bring the index in line with ``documents/`` (the CLI's "update").

    New files are ingested, files whose sha256 differs from the docstore's are re-embedded
    (their old chunks replaced), and documents whose file is gone are removed from the
    vectors, the docstore and (at commit) the keyword index. A file that cannot be read is
    reported ``rejected`` and its previously indexed version is kept.
    """
    return _synchronise(theme, embed_model, progress, lock_timeout, repair_mode=False)


def repair(
    theme: Theme,
    embed_model: BaseEmbedding,
    *,
    progress: Callable[[IngestProgress], None] | None = None,
    lock_timeout: float = 2.0,
) -> IngestReport:
    """Fix every orphan ``health`` reports, in one write.

    Chunks of a document with no file (or without any document) are deleted, docstore
    entries without chunks are dropped so their file is indexed again, files not indexed
    are indexed, and a new version is published even when only the keyword index disagreed
    with the vectors (the commit rebuilds it from them).
    """
    return _synchronise(theme, embed_model, progress, lock_timeout, repair_mode=True)


def reindex(
    theme: Theme,
    embed_model: BaseEmbedding,
    names: Collection[str] | None = None,
    *,
    progress: Callable[[IngestProgress], None] | None = None,
    lock_timeout: float = 2.0,
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
        repair_mode=False,
        force=lambda name: wanted is None or name in wanted,
    )


def _synchronise(
    theme: Theme,
    embed_model: BaseEmbedding,
    progress: Callable[[IngestProgress], None] | None,
    lock_timeout: float,
    *,
    repair_mode: bool,
    force: Callable[[str], bool] = lambda name: False,
) -> IngestReport:
    started = time.perf_counter()
    report = IngestReport(theme.name)
    tracker = _Tracker(progress)
    with _writing(theme, lock_timeout) as (w, _moves, _staging):
        entries = _document_entries(theme)
        tracker.files_total = len(entries)
        known = _docstore_hashes(w.docstore)
        changed = False
        if repair_mode:
            unowned = _unowned_node_ids(w)
            if unowned:
                w.vectors.delete_nodes(unowned)
                changed = True
            if set(w.keywords.node_ids()) != set(w.vectors.node_ids()):
                changed = True  # the commit re-derives the keyword index from the vectors

        pending: list[_Pending] = []
        present: set[str] = set()
        read_started = time.perf_counter()
        for entry in entries:
            name = entry.name
            present.add(name)
            tracker.emit("reading", name)
            try:
                if entry.is_symlink():
                    raise RejectedFile(name, "symbolic link in documents/, not indexed")
                if entry.is_dir():
                    raise RejectedFile(name, "folder in documents/, not indexed")
                try:
                    safe = safe_file_name(name)
                except RejectedFile:
                    safe = ""
                if safe != name:
                    raise RejectedFile(name, "unsafe file name, not indexed (rename the file)")
                path = Path(entry.path)
                sha, size = _hash_file(path, name)
                old = known.get(name)
                has_chunks = bool(w.vectors.document_node_ids(name))
                if old == sha and has_chunks and not force(name):
                    report.files.append(
                        FileResult(name, "unchanged", chunks=len(w.vectors.document_node_ids(name)))
                    )
                    continue
                pages = _read_pages(path, name)
                status: FileStatus = "updated" if old is not None or has_chunks else "ingested"
                pending.append(_Pending(name, sha, size, pages, status))
            except RejectedFile as exc:
                report.files.append(FileResult(name, "rejected", reason=exc.reason))
            finally:
                tracker.files_done += 1
        tracker.timings["reading"] = time.perf_counter() - read_started

        indexed = _embed_pending(w, theme, embed_model, pending, tracker, report.files)
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
    if safe != file_name or _is_hidden(file_name):
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
        path = theme.documents_dir / file_name
        on_disk = path.exists() or path.is_symlink()
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

    Returns the new version's name.
    """
    with _writing(theme, lock_timeout) as (w, _moves, _staging):
        w.vectors.clear()
        w.docstore = SimpleDocumentStore()
    return w.committed_version


def health(theme: Theme, *, check_hashes: bool = True) -> HealthReport:
    """Compare the published index with documents/ (no lock needed, nothing written).

    With ``check_hashes`` every file is hashed to find the ones changed since indexing.
    """
    version = theme.storage.load_current()
    files: list[str] = []
    hashes: dict[str, str] = {}
    for entry in _document_entries(theme):
        if entry.is_symlink() or not entry.is_file():
            continue
        files.append(entry.name)
        if check_hashes:
            try:
                hashes[entry.name] = _hash_file(Path(entry.path), entry.name)[0]
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
