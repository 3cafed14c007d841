"""Uploads and URLs staged then ingested as one batch; renamed uploads listed for the admin."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from manager.upload_ingest import ingest_uploads, renamed_uploads
from models.embeddings import LlamaIndexEmbeddingAdapter, load_packaged_minilm
from tests.fakes import Upload
from themes.theme import ThemeRepository


def test_only_names_stored_differently_are_listed() -> None:
    names = ["guide.txt", "../../evil.txt", "CON.txt", ".."]  # "..": refused, not renamed
    assert renamed_uploads(names) == [("../../evil.txt", "evil.txt"), ("CON.txt", "_CON.txt")]


def test_refusals_are_reported_without_loading_a_model(tmp_path: Path) -> None:
    theme = ThemeRepository(tmp_path).create("rh")
    uploads = [Upload("big.txt", b"x" * 2048), Upload("virus.exe", b"x")]
    outcome = ingest_uploads(theme, uploads, [], embed_model=None, max_bytes=1024)
    assert outcome.report is None
    assert {f.file_name: f.status for f in outcome.files} == {
        "big.txt": "rejected",
        "virus.exe": "rejected",
    }
    assert list(theme.documents_dir.iterdir()) == []


@pytest.fixture(scope="module")
def minilm() -> LlamaIndexEmbeddingAdapter:
    return load_packaged_minilm()


def test_an_upload_is_ingested_and_the_staging_folder_is_gone(
    tmp_path: Path, minilm: LlamaIndexEmbeddingAdapter
) -> None:
    theme = ThemeRepository(tmp_path / "data").create("rh")
    before = set(Path(tempfile.gettempdir()).glob("chatitego-upload-*"))
    text = "Les congés payés sont de vingt-cinq jours ouvrés par an."
    outcome = ingest_uploads(
        theme, [Upload("conges.txt", text.encode())], [], minilm, max_bytes=2**20
    )
    assert [(f.file_name, f.status) for f in outcome.files] == [("conges.txt", "ingested")]
    assert theme.load_data().vectors.ref_doc_ids() == {"conges.txt"}
    assert set(Path(tempfile.gettempdir()).glob("chatitego-upload-*")) == before
