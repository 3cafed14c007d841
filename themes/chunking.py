"""Chunking and embedding, section by section, into an index writer's stores.

Each file waiting to be indexed (:class:`PendingFile`) is given as a stream of sections of
at most ``SECTION_CHARS`` characters (a text file is read from disk as it goes, other
formats' pages are cut in memory, see ``themes.text_stream``). Each section goes through
llama-index's ``SentenceSplitter`` (tokens counted with the embedding model's own
tokenizer); chunks are embedded in batches of ``EMBED_BATCH_SIZE`` (llama-index's embedding
transform) and added to the writer's vector store as they come. Memory therefore holds one
section and one batch, never a whole file's chunks, and a progress event comes with every
batch (issue 11, finding 9: a 50 MB file peaked at 6.3 GB and showed no progress for 85 s).

Why llama-index's ``IngestionPipeline`` is no longer run here: its ``run`` materialises every
node of its input before embedding the first (one list per transformation), which is
exactly the unbounded peak above. The part of it we used, UPSERTS bookkeeping, is three
calls done explicitly at the same point: the file's old chunks and docstore entry are
deleted before its new chunks are added, and the docstore gets the file's
:class:`FileDocument` (id = file name, hash = sha256 of its bytes) once every chunk is in.
All of it happens in the private copies of ``IndexStorage.writer()``; nothing is visible
until the commit publishes a whole new version.

Chunk ids are deterministic: ``"<file>#<sha256 prefix>#<section index>#<chunk index>"``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from llama_index.core import Document
from llama_index.core.callbacks import CallbackManager
from llama_index.core.callbacks.base_handler import BaseCallbackHandler
from llama_index.core.callbacks.schema import CBEventType, EventPayload
from llama_index.core.embeddings import BaseEmbedding
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import BaseNode, MetadataMode, NodeRelationship

from themes.index_storage import IndexWriter
from themes.ingest_estimate import TimeBudget
from themes.readers import RejectedFile, make_document
from themes.text_stream import SECTION_CHARS, TextSource, iter_sections, split_document
from themes.theme import RetrievalSettings

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

Stage = Literal["reading", "chunking", "embedding", "writing"]
FileStatus = Literal["ingested", "updated", "unchanged", "removed", "rejected"]


@dataclass(frozen=True)
class IngestProgress:
    """One progress event; ``files_done``, ``chunks_done`` and ``text_done`` never decrease
    within a call.

    Files are chunked and embedded in sections of at most ``SECTION_CHARS`` characters, so
    events keep coming during a long file. ``chunks_total`` is an estimate (chunks so far
    plus the text left at the rate so far) until everything is chunked, then exact;
    ``text_done`` / ``text_total`` (characters embedded / to embed) is the steady measure of
    progress. ``file_name`` is set while reading.
    """

    stage: Stage
    file_name: str | None
    files_done: int
    files_total: int
    chunks_done: int
    chunks_total: int
    text_done: int = 0
    text_total: int = 0


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


def _chunk_id(index: int, doc: BaseNode) -> str:
    # Deterministic: "<file>#<sha256 prefix>#<section index>#<chunk index>". The same bytes
    # always give the same ids; a changed file gets new ones.
    return f"{doc.node_id}#{index}"


# ------------------------------------------------------------------------------------------
# Progress
# ------------------------------------------------------------------------------------------


class ProgressTracker(BaseCallbackHandler):
    """Progress and timings: reading per file, then one event per section and per batch.

    Listens to llama-index's callbacks: NODE_PARSING brackets the splitter's run on one
    section (and announces it), EMBEDDING each embedding batch (timed, chunks counted).
    """

    def __init__(self, progress: Callable[[IngestProgress], None] | None) -> None:
        super().__init__(event_starts_to_ignore=[], event_ends_to_ignore=[])
        self.progress = progress
        self.files_total = 0
        self.files_done = 0
        self.chunks_done = 0
        self.chunks_chunked = 0
        self.text_total = 0
        self.text_chunked = 0
        self.text_done = 0.0
        self.timings = {"reading": 0.0, "chunking": 0.0, "embedding": 0.0, "writing": 0.0}
        self._started: dict[str, float] = {}

    @property
    def chunks_total(self) -> int:
        """Chunks made so far, plus the text left at the rate so far (exact at the end)."""
        left = self.text_total - self.text_chunked
        if left <= 0 or not self.text_chunked:
            return max(self.chunks_chunked, self.chunks_done)
        return self.chunks_chunked + round(left * self.chunks_chunked / self.text_chunked)

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
                    min(self.text_total, round(self.text_done)),
                    self.text_total,
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
        if event_type == CBEventType.NODE_PARSING:
            self.timings["chunking"] += elapsed
        else:
            self.timings["embedding"] += elapsed
            self.chunks_done += len((payload or {}).get(EventPayload.CHUNKS, ()))

    def start_trace(self, trace_id: str | None = None) -> None:
        return None

    def end_trace(
        self, trace_id: str | None = None, trace_map: dict[str, list[str]] | None = None
    ) -> None:
        return None


# ------------------------------------------------------------------------------------------
# Files waiting to be indexed
# ------------------------------------------------------------------------------------------


@dataclass
class PendingFile:
    """A file read successfully (or, for plain text, checked) and waiting to be indexed.

    Exactly one of ``pages`` (read in memory: PDF, DOCX, HTML) and ``text`` (streamed from
    disk: .txt, .md) is set.
    """

    name: str
    sha256: str
    size: int
    status: FileStatus
    pages: list[Document] | None = None
    text: TextSource | None = None
    staged: Path | None = None  # ingest_files: the copy to move into documents/
    removed_chunks: int = 0

    @property
    def chars(self) -> int:
        if self.text is not None:
            return self.text.chars
        return sum(len(page.text) for page in self.pages or ())

    @property
    def warning(self) -> str | None:
        if self.text is not None:
            return self.text.warning
        notes = sorted(
            {
                str(p.metadata["encoding_note"])
                for p in self.pages or ()
                if p.metadata.get("encoding_note")
            }
        )
        return notes[0] if notes else None

    def sections(self) -> Iterator[Document]:
        if self.text is not None:
            yield from iter_sections(self.text, SECTION_CHARS)
        else:
            for page in self.pages or ():
                yield from split_document(page, SECTION_CHARS)

    def metadata_samples(self) -> list[Document]:
        """Documents carrying every metadata the file's chunks will repeat."""
        if self.text is not None:
            source = self.text
            return [make_document("-", file_name=source.name, file_type=source.file_type)]
        return list(self.pages or ())


