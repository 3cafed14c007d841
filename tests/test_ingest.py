"""Ingestion into a theme's versioned index, with the real all-MiniLM-L6-v2 (tiny documents).

Every test taking the ``theme`` fixture runs on both backends: documents in the theme's
folder and index files (embedded), or everything in PostgreSQL. "By hand" changes to the
stored documents (``drop_by_hand``) stand for a file dropped into ``documents/``, or a row
written by another tool (a restore) in the database.
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.schema import MetadataMode, NodeRelationship, RelatedNodeInfo, TextNode

from models.embeddings import LlamaIndexEmbeddingAdapter, load_packaged_minilm
from tests.backends import Backend
from tests.pdf_fixtures import make_encrypted_pdf, make_text_pdf
from themes.index_storage import ThemeBusy
from themes.ingest import (
    CHUNK_MARGIN_TOKENS,
    FileDocument,
    IngestBusy,
    IngestProgress,
    chunk_parameters,
    clear_index,
    health,
    ingest_files,
    remove_document,
    repair,
    sync_theme,
)
from themes.theme import Theme, ThemeRepository

# One sentence of ~40 MiniLM tokens each: with chunk_tokens=64 and no overlap, two never fit
# in one chunk (the file name shown to the embedding takes a few tokens too), so a file of
# n such sentences gives exactly n chunks.
SENTENCES = [
    "Les congés payés sont de vingt-cinq jours ouvrés par an pour chaque salarié à temps "
    "plein, posés en accord avec le responsable de service au moins un mois avant.",
    "Le télétravail est autorisé deux jours par semaine pour les postes éligibles, après "
    "signature d'un avenant au contrat de travail et validation par la direction.",
    "Les notes de frais sont remboursées sur présentation des justificatifs originaux dans "
    "un délai de trente jours, par virement bancaire sur le compte du salarié.",
]


class CountingEmbedding(LlamaIndexEmbeddingAdapter):
    """The real model, recording every text it embeds (and optionally pausing first)."""

    _seen: list[str] = PrivateAttr()
    _entered: threading.Event | None = PrivateAttr(default=None)
    _release: threading.Event | None = PrivateAttr(default=None)

    def __init__(
        self,
        inner: LlamaIndexEmbeddingAdapter,
        *,
        entered: threading.Event | None = None,
        release: threading.Event | None = None,
    ) -> None:
        super().__init__(inner.wrapper, model_name=inner.model_name)
        # Mutable objects: ingest works on a model_copy(), which shares them.
        self._seen = []
        self._entered = entered
        self._release = release

    @property
    def seen(self) -> list[str]:
        return self._seen

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        if self._entered is not None and self._release is not None:
            self._entered.set()
            assert self._release.wait(30), "test never released the embedding"
        self._seen.extend(texts)
        return super()._get_text_embeddings(texts)


@pytest.fixture(scope="module")
def minilm() -> LlamaIndexEmbeddingAdapter:
    return load_packaged_minilm()


@pytest.fixture
def model(minilm: LlamaIndexEmbeddingAdapter) -> CountingEmbedding:
    return CountingEmbedding(minilm)


@pytest.fixture
def theme(tmp_path: Path, backend: Backend) -> Theme:
    t = ThemeRepository(tmp_path / "data", backend.store).create("rh")
    # Small chunks so that tiny documents still give several, predictable chunks.
    t.settings.retrieval.chunk_tokens = 64
    t.settings.retrieval.chunk_overlap = 0
    return t


@pytest.fixture
def src(tmp_path: Path) -> Path:
    folder = tmp_path / "upload"
    folder.mkdir()
    return folder


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def stored(theme: Theme) -> dict[str, str]:
    """The stored documents' names and texts."""
    return {name: theme.documents.read_bytes(name).decode() for name in theme.document_names()}


def drop_by_hand(theme: Theme, name: str, text: str) -> None:
    """A document stored without going through ingestion."""
    if theme.store.kind == "embedded":
        write(theme.documents_dir, name, text)
        return
    content = text.encode()
    with theme.store.database.dedicated() as conn:  # type: ignore[attr-defined]
        conn.execute(
            "INSERT INTO chatitego_documents (theme_id, name, content, sha256, size) "
            "SELECT id, %s, %s, %s, %s FROM chatitego_themes WHERE name = %s "
            "ON CONFLICT (theme_id, name) DO UPDATE SET content = EXCLUDED.content, "
            "sha256 = EXCLUDED.sha256, size = EXCLUDED.size",
            (name, content, hashlib.sha256(content).hexdigest(), len(content), theme.name),
        )


