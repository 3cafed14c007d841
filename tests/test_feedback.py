"""The review list's storage: votes appended per theme, read back newest first."""

from __future__ import annotations

import threading
from pathlib import Path

from themes.feedback import (
    FeedbackEntry,
    FeedbackSource,
    FeedbackStep,
    list_feedback,
    record_feedback,
)


def _entry(rating: int, question: str = "Q ?") -> FeedbackEntry:
    return FeedbackEntry(
        rating=rating,  # type: ignore[arg-type]
        question=question,
        answer="R.",
        sources=[FeedbackSource(file="guide.md", page=2, chunk_id="c1", score=0.5, snippet="x")],
        reasoning=[FeedbackStep(type="thought", content="je cherche")],
    )


def test_votes_are_read_back_newest_first_with_their_sources(tmp_path: Path) -> None:
    record_feedback(tmp_path, _entry(1, "première"))
    record_feedback(tmp_path, _entry(-1, "seconde"))
    entries = list_feedback(tmp_path)
    assert [e.question for e in entries] == ["seconde", "première"]
    assert entries[1].sources[0].file == "guide.md"
    assert entries[0].reasoning[0].content == "je cherche"
    assert [e.question for e in list_feedback(tmp_path, rating=-1)] == ["seconde"]


def test_a_torn_line_is_skipped_and_the_others_survive(tmp_path: Path) -> None:
    record_feedback(tmp_path, _entry(1, "bonne"))
    with (tmp_path / "feedback.jsonl").open("a", encoding="utf-8") as f:
        f.write('{"rating": 1, "quest')  # a crash in the middle of a write
    record_feedback(tmp_path, _entry(-1, "après"))
    assert [e.question for e in list_feedback(tmp_path)] == ["après", "bonne"]


def test_concurrent_votes_are_all_kept(tmp_path: Path) -> None:
    threads = [
        threading.Thread(target=record_feedback, args=(tmp_path, _entry(1, f"q{i}")))
        for i in range(20)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(e.question for e in list_feedback(tmp_path)) == sorted(f"q{i}" for i in range(20))


def test_no_file_means_no_votes(tmp_path: Path) -> None:
    assert list_feedback(tmp_path / "nothing") == []


def test_a_changed_vote_replaces_the_earlier_one(tmp_path: Path) -> None:
    first = record_feedback(tmp_path, _entry(-1, "même réponse"))
    record_feedback(tmp_path, first.model_copy(update={"rating": 1}))
    entries = list_feedback(tmp_path)
    assert [(e.id, e.rating) for e in entries] == [(first.id, 1)]
    assert list_feedback(tmp_path, rating=-1) == []
