"""The chat's 👍/👎 on answers, kept per theme for the RAG Manager's review list.

One JSON object per line in ``<theme_dir>/feedback.jsonl``. Appends hold a
file lock and write a whole line with one ``write`` call, so two chat sessions
voting at once never interleave; a line that cannot be read (a crash in the
middle of a write) is skipped, never fatal for the others.
"""

from __future__ import annotations

import json
import logging
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import filelock
from pydantic import BaseModel, Field, ValidationError

logger = logging.getLogger(__name__)

FEEDBACK_FILE = "feedback.jsonl"
_LOCK_FILE = ".feedback.lock"
_MAX_TEXT = 20_000  # characters kept of a question, an answer or a block


class FeedbackSource(BaseModel):
    """A passage the rated answer cited."""

    file: str
    page: int | None = None
    chunk_id: str = ""
    score: float = 0.0
    snippet: str = ""


class FeedbackStep(BaseModel):
    """One reasoning block of the rated turn (type is a ``ReActType`` value)."""

    type: str
    content: str


class FeedbackEntry(BaseModel):
    """One vote on one answer."""

    id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    created_at: str = Field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    rating: Literal[1, -1]
    question: str
    answer: str
    stop_reason: str = "answered"
    sources: list[FeedbackSource] = Field(default_factory=list)
    reasoning: list[FeedbackStep] = Field(default_factory=list)
    comment: str = ""

    @property
    def is_positive(self) -> bool:
        return self.rating == 1


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_TEXT else text[:_MAX_TEXT] + "…"


def record_feedback(theme_dir: Path, entry: FeedbackEntry) -> FeedbackEntry:
    """Append ``entry`` to the theme's review list; returns what was stored."""
    stored = entry.model_copy(
        update={
            "question": _clip(entry.question),
            "answer": _clip(entry.answer),
            "comment": _clip(entry.comment),
            "reasoning": [
                FeedbackStep(type=s.type, content=_clip(s.content)) for s in entry.reasoning
            ],
        }
    )
    line = json.dumps(stored.model_dump(), ensure_ascii=False) + "\n"
    theme_dir.mkdir(parents=True, exist_ok=True)
    with (
        filelock.FileLock(str(theme_dir / _LOCK_FILE), timeout=10),
        (theme_dir / FEEDBACK_FILE).open("a+b") as f,
    ):
        # A torn last line (crash mid-write) must not swallow this one.
        if f.tell() > 0:
            f.seek(-1, 2)
            if f.read(1) != b"\n":
                line = "\n" + line
        f.write(line.encode("utf-8"))
    return stored


def list_feedback(theme_dir: Path, rating: int | None = None) -> list[FeedbackEntry]:
    """The theme's votes, newest first; ``rating`` 1 or -1 keeps only those."""
    path = theme_dir / FEEDBACK_FILE
    if not path.is_file():
        return []
    # A vote changed later replaces the earlier one (same id); file order is time order.
    latest: dict[str, tuple[int, FeedbackEntry]] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data: Any = json.loads(line)
            entry = FeedbackEntry.model_validate(data)
        except (json.JSONDecodeError, ValidationError):
            logger.warning("%s line %d: unreadable feedback entry skipped", path, number)
            continue
        latest[entry.id] = (number, entry)
    ordered = [entry for _, entry in sorted(latest.values(), key=lambda p: p[0], reverse=True)]
    return [e for e in ordered if rating is None or e.rating == rating]
