"""Admin operations as the page runs them: each one call, one typed outcome.

Ingestion batches run the theme's regression questions before and after (when it has
any) and stamp the ledger; busy themes raise ``themes.ingest.IngestBusy`` /
``themes.index_storage.ThemeBusy`` unchanged, and ``user_message`` turns any expected
error into a sentence for the admin.
"""

from __future__ import annotations

import errno
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from pydantic import ValidationError

from manager.documents import record_results
from manager.regression import (
    RegressionComparison,
    RegressionRun,
    compare_runs,
    load_regression,
    record_run,
    run_questions,
)
from themes.errors import ThemesError
from themes.index_storage import IndexCorrupted, IndexWriteFailed, ThemeBusy, ThemeFolderGone
from themes.ingest import (
    FileResult,
    IngestProgress,
    IngestReport,
    clear_index,
    ingest_files,
    reindex,
    remove_document,
    repair,
    sync_theme,
)
from themes.names import InvalidThemeName
from themes.readers import RejectedFile, RejectedURL
from themes.theme import Theme, ThemeExists, ThemeNotFound, ThemeRepository, ThemeSettings

Progress = Callable[[IngestProgress], None]


# ------------------------------------------------------------------------------- themes


@dataclass(frozen=True)
class ThemeSummary:
    """A theme in the sidebar; ``damaged`` says what cannot be read (index or settings)."""

    name: str
    title: str
    language: str
    documents: int
    chunks: int
    version: str | None
    damaged: str | None = None


def theme_summaries(repo: ThemeRepository) -> list[ThemeSummary]:
    """Every theme with its counts (a theme whose index cannot be read shows 0 chunks)."""
    out = []
    for name in repo.names():
        try:
            theme = repo.get(name)
        except (ValueError, OSError) as exc:  # unreadable theme.json: shown, not fatal
            out.append(ThemeSummary(name, name, "fr", 0, 0, None, damaged=f"theme.json: {exc}"))
            continue
        damaged = None
        try:
            version = theme.load_data()
            chunks, version_name = version.vectors.count(), version.name
        except IndexCorrupted as exc:
            chunks, version_name, damaged = 0, None, exc.detail
        out.append(
            ThemeSummary(
                name=name,
                title=theme.settings.title,
                language=theme.settings.language,
                documents=len(theme.document_names()),
                chunks=chunks,
                version=version_name,
                damaged=damaged,
            )
        )
    return out


def split_list(text: str) -> list[str]:
    """Comma- or line-separated values, stripped, empty ones and duplicates dropped."""
    out: list[str] = []
    for raw in text.replace(",", "\n").splitlines():
        value = raw.strip()
        if value and value not in out:
            out.append(value)
    return out


class SettingsInvalid(ValueError):
    """Settings the admin typed that cannot be saved; the message names the fields."""


def update_settings(
    theme: Theme, changes: dict[str, Any], system_prompt: str | None = None
) -> ThemeSettings:
    """Validate ``changes`` (``retrieval`` may be a partial dict) against ``ThemeSettings``,
    then save them, and the system prompt when it changed (the old one goes to the history).
    Nothing is saved when anything is invalid."""
    current = theme.settings.model_dump()
    retrieval = {**current["retrieval"], **changes.get("retrieval", {})}
    merged = {**current, **changes, "retrieval": retrieval, "name": theme.name}
    try:
        settings = ThemeSettings.model_validate(merged)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
        )
        raise SettingsInvalid(f"settings not saved ({problems})") from None
    theme.settings = settings
    theme.save_settings()
    if system_prompt is not None and system_prompt != theme.system_prompt:
        theme.set_system_prompt(system_prompt)
    return settings


# ------------------------------------------------------------------------------- ingestion


@dataclass
class BatchOutcome:
    """A batch's per-file results (refusals before ingestion first) and its regression check."""

    report: IngestReport | None
    files: list[FileResult] = field(default_factory=list)
    regression: RegressionComparison | None = None

    def count(self, status: str) -> int:
        return sum(1 for f in self.files if f.status == status)


def _regression_before(theme: Theme, embed_model: BaseEmbedding) -> RegressionRun | None:
    questions = load_regression(theme)
    if not questions.questions or index_damage(theme) is not None:
        return None
    return run_questions(
        theme.load_data(),
        embed_model,
        theme.settings.retrieval,
        questions.questions,
        questions.k,
        label="before",
    )


def _finish(
    theme: Theme,
    embed_model: BaseEmbedding,
    report: IngestReport,
    before: RegressionRun | None,
    early: Sequence[FileResult] = (),
) -> BatchOutcome:
    record_results(theme, report.files)
    outcome = BatchOutcome(report, [*early, *report.files])
    if before is not None and report.changed:
        questions = load_regression(theme)
        after = run_questions(
            theme.load_data(),
            embed_model,
            theme.settings.retrieval,
            questions.questions,
            questions.k,
            label="after",
        )
        record_run(theme, after)
        outcome.regression = compare_runs(before, after)
    return outcome


def ingest_batch(
    theme: Theme,
    paths: Sequence[Path],
    embed_model: BaseEmbedding,
    *,
    rejected: Sequence[FileResult] = (),
    progress: Progress | None = None,
    lock_timeout: float = 2.0,
) -> BatchOutcome:
    """Ingest staged files (``rejected``: refusals already made while staging)."""
    if not paths:
        return BatchOutcome(None, list(rejected))
    before = _regression_before(theme, embed_model)
    report = ingest_files(
        theme, list(paths), embed_model, progress=progress, lock_timeout=lock_timeout
    )
    return _finish(theme, embed_model, report, before, rejected)


