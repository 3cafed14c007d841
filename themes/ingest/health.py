"""Consistency of a theme's published index with its ``documents/`` folder (read only)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from themes.ingest.reading import docstore_hashes
from themes.readers import RejectedFile
from themes.theme import Theme


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
    entries = docstore_hashes(version.docstore)
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