def delete_by_hand(theme: Theme, name: str) -> None:
    if theme.store.kind == "embedded":
        (theme.documents_dir / name).unlink()
        return
    with theme.store.database.dedicated() as conn:  # type: ignore[attr-defined]
        conn.execute(
            "DELETE FROM chatitego_documents WHERE name = %s AND theme_id = "
            "(SELECT id FROM chatitego_themes WHERE name = %s)",
            (name, theme.name),
        )


def chunk_ids(theme: Theme, name: str) -> list[str]:
    return theme.load_data().vectors.document_node_ids(name)


def statuses(report: Any) -> dict[str, str]:
    return {r.file_name: r.status for r in report.files}


# --------------------------------------------------------------------------------------------


def test_incremental_update_replaces_only_what_changed(
    theme: Theme, src: Path, model: CountingEmbedding
) -> None:
    write(src, "conges.md", "\n\n".join(SENTENCES))
    write(src, "teletravail.md", SENTENCES[1])
    report = ingest_files(theme, [src], model)
    assert statuses(report) == {"conges.md": "ingested", "teletravail.md": "ingested"}
    assert {r.file_name: r.chunks for r in report.files} == {"conges.md": 3, "teletravail.md": 1}
    first = theme.load_data()
    assert first.vectors.count() == 4 and first.keywords.count() == 4
    assert theme.document_names() == ["conges.md", "teletravail.md"]
    conges_ids = chunk_ids(theme, "conges.md")
    old_tele_ids = chunk_ids(theme, "teletravail.md")

    # Modify one stored document and synchronise: its chunks are replaced, the other's kept.
    drop_by_hand(theme, "teletravail.md", SENTENCES[1] + "\n\n" + SENTENCES[2])
    report = sync_theme(theme, model)
    assert statuses(report) == {"conges.md": "unchanged", "teletravail.md": "updated"}
    updated = report.result("teletravail.md")
    assert updated is not None and updated.chunks == 2 and updated.removed_chunks == 1
    second = theme.load_data()
    assert second.name != first.name
    assert second.vectors.count() == 5 and second.keywords.count() == 5
    assert chunk_ids(theme, "conges.md") == conges_ids  # untouched: same node ids
    new_tele_ids = chunk_ids(theme, "teletravail.md")
    assert len(new_tele_ids) == 2 and not set(new_tele_ids) & set(old_tele_ids)
    assert not set(old_tele_ids) & set(second.keywords.node_ids())

    # Delete the other one: nothing of it is left in any store.
    delete_by_hand(theme, "conges.md")
    report = sync_theme(theme, model)
    removed = report.result("conges.md")
    assert removed is not None and removed.status == "removed" and removed.removed_chunks == 3
    third = theme.load_data()
    assert third.vectors.document_node_ids("conges.md") == []
    assert not set(conges_ids) & set(third.vectors.node_ids())
    assert not set(conges_ids) & set(third.keywords.node_ids())
    assert third.keywords.query("congés payés ouvrés", k=10) == []
    assert third.docstore.get_document_hash("conges.md") is None
    assert third.vectors.count() == third.keywords.count() == 2
    status = health(theme)
    assert status.orphan_count == 0 and status.ok, status.summary()
    assert status.files == ("teletravail.md",)


def test_unchanged_files_are_not_embedded_again(
    theme: Theme, src: Path, model: CountingEmbedding
) -> None:
    write(src, "a.md", SENTENCES[0])
    write(src, "b.txt", SENTENCES[1])
    first = ingest_files(theme, [src / "a.md", src / "b.txt"], model)
    assert first.version is not None
    embedded = len(model.seen)
    assert embedded == 2

    again = ingest_files(theme, [src / "a.md", src / "b.txt"], model)
    assert statuses(again) == {"a.md": "unchanged", "b.txt": "unchanged"}
    assert again.version is None  # nothing changed: no new version
    assert theme.storage.current_version_name() == first.version
    assert sync_theme(theme, model).version is None
    assert len(model.seen) == embedded

    write(src, "b.txt", SENTENCES[2])  # only b changes: only b is embedded
    third = ingest_files(theme, [src / "a.md", src / "b.txt"], model)
    assert statuses(third) == {"a.md": "unchanged", "b.txt": "updated"}
    assert model.seen[embedded:] == [
        n.get_content(metadata_mode=MetadataMode.EMBED)
        for n in theme.load_data().vectors.get_nodes(chunk_ids(theme, "b.txt"))
    ]
    assert stored(theme)["b.txt"] == SENTENCES[2]