def sync_batch(
    theme: Theme,
    embed_model: BaseEmbedding,
    *,
    progress: Progress | None = None,
    lock_timeout: float = 2.0,
) -> BatchOutcome:
    """Bring the index in line with the theme's documents folder."""
    before = _regression_before(theme, embed_model)
    report = sync_theme(theme, embed_model, progress=progress, lock_timeout=lock_timeout)
    return _finish(theme, embed_model, report, before)


def reindex_batch(
    theme: Theme,
    embed_model: BaseEmbedding,
    names: Collection[str] | None = None,
    *,
    progress: Progress | None = None,
    lock_timeout: float = 2.0,
) -> BatchOutcome:
    """Re-chunk and re-embed one, several or (``None``) all stored documents."""
    before = _regression_before(theme, embed_model)
    report = reindex(theme, embed_model, names, progress=progress, lock_timeout=lock_timeout)
    return _finish(theme, embed_model, report, before)


def repair_batch(
    theme: Theme,
    embed_model: BaseEmbedding,
    *,
    progress: Progress | None = None,
    lock_timeout: float = 2.0,
) -> BatchOutcome:
    """The Santé tab's « Réparer »: fix orphans, or rebuild a damaged index from the
    theme's documents (kept); ``outcome.report.rebuilt`` says which."""
    before = _regression_before(theme, embed_model)
    report = repair(theme, embed_model, progress=progress, lock_timeout=lock_timeout)
    return _finish(theme, embed_model, report, before)


def clear_theme_index(theme: Theme, *, lock_timeout: float = 2.0) -> str | None:
    """The Santé tab's « Vider l'index »: publish an empty index (documents kept), even
    when the current one is damaged; returns the new version's name."""
    return clear_index(theme, lock_timeout=lock_timeout)


def index_damage(theme: Theme) -> IndexCorrupted | None:
    """What is wrong with the theme's published index, or ``None`` when it loads."""
    try:
        theme.storage.check_current()
    except IndexCorrupted as exc:
        return exc
    return None


def delete_document(theme: Theme, name: str, *, lock_timeout: float = 2.0) -> FileResult:
    """Remove one stored document (file, chunks, docstore entry)."""
    report = remove_document(theme, name, lock_timeout=lock_timeout)
    record_results(theme, report.files)
    return report.files[0]


# ------------------------------------------------------------------------------- messages

BUSY_FR = "un autre administrateur met à jour ce thème, réessayez dans un instant"
BUSY_EN = "another administrator is updating this theme, try again in a moment"


def user_message(exc: BaseException, language: str = "fr") -> str | None:
    """A sentence for an expected error, or ``None`` for a bug (the page logs it and shows a
    generic sentence; never a traceback)."""
    if isinstance(exc, SettingsInvalid):
        return str(exc)
    if not isinstance(exc, ThemesError):
        return None  # not raised on purpose by the themes library: a bug
    return _themes_message(exc, language == "fr")


def _themes_message(exc: ThemesError, fr: bool) -> str | None:
    """The sentence for an error of the themes library; ``None`` for one the admin cannot act
    on (e.g. a read-only store written to: a bug)."""
    if isinstance(exc, ThemeBusy):
        return (BUSY_FR if fr else BUSY_EN).capitalize() + "."
    if isinstance(exc, (ThemeNotFound, ThemeFolderGone)):
        return (
            "Ce thème n'existe plus (supprimé par un autre administrateur ?) : choisissez-en "
            "un autre."
            if fr
            else "This theme no longer exists (deleted by another admin?): choose another one."
        )
    if isinstance(exc, ThemeExists):
        return (
            "Un thème porte déjà ce nom : choisissez-en un autre."
            if fr
            else "A theme already has this name: choose another one."
        )
    if isinstance(exc, InvalidThemeName):
        return (f"Nom de thème refusé : {exc}" if fr else f"Theme name refused: {exc}").rstrip()
    if isinstance(exc, (RejectedFile, RejectedURL)):
        return str(exc)
    if isinstance(exc, IndexCorrupted):
        return (
            f"L'index de ce thème est endommagé ({exc.detail}) : utilisez « Réparer » (il est "
            "reconstruit à partir des documents, qui sont conservés) ou « Vider l'index » puis "
            "« Synchroniser » dans la page Santé."
            if fr
            else f"This theme's index is damaged ({exc.detail}): use Repair (it is rebuilt from "
            "the documents, which are kept), or Clear the index then Synchronise, in the "
            "Health page."
        )
    if isinstance(exc, IndexWriteFailed):
        return _write_failed_message(exc, fr)
    return None


def _write_failed_message(exc: IndexWriteFailed, fr: bool) -> str:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return (
            "Disque plein : rien n'a été modifié, l'index précédent reste en service. Libérez "
            "de la place puis réessayez."
            if fr
            else "Disk full: nothing was changed, the previous index is still served. Free some "
            "space and try again."
        )
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return (
            "Le dossier du thème est en lecture seule : rien n'a été modifié, l'index précédent "
            "reste en service. Rendez-le accessible en écriture puis réessayez."
            if fr
            else "The theme's folder is read-only: nothing was changed, the previous index is "
            "still served. Make it writable and try again."
        )
    return (
        f"Écriture impossible ({exc}) : rien n'a été modifié."
        if fr
        else f"Could not write ({exc}): nothing was changed."
    )
