"""A thumbs vote becomes a feedback record with its question, sources and reasoning."""

from __future__ import annotations

from engine.types import ReActBlock, ReActType
from tracer.conversation import Conversation, ReasoningStep, SourceRef
from tracer.engine_context import EngineContext, needs_restart
from tracer.feedback_entry import feedback_entry, rating_from_vote, vote_from_rating


def test_votes_and_ratings() -> None:
    assert rating_from_vote(1) == 1 and rating_from_vote(0) == -1
    assert vote_from_rating(1) == 1 and vote_from_rating(-1) == 0


def test_the_entry_carries_the_question_before_the_answer() -> None:
    conversation = Conversation()
    conversation.add_user("first?")
    conversation.add_user("Where is the pump?")
    answer = conversation.add_assistant(None, "In hall B.", [ReActBlock(ReActType.THOUGHT, "x")])
    answer.sources = [SourceRef(file="pump.pdf", page=3, score=0.9)]
    entry = feedback_entry(conversation, answer, -1)
    assert entry.id == answer.id and entry.rating == -1
    assert entry.question == "Where is the pump?" and entry.answer == "In hall B."
    assert [s.file for s in entry.sources] == ["pump.pdf"]
    assert [(s.type, s.content) for s in entry.reasoning] == [
        (step.type, step.content) for step in answer.reasoning
    ]
    assert all(isinstance(step, ReasoningStep) for step in answer.reasoning)


def test_engine_restarts_only_when_its_context_changes() -> None:
    context = EngineContext("rh", "v1", "fr", "standard")
    assert needs_restart(None, context)
    assert not needs_restart(EngineContext("rh", "v1", "fr", "standard"), context)
    assert needs_restart(context, context._replace(index_version="v2"))
    assert needs_restart(context, context._replace(detail="concise"))
