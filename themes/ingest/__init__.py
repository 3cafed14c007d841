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

from themes.chunking import (
    CHUNK_MARGIN_TOKENS,
    EMBED_BATCH_SIZE,
    FileDocument,
    FileStatus,
    IngestProgress,
    Stage,
    chunk_parameters,
    token_counter,
)
from themes.ingest.files import ingest_files
from themes.ingest.health import HealthReport, health
from themes.ingest.inputs import MAX_FILE_BYTES
from themes.ingest.removal import clear_index, remove_document
from themes.ingest.reports import FileResult, IngestReport
from themes.ingest.synchronise import reindex, repair, sync_theme
from themes.ingest.writing import IngestBusy

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
    "MAX_FILE_BYTES",
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