def _file_document(
    item: PendingFile, chunk_size: int, count: Callable[[str], list[Any]]
) -> FileDocument:
    """The file's docstore entry, after checking its metadata leaves room for text.

    Raises RejectedFile when the metadata every chunk repeats leaves no room for text (the
    splitter would fail, and with it the whole batch).
    """
    samples = item.metadata_samples()
    for page in samples:
        title = page.metadata.get("title")
        if isinstance(title, str) and len(title) > MAX_TITLE_CHARS:
            page.metadata["title"] = title[: MAX_TITLE_CHARS - 1] + "…"
        for mode in (MetadataMode.EMBED, MetadataMode.LLM):
            if len(count(page.get_metadata_str(mode))) > chunk_size // 2:
                raise RejectedFile(
                    item.name,
                    "file name or title too long for the chunk size, not ingested "
                    "(rename the file or shorten its title)",
                )
    return FileDocument(
        id_=item.name,
        text="",
        metadata={
            "file_name": item.name,
            "sha256": item.sha256,
            "size": item.size,
            "file_type": samples[0].metadata.get("file_type") if samples else None,
            "documents": len(item.pages) if item.pages is not None else 1,
        },
    )


# ------------------------------------------------------------------------------------------
# The stream
# ------------------------------------------------------------------------------------------


@dataclass
class Refusal:
    name: str
    reason: str


