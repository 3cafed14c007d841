"""Regression questions: each names the document that must be retrieved for it.

Stored per theme in ``<theme_dir>/regression.json`` (atomic writes under a lock). A run
asks every question of the theme's retriever and records the rank of the first chunk of
the expected document (``None`` when it is not in the top ``k``); hit@k is the share of
questions whose document is found. ``compare_runs`` tells what an ingest changed: a
question whose document is no longer found, or found lower, makes the comparison
``worse`` and the page warns.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from pathlib import Path

import filelock
from llama_index.core.base.embeddings.base import BaseEmbedding
from pydantic import BaseModel, Field, ValidationError

from manager.documents import atomic_write_json
from themes.index_storage import IndexVersion
from themes.retrieval import HybridRetriever
from themes.theme import RetrievalSettings, Theme

REGRESSION_FILE = "regression.json"
_LOCK_FILE = ".regression.lock"
DEFAULT_K = 5
MAX_QUESTION_CHARS = 1000
RUNS_KEPT = 10


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class RegressionQuestion(BaseModel):
    id: str = Field(default_factory=lambda: uuid.uuid4().hex[:12])
    question: str
    expected_document: str
    created_at: str = Field(default_factory=_now)


class QuestionResult(BaseModel):
    question_id: str
    question: str
    expected_document: str
    rank: int | None  # 1-based rank of the expected document's best chunk; None = missed

    @property
    def hit(self) -> bool:
        return self.rank is not None


class RegressionRun(BaseModel):
    version: str | None
    k: int
    ran_at: str = Field(default_factory=_now)
    label: str = ""  # what triggered it: "manual", "before ingest", "after ingest"...
    results: list[QuestionResult] = Field(default_factory=list)

    @property
    def hits(self) -> int:
        return sum(r.hit for r in self.results)

    @property
    def hit_rate(self) -> float:
        return self.hits / len(self.results) if self.results else 1.0


class RegressionSet(BaseModel):
    k: int = Field(DEFAULT_K, ge=1, le=50)
    questions: list[RegressionQuestion] = Field(default_factory=list)
    runs: list[RegressionRun] = Field(default_factory=list)  # oldest first

    @property
    def last_run(self) -> RegressionRun | None:
        return self.runs[-1] if self.runs else None


class InvalidQuestion(ValueError):
    """A regression question that cannot be recorded; the message says why."""


def _path(theme: Theme) -> Path:
    return theme.directory / REGRESSION_FILE


def load_regression(theme: Theme) -> RegressionSet:
    """The theme's questions and recent runs (empty when none were recorded)."""
    try:
        data = json.loads(_path(theme).read_text(encoding="utf-8"))
        return RegressionSet.model_validate(data)
    except FileNotFoundError:
        return RegressionSet()
    except (OSError, ValueError, ValidationError) as exc:
        raise InvalidQuestion(
            f"{_path(theme)} is unreadable ({type(exc).__name__}); fix or delete the file"
        ) from exc


def _save(theme: Theme, data: RegressionSet) -> None:
    atomic_write_json(_path(theme), data.model_dump(mode="json"))


def _lock(theme: Theme) -> filelock.FileLock:
    return filelock.FileLock(str(theme.directory / _LOCK_FILE), timeout=10)


def add_question(theme: Theme, question: str, expected_document: str) -> RegressionQuestion:
    """Record a question and the document that must answer it."""
    text = question.strip()
    if not text:
        raise InvalidQuestion("type the question the document must answer")
    if len(text) > MAX_QUESTION_CHARS:
        raise InvalidQuestion(f"keep the question under {MAX_QUESTION_CHARS} characters")
    if not expected_document.strip():
        raise InvalidQuestion("choose the document that must be retrieved")
    item = RegressionQuestion(question=text, expected_document=expected_document.strip())
    with _lock(theme):
        data = load_regression(theme)
        data.questions.append(item)
        _save(theme, data)
    return item


def remove_question(theme: Theme, question_id: str) -> bool:
    """Forget a question; False when there was none with that id."""
    with _lock(theme):
        data = load_regression(theme)
        kept = [q for q in data.questions if q.id != question_id]
        if len(kept) == len(data.questions):
            return False
        data.questions = kept
        _save(theme, data)
    return True


def set_k(theme: Theme, k: int) -> None:
    with _lock(theme):
        data = load_regression(theme)
        data.k = k
        _save(theme, data)


def run_questions(
    version: IndexVersion,
    embed_model: BaseEmbedding,
    settings: RetrievalSettings,
    questions: list[RegressionQuestion],
    k: int,
    *,
    label: str = "",
) -> RegressionRun:
    """Ask every question of ``version`` (no LLM: no translation) and rank the expected file."""
    run = RegressionRun(version=version.name, k=k, label=label)
    if not questions:
        return run
    retrieval = settings.model_copy(
        update={"top_k": k, "translate_queries": False, "llm_extraction": False}
    )
    # Compression cuts sentences, not chunks: ranks are the same without it, and faster.
    retrieval = retrieval.model_copy(update={"compression": False})
    retriever = HybridRetriever(version, embed_model, retrieval)
    for q in questions:
        rank = None
        if version.vectors.count():
            for item in retriever.retrieve(q.question).items:
                if item.file_name == q.expected_document:
                    rank = item.rank
                    break
        run.results.append(
            QuestionResult(
                question_id=q.id,
                question=q.question,
                expected_document=q.expected_document,
                rank=rank,
            )
        )
    return run


def record_run(theme: Theme, run: RegressionRun) -> None:
    """Keep ``run`` as the theme's latest (the last ``RUNS_KEPT`` are kept)."""
    with _lock(theme):
        data = load_regression(theme)
        data.runs = [*data.runs, run][-RUNS_KEPT:]
        _save(theme, data)


class ChangeKind(Enum):
    LOST = "lost"  # found before, not any more
    LOWER = "lower"  # still found, at a worse rank
    GAINED = "gained"
    HIGHER = "higher"
    SAME = "same"
    NEW = "new"  # no result before (question added since)


@dataclass(frozen=True)
class QuestionChange:
    question: str
    expected_document: str
    before: int | None
    after: int | None
    kind: ChangeKind


@dataclass(frozen=True)
class RegressionComparison:
    before: RegressionRun
    after: RegressionRun
    changes: list[QuestionChange]

    @property
    def worse(self) -> bool:
        """True when a question lost its document or found it lower."""
        return any(c.kind in (ChangeKind.LOST, ChangeKind.LOWER) for c in self.changes)

    @property
    def regressions(self) -> list[QuestionChange]:
        return [c for c in self.changes if c.kind in (ChangeKind.LOST, ChangeKind.LOWER)]


def _kind(before: int | None, after: int | None, known: bool) -> ChangeKind:
    if not known:
        return ChangeKind.NEW
    if before is not None and after is None:
        return ChangeKind.LOST
    if before is None and after is not None:
        return ChangeKind.GAINED
    if before is not None and after is not None:
        if after > before:
            return ChangeKind.LOWER
        if after < before:
            return ChangeKind.HIGHER
    return ChangeKind.SAME


def compare_runs(before: RegressionRun, after: RegressionRun) -> RegressionComparison:
    """Per question: what changed between two runs (matched by question id)."""
    previous = {r.question_id: r for r in before.results}
    changes = []
    for r in after.results:
        old = previous.get(r.question_id)
        changes.append(
            QuestionChange(
                question=r.question,
                expected_document=r.expected_document,
                before=old.rank if old else None,
                after=r.rank,
                kind=_kind(old.rank if old else None, r.rank, old is not None),
            )
        )
    return RegressionComparison(before, after, changes)