def test_every_chunk_fits_the_model_by_its_own_tokenizer(
    tmp_path: Path, src: Path, minilm: LlamaIndexEmbeddingAdapter
) -> None:
    theme = ThemeRepository(tmp_path / "data").create("long")  # default chunk size
    size, overlap = chunk_parameters(theme.settings.retrieval, minilm)
    assert size == 256 - CHUNK_MARGIN_TOKENS and overlap == 32
    # ~1,400 tokens of real prose, with one 300-token "sentence" with no punctuation that
    # the splitter must cut inside.
    text = "\n\n".join(SENTENCES * 8) + "\n\n" + " ".join(["procédure"] * 100)
    write(src, "long.md", text)
    report = ingest_files(theme, [src / "long.md"], minilm)
    nodes = theme.load_data().vectors.get_nodes()
    assert report.chunks_embedded == len(nodes) >= 6
    tokenizer: Any = minilm.wrapper.embedding.tokenizer
    lengths = [
        len(tokenizer(n.get_content(metadata_mode=MetadataMode.EMBED))["input_ids"]) for n in nodes
    ]
    assert max(lengths) <= 256, lengths  # [CLS] and [SEP] included: nothing truncated
    assert max(lengths) >= 180, lengths  # and the chunks do use the room they have


def test_pdf_pages_and_headings_reach_the_chunks(
    theme: Theme, src: Path, model: CountingEmbedding
) -> None:
    pdf = make_text_pdf(
        [SENTENCES[0], None, SENTENCES[1]], outline=[("Congés", 0), ("Télétravail", 2)]
    )
    (src / "guide.pdf").write_bytes(pdf)
    report = ingest_files(theme, [src / "guide.pdf"], model)
    assert statuses(report) == {"guide.pdf": "ingested"}
    nodes = theme.load_data().vectors.get_nodes(chunk_ids(theme, "guide.pdf"))
    by_page = {n.metadata["page"]: n for n in nodes}
    assert sorted(by_page) == [1, 3]  # the image-only page 2 has no text
    assert by_page[1].metadata["headings"] == ["Congés"]
    assert by_page[3].metadata["headings"] == ["Télétravail"]
    assert all(n.ref_doc_id == "guide.pdf" for n in nodes)
    assert all(n.metadata["file_name"] == "guide.pdf" for n in nodes)
    assert "page: 3" in by_page[3].get_content(metadata_mode=MetadataMode.LLM)


def test_bad_file_in_a_batch_changes_nothing_and_stops_nothing(
    theme: Theme, src: Path, model: CountingEmbedding
) -> None:
    write(src, "earlier.md", SENTENCES[0])
    before = ingest_files(theme, [src / "earlier.md"], model)
    earlier = theme.load_data()
    earlier_nodes = {n.node_id: n.get_content() for n in earlier.vectors.get_nodes()}

    (src / "secret.pdf").write_bytes(
        make_encrypted_pdf([SENTENCES[1]], user_password="u", owner_password="o")
    )
    write(src, "good.md", SENTENCES[2])
    report = ingest_files(theme, [src / "secret.pdf", src / "good.md"], model)
    assert statuses(report) == {"secret.pdf": "rejected", "good.md": "ingested"}
    rejected = report.result("secret.pdf")
    assert rejected is not None and rejected.reason is not None
    assert "encrypted" in rejected.reason.lower()
    assert "secret.pdf" not in stored(theme)
    after = theme.load_data()
    assert after.name != before.version
    assert after.vectors.ref_doc_ids() == {"earlier.md", "good.md"}
    assert {n.node_id: n.get_content() for n in after.vectors.get_nodes(list(earlier_nodes))} == (
        earlier_nodes
    )
    assert after.docstore.get_document_hash("earlier.md") == earlier.docstore.get_document_hash(
        "earlier.md"
    )


def test_failed_update_keeps_the_old_version_everywhere(
    theme: Theme, src: Path, model: CountingEmbedding
) -> None:
    write(src, "guide.md", SENTENCES[0])
    first = ingest_files(theme, [src / "guide.md"], model)
    old_ids = chunk_ids(theme, "guide.md")
    old_hash = theme.load_data().docstore.get_document_hash("guide.md")

    write(src, "guide.md", "")  # the new version cannot be parsed (empty file)
    report = ingest_files(theme, [src / "guide.md"], model)
    result = report.result("guide.md")
    assert result is not None and result.status == "rejected"
    assert result.reason is not None and "empty" in result.reason
    assert report.version is None
    assert theme.storage.current_version_name() == first.version
    assert chunk_ids(theme, "guide.md") == old_ids
    assert theme.load_data().docstore.get_document_hash("guide.md") == old_hash
    assert stored(theme) == {"guide.md": SENTENCES[0]}
    if theme.store.kind == "embedded":
        assert not any(p.name.startswith(".") for p in theme.documents_dir.iterdir())

    # Same through "update": a broken file dropped into documents/ keeps the indexed version.
    drop_by_hand(theme, "guide.md", "")
    report = sync_theme(theme, model)
    assert statuses(report) == {"guide.md": "rejected"}
    assert chunk_ids(theme, "guide.md") == old_ids


