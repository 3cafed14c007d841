"""The read/hash/classify step every file goes through, for ``ingest_files`` and for the
synchronisation of ``documents/`` alike.

Whether a file changed is decided here, before chunking, by the sha256 of its bytes against
the docstore's hash: parsing a PDF costs a child process, so unchanged files are never parsed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TypeVar

from llama_index.core import Document
from llama_index.core.storage.docstore import BaseDocumentStore

from themes.chunking import FileStatus, PendingFile, ProgressTracker
from themes.index_storage import IndexWriter
from themes.ingest.inputs import MAX_FILE_BYTES
from themes.ingest.reports import FileResult, IngestReport
from themes.readers import RejectedFile, read_document
from themes.text_stream import STREAMED_FILE_TYPES, TextSource, inspect_text

logger = logging.getLogger(__name__)

Item = TypeVar("Item")


def docstore_hashes(docstore: BaseDocumentStore) -> dict[str, str | None]:
    """Every docstore entry (doc id -> stored hash)."""
    ids = set(docstore.docs) | set(docstore.get_all_document_hashes().values())
    return {doc_id: docstore.get_document_hash(doc_id) for doc_id in sorted(ids)}


def read_content(path: Path, name: str) -> tuple[list[Document] | None, TextSource | None]:
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


def read_if_changed(
    name: str,
    digest: tuple[str, int],
    w: IndexWriter,
    known: Mapping[str, str | None],
    local_path: Callable[[], Path],
    *,
    force: bool = False,
    staged: Path | None = None,
) -> PendingFile | None:
    """The file read and ready to chunk, or ``None`` when the index already holds this exact
    content (and ``force`` does not ask for re-embedding). ``digest`` is the file's (sha256,
    size); ``local_path`` gives a readable copy, asked for only when the file is read.

    "updated" means the index holds an earlier version (a docstore entry or chunks), whose
    chunks the new ones replace; anything else is "ingested". ``RejectedFile`` when unreadable.
    """
    sha, size = digest
    has_chunks = bool(w.vectors.document_node_ids(name))
    if known.get(name) == sha and has_chunks and not force:
        return None
    status: FileStatus = "updated" if name in known or has_chunks else "ingested"
    pages, text = read_content(local_path(), name)
    return PendingFile(name, sha, size, status, pages=pages, text=text, staged=staged)


def read_each(
    items: Iterable[Item],
    tracker: ProgressTracker,
    report: IngestReport,
    read_one: Callable[[Item], PendingFile | FileResult | None],
    shown_name: Callable[[Item], str],
) -> list[PendingFile]:
    """The files to chunk and embed, from ``read_one`` applied to every item.

    ``read_one`` returns a file to embed, a result already settled (unchanged) or ``None``
    (its caller keeps the outcome); a ``RejectedFile`` becomes a "rejected" result under
    ``shown_name(item)`` and never stops the other items. Each item counts as one file done,
    and the loop's time is the "reading" timing.
    """
    pending: list[PendingFile] = []
    started = time.perf_counter()
    for item in items:
        try:
            outcome = read_one(item)
            if isinstance(outcome, PendingFile):
                pending.append(outcome)
            elif outcome is not None:
                report.files.append(outcome)
        except RejectedFile as exc:
            report.files.append(FileResult(shown_name(item), "rejected", reason=exc.reason))
        finally:
            tracker.files_done += 1
    tracker.timings["reading"] = time.perf_counter() - started
    return pending
