"""manager's library: upload staging, document rows and chunk pages, regression questions,
admin operations (ingest batches, re-index, busy themes, settings)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from docx import Document as DocxDocument

from manager.documents import (
    chunk_by_id,
    chunk_page,
    document_rows,
    human_size,
    read_ledger,
)
from manager.i18n import TEXTS, texts
from manager.mcp_servers import parse_servers
from manager.operations import (
    BUSY_FR,
    SettingsInvalid,
    delete_document,
    ingest_batch,
    reindex_batch,
    sync_batch,
    theme_summaries,
    update_settings,
    user_message,
)
from manager.regression import (
    ChangeKind,
    InvalidQuestion,
    QuestionResult,
    RegressionRun,
    add_question,
    compare_runs,
    load_regression,
    remove_question,
    run_questions,
    set_k,
)
from manager.uploads import parse_url_lines, progress_fraction, stage_uploads, stage_urls
from models.embeddings import LlamaIndexEmbeddingAdapter, load_packaged_minilm
from tests.fakes import Upload
from tests.pdf_fixtures import make_text_pdf
from themes.index_storage import IndexStorage, ThemeBusy
from themes.ingest import IngestProgress, health, reindex
from themes.theme import Theme, ThemeRepository

PUMP = "La purge de la pompe hydraulique se fait avec la vanne ZK-4491 ouverte pendant dix minutes."
LEAVE = "Les congés payés sont de vingt-cinq jours ouvrés par an pour chaque salarié."
BADGE = "Le badge d'accès au parking se demande à l'accueil avec une pièce d'identité."


def docx_bytes(*paragraphs: str) -> bytes:
    doc = DocxDocument()
    for text in paragraphs:
        doc.add_paragraph(text)
    out = io.BytesIO()
    doc.save(out)
    return out.getvalue()


@pytest.fixture(scope="module")
def minilm() -> LlamaIndexEmbeddingAdapter:
    return load_packaged_minilm()


@pytest.fixture
def repo(tmp_path: Path) -> ThemeRepository:
    return ThemeRepository(tmp_path / "data")


@pytest.fixture
def theme(repo: ThemeRepository) -> Theme:
    return repo.create("maintenance", title="Maintenance")


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


# ------------------------------------------------------------------------------- uploads


def test_uploads_get_safe_names_and_refusals_have_reasons(tmp_path: Path) -> None:
    batch = stage_uploads(
        [
            Upload("../../etc/notice.pdf", make_text_pdf([PUMP])),
            Upload("virus.exe", b"MZ"),
            Upload("big.txt", b"x" * 2000),
            Upload("dup.txt", b"one"),
            Upload("dup.txt", b"two"),
            Upload("...", b"x"),
        ],
        tmp_path / "staged",
        max_bytes=1000,
    )
    assert [p.name for p in batch.paths] == ["notice.pdf", "dup.txt"]
    assert all(p.parent == tmp_path / "staged" for p in batch.paths)
    reasons = {r.file_name: r.reason or "" for r in batch.rejected}
    assert "unsupported file type '.exe'" in reasons["virus.exe"]
    assert "too large" in reasons["big.txt"] and "limit" in reasons["big.txt"]
    assert "same name" in reasons["dup.txt"]
    assert "unusable file name" in reasons["..."]
    assert all(r.status == "rejected" for r in batch.rejected)


def test_urls_must_be_http_and_public(tmp_path: Path) -> None:
    assert parse_url_lines(" https://a.example/x \n\n# note\nhttps://a.example/x\nftp://b") == [
        "https://a.example/x",
        "ftp://b",
    ]
    batch = stage_urls(
        ["ftp://files.example/doc.pdf", "http://127.0.0.1/admin"], tmp_path, max_bytes=1000
    )
    assert batch.paths == []
    reasons = [r.reason or "" for r in batch.rejected]
    assert "not an http(s) address" in reasons[0]
    assert reasons[1]  # loopback refused by the guarded fetcher, with its reason


def test_progress_fraction_never_decreases() -> None:
    events = [
        IngestProgress("reading", "a.pdf", 0, 2, 0, 0),
        IngestProgress("reading", "b.pdf", 1, 2, 0, 0),
        IngestProgress("chunking", None, 2, 2, 0, 0),
        IngestProgress("embedding", None, 2, 2, 0, 10),
        IngestProgress("embedding", None, 2, 2, 5, 10),
        IngestProgress("embedding", None, 2, 2, 10, 10),
        IngestProgress("writing", None, 2, 2, 10, 10),
    ]
    fractions = [progress_fraction(e) for e in events]
    assert fractions == sorted(fractions)
    assert fractions[0] == 0 and fractions[-1] == 1.0


# ------------------------------------------------------------------------------- documents


def test_batch_of_pdf_docx_and_refusals(
    theme: Theme, tmp_path: Path, minilm: LlamaIndexEmbeddingAdapter
) -> None:
    staged = stage_uploads(
        [
            Upload("notice pompe.pdf", make_text_pdf([PUMP, LEAVE])),
            Upload("badge.docx", docx_bytes("Accès", BADGE)),
            Upload("macro.xlsm", b"PK"),
        ],
        tmp_path / "up",
        max_bytes=10**6,
    )
    events: list[IngestProgress] = []
    outcome = ingest_batch(
        theme, staged.paths, minilm, rejected=staged.rejected, progress=events.append
    )
    assert {f.file_name: f.status for f in outcome.files} == {
        "macro.xlsm": "rejected",
        "notice pompe.pdf": "ingested",
        "badge.docx": "ingested",
    }
    assert outcome.count("ingested") == 2 and outcome.regression is None
    assert events and events[-1].stage == "writing"

    version = theme.load_data()
    rows = {r.name: r for r in document_rows(theme, version, health(theme))}
    pdf = rows["notice pompe.pdf"]
    assert pdf.pages == 2 and pdf.chunks >= 2 and pdf.status == "indexed"
    assert pdf.size_bytes == (theme.documents_dir / "notice pompe.pdf").stat().st_size
    assert pdf.sha256 and len(pdf.short_hash) == 12
    assert pdf.ingested_at == read_ledger(theme)["notice pompe.pdf"]
    assert rows["badge.docx"].pages == 1

    page = chunk_page(version, "notice pompe.pdf", page=1, per_page=1)
    assert page.total == pdf.chunks and page.pages == pdf.chunks
    assert page.items[0].position == 1 and page.items[0].page == 1
    assert "ZK-4491" in page.items[0].text
    last = chunk_page(version, "notice pompe.pdf", page=99, per_page=1)
    assert last.page == last.pages and last.items[0].page == 2  # clamped, reading order
    assert chunk_by_id(version, page.items[0].node_id) is not None
    assert chunk_by_id(version, "gone#0") is None

    summaries = theme_summaries(ThemeRepository(theme.directory.parent.parent))
    assert summaries[0].documents == 2 and summaries[0].chunks == version.vectors.count()


def test_statuses_of_changed_missing_and_unindexed_files(
    theme: Theme, tmp_path: Path, minilm: LlamaIndexEmbeddingAdapter
) -> None:
    src = tmp_path / "src"
    ingest_batch(theme, [write(src, "a.txt", PUMP), write(src, "b.txt", LEAVE)], minilm)
    (theme.documents_dir / "a.txt").write_text(PUMP + " Modifié.", encoding="utf-8")
    (theme.documents_dir / "b.txt").unlink()
    write(theme.documents_dir, "c.txt", BADGE)
    rows = {r.name: r.status for r in document_rows(theme, theme.load_data(), health(theme))}
    assert rows == {"a.txt": "modified", "b.txt": "orphan", "c.txt": "not_indexed"}

    outcome = sync_batch(theme, minilm)
    assert {f.file_name: f.status for f in outcome.files} == {
        "a.txt": "updated",
        "b.txt": "removed",
        "c.txt": "ingested",
    }
    assert "b.txt" not in read_ledger(theme)


def test_delete_document_removes_file_chunks_and_ledger_entry(
    theme: Theme, tmp_path: Path, minilm: LlamaIndexEmbeddingAdapter
) -> None:
    ingest_batch(theme, [write(tmp_path / "s", "a.txt", PUMP)], minilm)
    result = delete_document(theme, "a.txt")
    assert result.status == "removed" and result.removed_chunks >= 1
    assert theme.load_data().vectors.count() == 0
    assert read_ledger(theme) == {}
    refused = delete_document(theme, "../theme.json")
    assert refused.status == "rejected"


def test_reindex_reembeds_unchanged_documents_in_one_version(
    theme: Theme, tmp_path: Path, minilm: LlamaIndexEmbeddingAdapter
) -> None:
    src = tmp_path / "s"
    ingest_batch(theme, [write(src, "a.txt", PUMP * 6), write(src, "b.txt", LEAVE)], minilm)
    before = theme.load_data()
    theme.settings.retrieval.chunk_tokens = 48
    theme.save_settings()
    outcome = reindex_batch(theme, minilm, ["a.txt"])
    statuses = {f.file_name: f.status for f in outcome.files}
    assert statuses == {"a.txt": "updated", "b.txt": "unchanged"}
    after = theme.load_data()
    assert after.info["based_on"] == before.name  # one new version
    assert len(after.vectors.document_node_ids("a.txt")) > len(
        before.vectors.document_node_ids("a.txt")
    )
    # All documents when no name is given; a second plain sync then has nothing to do.
    everything = reindex(theme, minilm)
    assert {f.status for f in everything.files} == {"updated"}
    assert not sync_batch(theme, minilm).report.changed  # type: ignore[union-attr]


def test_busy_theme_raises_and_says_so_in_french(
    theme: Theme, tmp_path: Path, minilm: LlamaIndexEmbeddingAdapter
) -> None:
    path = write(tmp_path / "s", "a.txt", PUMP)
    with IndexStorage(theme.directory).writer(), pytest.raises(ThemeBusy) as caught:
        ingest_batch(theme, [path], minilm, lock_timeout=0.1)
    message = user_message(caught.value, "fr")
    assert message is not None and BUSY_FR in message.lower()
    assert theme.load_data().vectors.count() == 0 and theme.document_names() == []
    assert "another administrator" in (user_message(caught.value, "en") or "").lower()


def test_unexpected_errors_have_no_sentence() -> None:
    assert user_message(ZeroDivisionError("bug"), "fr") is None


# ------------------------------------------------------------------------------- settings


def test_update_settings_validates_everything_before_saving(
    theme: Theme, repo: ThemeRepository
) -> None:
    update_settings(
        theme,
        {
            "title": "Maintenance usine",
            "detail": "detailed",
            "engine_mode": "chat",
            "enabled_tools": ["calculate"],
            "mcp_servers": parse_servers("a | http://mcp.local/a | lire\nb | http://b"),
            "retrieval": {"top_k": 3},
        },
        "# Rôle\nTu es le technicien.",
    )
    saved = repo.get("maintenance")
    assert saved.settings.title == "Maintenance usine" and saved.settings.engine_mode == "chat"
    assert [(m.name, m.url, m.allowed_tools) for m in saved.settings.mcp_servers] == [
        ("a", "http://mcp.local/a", ("lire",)),
        ("b", "http://b", ()),
    ]
    assert saved.settings.retrieval.top_k == 3 and saved.settings.retrieval.wide_k == 20
    assert saved.system_prompt.startswith("# Rôle")

    with pytest.raises(SettingsInvalid, match="retrieval.top_k"):
        update_settings(theme, {"title": "X", "retrieval": {"top_k": 0}}, "other prompt")
    unchanged = repo.get("maintenance")
    assert unchanged.settings.title == "Maintenance usine"
    assert unchanged.system_prompt.startswith("# Rôle")
    with pytest.raises(SettingsInvalid):
        update_settings(theme, {"language": "de"})


# ------------------------------------------------------------------------------- regression


def test_regression_questions_are_stored_and_validated(theme: Theme) -> None:
    q = add_question(theme, "  Comment purger la pompe ?  ", "notice.pdf")
    assert q.question == "Comment purger la pompe ?"
    assert load_regression(theme).questions == [q]
    with pytest.raises(InvalidQuestion):
        add_question(theme, "   ", "notice.pdf")
    with pytest.raises(InvalidQuestion):
        add_question(theme, "Question ?", "")
    assert remove_question(theme, q.id) and not remove_question(theme, q.id)
    assert load_regression(theme).questions == []


def test_unreadable_regression_file_is_a_sentence(theme: Theme) -> None:
    (theme.directory / "regression.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(InvalidQuestion, match="fix or delete"):
        load_regression(theme)


def test_an_update_that_loses_the_document_warns(
    theme: Theme, tmp_path: Path, minilm: LlamaIndexEmbeddingAdapter
) -> None:
    src = tmp_path / "s"
    ingest_batch(
        theme,
        [
            write(src, "pompe.txt", PUMP),
            write(src, "conges.txt", LEAVE),
            write(src, "b.txt", BADGE),
        ],
        minilm,
    )
    set_k(theme, 1)
    add_question(theme, "Comment purger la pompe hydraulique ZK-4491 ?", "pompe.txt")
    add_question(theme, "Combien de jours de congés payés ?", "conges.txt")
    baseline = run_questions(
        theme.load_data(), minilm, theme.settings.retrieval, load_regression(theme).questions, 1
    )
    assert baseline.hits == 2 and baseline.hit_rate == 1.0

    # The pump notice is replaced by an unrelated text: its question loses its document.
    outcome = ingest_batch(theme, [write(tmp_path / "v2", "pompe.txt", BADGE)], minilm)
    comparison = outcome.regression
    assert comparison is not None and comparison.worse
    assert comparison.before.hits == 2 and comparison.after.hits == 1
    [lost] = comparison.regressions
    assert lost.expected_document == "pompe.txt" and lost.kind is ChangeKind.LOST
    assert load_regression(theme).last_run == comparison.after

    # An ingest that changes nothing runs no comparison.
    again = ingest_batch(theme, [write(tmp_path / "v3", "pompe.txt", BADGE)], minilm)
    assert again.regression is None


def test_compare_runs_kinds() -> None:
    def run(*ranks: int | None) -> RegressionRun:
        return RegressionRun(
            version="v1",
            k=5,
            results=[
                QuestionResult(question_id=str(i), question=f"q{i}", expected_document="d", rank=r)
                for i, r in enumerate(ranks)
            ],
        )

    before = run(1, 2, None, 3, 2)
    after = run(None, 4, 1, 1, 2)
    after.results.append(
        QuestionResult(question_id="new", question="q", expected_document="d", rank=None)
    )
    kinds = [c.kind for c in compare_runs(before, after).changes]
    assert kinds == [
        ChangeKind.LOST,
        ChangeKind.LOWER,
        ChangeKind.GAINED,
        ChangeKind.HIGHER,
        ChangeKind.SAME,
        ChangeKind.NEW,
    ]
    assert not compare_runs(before, before).worse


# ------------------------------------------------------------------------------- strings


def test_every_string_has_both_languages_and_the_same_fields() -> None:
    import string

    for key, (fr, en) in TEXTS.items():
        assert fr and en, key
        fields_fr = {f for _, f, _, _ in string.Formatter().parse(fr) if f}
        fields_en = {f for _, f, _, _ in string.Formatter().parse(en) if f}
        assert fields_fr == fields_en, key
    assert texts("en")("login") == "Log in" and texts("fr")("login") == "Se connecter"
    assert human_size(512) == "512 B" and human_size(2048) == "2.0 KB"