def test_traversal_links_and_unknown_types_are_refused(
    theme: Theme, src: Path, tmp_path: Path, model: CountingEmbedding
) -> None:
    outside = write(tmp_path, "outside.md", SENTENCES[0])
    (src / "link.md").symlink_to(outside)
    write(src, "tool.exe", "MZ")
    write(src, ".env.md", "SECRET=1")  # hidden: skipped when walking a folder
    report = ingest_files(theme, [src, tmp_path / "..."], model)
    assert statuses(report) == {"link.md": "rejected", "tool.exe": "rejected", "...": "rejected"}
    reasons = {r.file_name: r.reason or "" for r in report.files}
    assert "symbolic link" in reasons["link.md"]
    assert "unsupported file type" in reasons["tool.exe"]
    assert "unusable file name" in reasons["..."]
    assert report.version is None and stored(theme) == {}

    for name in ("../theme.json", "..", "/etc/passwd", ".hidden.md", "sub/x.md"):
        refused = remove_document(theme, name)
        assert statuses(refused) == {name: "rejected"}, name
    assert ThemeRepository(theme.directory.parent.parent, theme.store).get("rh").name == "rh"


def test_a_second_concurrent_ingest_is_refused_as_busy(
    theme: Theme, src: Path, minilm: LlamaIndexEmbeddingAdapter
) -> None:
    entered, release = threading.Event(), threading.Event()
    slow = CountingEmbedding(minilm, entered=entered, release=release)
    write(src, "first.md", SENTENCES[0])
    write(src, "second.md", SENTENCES[1])
    outcome: dict[str, Any] = {}

    def first() -> None:
        try:
            outcome["report"] = ingest_files(theme, [src / "first.md"], slow)
        except BaseException as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=first)
    thread.start()
    try:
        assert entered.wait(30)  # the first ingest holds the lock and is embedding
        with pytest.raises(IngestBusy) as busy:
            ingest_files(theme, [src / "second.md"], minilm, lock_timeout=0.2)
        assert isinstance(busy.value, ThemeBusy)
        assert "is busy" in str(busy.value) and "Nothing was changed" in str(busy.value)
        assert "second.md" not in stored(theme)
    finally:
        release.set()
        thread.join(30)
    assert "error" not in outcome, outcome
    assert statuses(outcome["report"]) == {"first.md": "ingested"}
    assert theme.load_data().vectors.ref_doc_ids() == {"first.md"}


def test_progress_reports_increasing_counts(
    theme: Theme, src: Path, model: CountingEmbedding
) -> None:
    write(src, "a.md", "\n\n".join(SENTENCES))
    write(src, "b.md", SENTENCES[1])
    write(src, "c.exe", "x")
    events: list[IngestProgress] = []
    report = ingest_files(theme, [src], model, progress=events.append)

    stages = [e.stage for e in events]
    assert stages[0] == "reading" and stages[-1] == "writing"
    # All files are read first; then sections are chunked and embedded in turn (issue 11:
    # chunking and embedding interleave, so that progress moves during a long file).
    last_reading = max(i for i, s in enumerate(stages) if s == "reading")
    assert set(stages[last_reading + 1 : -1]) == {"chunking", "embedding"}
    assert [e.file_name for e in events if e.stage == "reading"] == ["a.md", "b.md", "c.exe"]
    for before, after in zip(events, events[1:], strict=False):
        assert after.files_done >= before.files_done
        assert after.chunks_done >= before.chunks_done
        assert after.text_done >= before.text_done
    assert all(e.files_total == 3 for e in events)
    embedding = [e for e in events if e.stage == "embedding"]
    assert embedding[-1].chunks_done == 4
    assert events[-1].files_done == 3
    assert events[-1].chunks_done == events[-1].chunks_total == report.chunks_embedded == 4
    assert events[-1].text_done == events[-1].text_total > 0


