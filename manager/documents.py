"""What the admin sees of a theme's documents: the table rows and the chunk pages.

Rows join three sources: ``health`` (files in ``documents/``, docstore entries, chunks per
document, stale and orphan files), the docstore's per-file metadata written at ingestion
(sha256, size, pages) and the manager's ledger (when each file was last ingested through
the page). Nothing here writes the index.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import filelock

from themes.atomic_write import atomic_write
from themes.index_storage import IndexVersion
from themes.ingest import FileResult, HealthReport
from themes.theme import Theme

LEDGER_FILE = "manager_ledger.json"
_LEDGER_LOCK = ".manager_ledger.lock"
CHUNKS_PER_PAGE = 10

DocumentStatus = Literal["indexed", "modified", "not_indexed", "orphan", "no_chunks"]


@dataclass(frozen=True)
class DocumentRow:
    """One line of the documents table."""

    name: str
    size_bytes: int | None
    pages: int | None
    chunks: int
    sha256: str | None
    ingested_at: str | None
    status: DocumentStatus

    @property
    def short_hash(self) -> str:
        return self.sha256[:12] if self.sha256 else ""


def _docstore_metadata(version: IndexVersion) -> dict[str, Mapping[str, Any]]:
    out: dict[str, Mapping[str, Any]] = {}
    for doc_id, doc in version.docstore.docs.items():
        out[doc_id] = dict(getattr(doc, "metadata", {}) or {})
    return out


def _status(name: str, report: HealthReport, on_disk: bool) -> DocumentStatus:
    if not on_disk:
        return "orphan"
    if name in report.unindexed_files:
        return "not_indexed"
    if name in report.entries_without_chunks:
        return "no_chunks"
    if name in report.stale_files:
        return "modified"
    return "indexed"


def document_rows(theme: Theme, version: IndexVersion, report: HealthReport) -> list[DocumentRow]:
    """The documents table: every stored file and every indexed document, by name.

    ``report`` is ``themes.ingest.health(theme)`` for the same version.
    """
    meta = _docstore_metadata(version)
    ledger = read_ledger(theme)
    stored = {entry.name: entry for entry in theme.documents.entries() if entry.kind == "file"}
    files = set(report.files)
    names = sorted(files | set(report.chunks_per_document) | set(report.docstore_entries))
    rows = []
    for name in names:
        m = meta.get(name, {})
        size = m.get("size")
        entry = stored.get(name)
        if entry is not None and entry.size is not None:
            size = entry.size
        pages = m.get("documents")
        sha = report.docstore_entries.get(name) or m.get("sha256")
        rows.append(
            DocumentRow(
                name=name,
                size_bytes=int(size) if isinstance(size, int) else None,
                pages=int(pages) if isinstance(pages, int) else None,
                chunks=report.chunks_per_document.get(name, 0),
                sha256=sha if isinstance(sha, str) else None,
                ingested_at=ledger.get(name) or (entry.modified_at if entry else None),
                status=_status(name, report, name in files),
            )
        )
    return rows


def human_size(size: int | None) -> str:
    if size is None:
        return ""
    if size < 1024:
        return f"{size} B"
    if size < 2**20:
        return f"{size / 1024:.1f} KB"
    return f"{size / 2**20:.1f} MB"


# ------------------------------------------------------------------------------- ledger


def read_ledger(theme: Theme) -> dict[str, str]:
    """File name -> when it was last ingested or updated through the manager (ISO UTC)."""
    path = theme.directory / LEDGER_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(k): str(v) for k, v in data.items() if isinstance(v, str)}


def record_results(theme: Theme, results: Iterable[FileResult], *, now: str | None = None) -> None:
    """Stamp ingested/updated files, forget removed ones (atomic write, under a lock)."""
    stamp = now or datetime.now(UTC).isoformat(timespec="seconds")
    with filelock.FileLock(str(theme.directory / _LEDGER_LOCK), timeout=10):
        ledger = read_ledger(theme)
        for r in results:
            if r.status in ("ingested", "updated"):
                ledger[r.file_name] = stamp
            elif r.status == "removed":
                ledger.pop(r.file_name, None)
        atomic_write_json(theme.directory / LEDGER_FILE, ledger)


def atomic_write_json(path: Path, data: Any) -> None:
    """Write-temp, fsync, rename, fsync the folder: readers see the old file or the new one,
    never half."""
    atomic_write(path, json.dumps(data, ensure_ascii=False, indent=2))


# ------------------------------------------------------------------------------- chunks


@dataclass(frozen=True)
class ChunkView:
    """One chunk as the chunk viewer shows it."""

    node_id: str
    position: int  # 1-based position among the document's chunks
    page: int | None
    text: str
    metadata: Mapping[str, Any]


@dataclass(frozen=True)
class ChunkPage:
    items: list[ChunkView]
    page: int  # 1-based, clamped into range
    pages: int
    total: int


def _chunk_order(node_id: str) -> tuple[int, ...]:
    # Ids end with "#<page index>#<chunk index>" (the file name may hold "#" too): order
    # numerically, not as text, so chunk 10 comes after chunk 9.
    return tuple(int(p) if p.isdigit() else 0 for p in node_id.rsplit("#", 2)[-2:])


def chunk_page(
    version: IndexVersion, file_name: str, page: int = 1, per_page: int = CHUNKS_PER_PAGE
) -> ChunkPage:
    """One page of a document's chunks, in reading order."""
    ids = sorted(version.vectors.document_node_ids(file_name), key=_chunk_order)
    total = len(ids)
    pages = max(1, math.ceil(total / per_page))
    page = min(max(1, page), pages)
    start = (page - 1) * per_page
    items = []
    for offset, node_id in enumerate(ids[start : start + per_page]):
        node = version.vectors.get(node_id)
        if node is None:
            continue
        raw_page = node.metadata.get("page")
        items.append(
            ChunkView(
                node_id=node_id,
                position=start + offset + 1,
                page=raw_page if isinstance(raw_page, int) else None,
                text=node.get_content(),
                metadata=dict(node.metadata),
            )
        )
    return ChunkPage(items, page, pages, total)


def chunk_by_id(version: IndexVersion, node_id: str) -> ChunkView | None:
    """A chunk of the published version, or ``None`` when it is gone (document changed)."""
    node = version.vectors.get(node_id)
    if node is None:
        return None
    raw_page = node.metadata.get("page")
    return ChunkView(
        node_id=node_id,
        position=0,
        page=raw_page if isinstance(raw_page, int) else None,
        text=node.get_content(),
        metadata=dict(node.metadata),
    )