def embed_pending(
    w: IndexWriter,
    embed_model: BaseEmbedding,
    settings: RetrievalSettings,
    pending: Sequence[PendingFile],
    tracker: ProgressTracker,
    budget: TimeBudget,
    *,
    theme_name: str,
) -> tuple[list[PendingFile], list[Refusal]]:
    """Chunk and embed the pending files into the writer's stores, section by section.

    Files whose metadata leaves no room for text, or that do not fit the time ``budget``,
    are refused before anything changes for them. Returns (files indexed, refusals).
    """
    if not pending:
        return [], []
    chunk_size, overlap = chunk_parameters(settings, embed_model)
    count = token_counter(embed_model)
    indexed: list[tuple[PendingFile, FileDocument]] = []
    refused: list[Refusal] = []
    for item in pending:
        try:
            file_doc = _file_document(item, chunk_size, count)
            budget.admit(item.name, item.chars)
        except RejectedFile as exc:
            refused.append(Refusal(item.name, exc.reason))
            continue
        indexed.append((item, file_doc))
    if not indexed:
        return [], refused
    _check_model(w, embed_model, theme_name)
    for item, _doc in indexed:
        # The file's previous chunks and entry go first: a document never has two sets.
        item.removed_chunks += len(w.vectors.delete_document(item.name))
        w.docstore.delete_ref_doc(item.name, raise_error=False)
        w.docstore.delete_document(item.name, raise_error=False)
    tracker.text_total = sum(item.chars for item, _doc in indexed)
    _stream(w, indexed, _Transforms(embed_model, chunk_size, overlap, count, tracker), tracker)
    docs = [doc for _item, doc in indexed]
    w.docstore.set_document_hashes({doc.id_: doc.hash for doc in docs})
    w.docstore.add_documents(docs, store_text=True)
    return [item for item, _doc in indexed], refused


def _check_model(w: IndexWriter, embed_model: BaseEmbedding, theme_name: str) -> None:
    model_name = embed_model.model_name
    stored_name = w.vectors.embed_model_name
    if w.vectors.count() == 0 or stored_name is None:
        w.vectors.embed_model_name = model_name
    elif model_name not in (stored_name, "unknown"):
        raise ValueError(
            f"theme {theme_name!r} was indexed with {stored_name!r}, not {model_name!r}: "
            "clear its index (clear_index) and update it to re-embed every document"
        )


class _Transforms:
    """The splitter and the embedding step, both reporting to the tracker."""

    def __init__(
        self,
        embed_model: BaseEmbedding,
        chunk_size: int,
        overlap: int,
        count: Callable[[str], list[Any]],
        tracker: ProgressTracker,
    ) -> None:
        callbacks = CallbackManager([tracker])
        self.splitter = SentenceSplitter(
            chunk_size=chunk_size,
            chunk_overlap=overlap,
            tokenizer=count,
            callback_manager=callbacks,
            id_func=_chunk_id,
        )
        # A copy, so the shared (cached) model keeps its own batch size and callbacks.
        self.embedder = embed_model.model_copy(
            update={
                "embed_batch_size": max(1, min(EMBED_BATCH_SIZE, embed_model.embed_batch_size)),
                "callback_manager": callbacks,
            }
        )


def _stream(
    w: IndexWriter,
    indexed: list[tuple[PendingFile, FileDocument]],
    transforms: _Transforms,
    tracker: ProgressTracker,
) -> None:
    """Split every section, embed the chunks by batches, add them to the vector store."""
    batch: list[BaseNode] = []
    shares: list[float] = []  # characters of text each chunk stands for (progress)

    def flush() -> None:
        if batch:
            w.vectors.add(transforms.embedder(batch))
            tracker.text_done += sum(shares)
            batch.clear()
            shares.clear()
            tracker.emit("embedding")

    for item, file_doc in indexed:
        source = file_doc.as_related_node_info()
        for index, section in enumerate(item.sections()):
            title = section.metadata.get("title")
            if isinstance(title, str) and len(title) > MAX_TITLE_CHARS:
                section.metadata["title"] = title[: MAX_TITLE_CHARS - 1] + "…"
            section.id_ = f"{item.name}#{item.sha256[:16]}#{index}"
            section.relationships[NodeRelationship.SOURCE] = source
            nodes = transforms.splitter([section])
            tracker.text_chunked += len(section.text)
            tracker.chunks_chunked += len(nodes)
            if nodes:
                shares.extend([len(section.text) / len(nodes)] * len(nodes))
                batch.extend(nodes)
            else:
                tracker.text_done += len(section.text)
            if len(batch) >= EMBED_BATCH_SIZE:
                flush()
    flush()