def test_progress_exception_cancels_with_nothing_changed(
    theme: Theme, src: Path, model: CountingEmbedding
) -> None:
    write(src, "a.md", SENTENCES[0])

    def cancel(event: IngestProgress) -> None:
        if event.stage == "embedding" and event.chunks_done:
            raise KeyboardInterrupt  # e.g. the admin closed the page

    with pytest.raises(KeyboardInterrupt):
        ingest_files(theme, [src], model, progress=cancel)
    assert theme.storage.current_version_name() is None
    assert stored(theme) == {}


def _inject(theme: Theme, dim: int) -> None:
    """By hand: a chunk whose document does not exist, and a docstore entry without chunks."""
    with theme.storage.writer() as w:
        ghost = TextNode(
            id_="ghost-chunk",
            text="chunk fantôme sans document",
            embedding=list(np.ones(dim, dtype=float)),
            relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id="ghost.md")},
        )
        w.vectors.add([ghost])
        w.docstore.add_documents(
            [FileDocument(id_="phantom.md", text="", metadata={"sha256": "0" * 64})]
        )


def test_health_finds_injected_orphans_and_repair_fixes_them(
    theme: Theme, src: Path, model: CountingEmbedding
) -> None:
    write(src, "a.md", SENTENCES[0])
    ingest_files(theme, [src], model)
    assert health(theme).ok
    _inject(theme, dim=384)
    drop_by_hand(theme, "dropped.md", SENTENCES[2])  # a file never indexed
    drop_by_hand(theme, "stub.md", SENTENCES[1])
    with theme.storage.writer() as w:  # an entry with the file's real hash, but no chunks
        sha = hashlib.sha256(SENTENCES[1].encode()).hexdigest()
        w.docstore.add_documents([FileDocument(id_="stub.md", text="", metadata={"sha256": sha})])

    sick = health(theme)
    assert dict(sick.orphan_chunks) == {"ghost.md": 1}
    assert sick.entries_without_chunks == ("phantom.md", "stub.md")
    assert sick.unindexed_files == ("dropped.md",)
    assert sick.orphan_count == 4 and not sick.ok

    report = repair(theme, model)
    assert statuses(report) == {
        "a.md": "unchanged",
        "dropped.md": "ingested",
        "ghost.md": "removed",
        "phantom.md": "removed",
        "stub.md": "updated",
    }
    healed = health(theme)
    assert healed.orphan_count == 0 and healed.ok, healed.summary()
    current = theme.load_data()
    assert "ghost-chunk" not in current.vectors.node_ids() + current.keywords.node_ids()
    assert current.vectors.ref_doc_ids() == {"a.md", "dropped.md", "stub.md"}


def test_remove_document_and_clear_index(theme: Theme, src: Path, model: CountingEmbedding) -> None:
    write(src, "a.md", SENTENCES[0])
    write(src, "b.md", SENTENCES[1])
    ingest_files(theme, [src], model)
    a_ids = chunk_ids(theme, "a.md")

    report = remove_document(theme, "a.md")
    assert statuses(report) == {"a.md": "removed"} and report.version is not None
    current = theme.load_data()
    assert "a.md" not in stored(theme)
    assert not set(a_ids) & (set(current.vectors.node_ids()) | set(current.keywords.node_ids()))
    assert health(theme).ok
    assert statuses(remove_document(theme, "a.md")) == {"a.md": "rejected"}  # already gone

    version = clear_index(theme)
    empty = theme.load_data()
    assert empty.name == version and empty.vectors.count() == empty.keywords.count() == 0
    assert empty.docstore.docs == {}
    assert list(stored(theme)) == ["b.md"]
    rebuilt = sync_theme(theme, model)
    assert statuses(rebuilt) == {"b.md": "ingested"}


def test_failed_commit_restores_documents(
    theme: Theme, src: Path, model: CountingEmbedding, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(src, "a.md", SENTENCES[0])
    ingest_files(theme, [src], model)
    write(src, "a.md", SENTENCES[1])
    write(src, "b.md", SENTENCES[2])

    def disk_full(*args: Any, **kwargs: Any) -> str:
        raise OSError(28, "No space left on device")

    if theme.store.kind == "embedded":
        monkeypatch.setattr("themes.index_storage.IndexStorage._commit", disk_full)
    else:
        monkeypatch.setattr("themes.pg.index_storage.PgIndexStorage._publish", disk_full)
    with pytest.raises(OSError):
        ingest_files(theme, [src], model)
    assert stored(theme) == {"a.md": SENTENCES[0]}
    assert theme.load_data().vectors.ref_doc_ids() == {"a.md"}
