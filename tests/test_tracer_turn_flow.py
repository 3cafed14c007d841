"""The chat page's turn state machine: typed question, interrupted turn, follow-ups."""

from __future__ import annotations

from tracer.conversation import FollowUp, follow_up_prompt
from tracer.turn_flow import (
    MAX_TURN_RESUMES,
    AskTurn,
    Idle,
    PendingTurn,
    RecordUnanswered,
    RetryLastQuestion,
    interrupted,
    next_step,
    typed_question,
)


def test_nothing_typed_nothing_pending_is_idle() -> None:
    assert next_step(None, None, None, "fr") == (None, Idle())
    assert next_step(None, "   ", None, "fr") == (None, Idle())


def test_a_typed_question_is_asked_stripped_and_drops_an_interrupted_one() -> None:
    pending = PendingTurn("old", None, 1)
    assert next_step(pending, "  new?  ", FollowUp.RETRY, "fr") == (None, AskTurn("new?"))


def test_an_interrupted_turn_is_asked_again_and_stays_pending_while_it_runs() -> None:
    pending = PendingTurn("instruction", "shown", MAX_TURN_RESUMES)
    assert next_step(pending, None, None, "fr") == (pending, AskTurn("instruction", "shown"))


def test_a_turn_interrupted_too_often_is_recorded_unanswered() -> None:
    pending = PendingTurn("instruction", "shown", MAX_TURN_RESUMES + 1)
    assert next_step(pending, None, None, "fr") == (None, RecordUnanswered("shown"))
    bare = PendingTurn("question", None, MAX_TURN_RESUMES + 1)
    assert next_step(bare, None, None, "fr")[1] == RecordUnanswered("question")


def test_follow_up_buttons() -> None:
    assert next_step(None, None, FollowUp.RETRY, "en") == (None, RetryLastQuestion())
    step = next_step(None, None, FollowUp.CONTINUE, "en")[1]
    assert step == AskTurn(follow_up_prompt(FollowUp.CONTINUE, "en"))


def test_interruptions_are_counted_in_a_row() -> None:
    first = interrupted(None, AskTurn("q"))
    assert first == PendingTurn("q", None, 1)
    again = interrupted(first, AskTurn("q"))
    assert again.interruptions == 2


def test_a_turn_that_keeps_being_interrupted_ends_after_the_bound() -> None:
    pending: PendingTurn | None = None
    asked = 0
    while True:
        pending, step = next_step(pending, "q" if asked == 0 else None, None, "fr")
        if not isinstance(step, AskTurn):
            break
        asked += 1
        pending = interrupted(pending, step)
    assert step == RecordUnanswered("q") and asked == MAX_TURN_RESUMES + 1


def test_a_sent_question_is_kept_stripped_as_a_turn_still_to_run() -> None:
    assert typed_question("  Combien ?  ") == PendingTurn("Combien ?", None, 0)
    assert typed_question("   ") is None
    assert typed_question(None) is None
    # Kept, it is asked on the next run even when that run has no question of its own.
    pending = typed_question("Combien ?")
    assert next_step(pending, None, None, "fr") == (pending, AskTurn("Combien ?"))
