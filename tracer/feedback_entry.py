"""The feedback record a thumbs vote on an answer becomes."""

from __future__ import annotations

from typing import Literal

from themes.feedback import FeedbackEntry, FeedbackStep
from tracer.conversation import ChatEntry, Conversation

Rating = Literal[1, -1]


def rating_from_vote(vote: int) -> Rating:
    """Streamlit's thumbs widget gives 1 for up and 0 for down."""
    return 1 if vote == 1 else -1


def vote_from_rating(rating: int) -> int:
    """The widget value that shows a saved rating again."""
    return 1 if rating == 1 else 0


def feedback_entry(conversation: Conversation, answer: ChatEntry, rating: Rating) -> FeedbackEntry:
    """The answer with its question, sources and reasoning, as the admin reviews it."""
    return FeedbackEntry(
        id=answer.id,
        rating=rating,
        question=conversation.question_before(answer.id),
        answer=answer.content,
        stop_reason=answer.stop_reason or "",
        sources=list(answer.sources),
        reasoning=[FeedbackStep(type=r.type, content=r.content) for r in answer.reasoning],
    )
