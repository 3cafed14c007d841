"""What the chat page does on a run: ask a typed question, resume an interrupted turn,
follow up on the last answer, or nothing.

A Streamlit rerun can arrive in the middle of a turn (seen: the cookie component
reporting a write just after page load). The page then closes the stream and keeps the
question as a ``PendingTurn`` to ask again on the next run rather than lose it. A turn
interrupted more than ``MAX_TURN_RESUMES`` times in a row ends as unanswered, which the
page shows with a "retry" button. ``next_step`` is pure: the page holds the state
between runs and carries out the step.
"""

from __future__ import annotations

from dataclasses import dataclass

from tracer.conversation import FollowUp, follow_up_prompt

MAX_TURN_RESUMES = 3


@dataclass(frozen=True)
class PendingTurn:
    """A question whose turn a rerun interrupted, and how many times in a row."""

    prompt: str
    shown: str | None  # what the conversation records, when not the prompt itself
    interruptions: int

    @property
    def question(self) -> str:
        return self.shown or self.prompt


@dataclass(frozen=True)
class AskTurn:
    """Send ``prompt`` to the engine; the conversation records ``shown`` when given."""

    prompt: str
    shown: str | None = None


@dataclass(frozen=True)
class RecordUnanswered:
    """Give up on ``question``: record it with an empty answer the user can retry."""

    question: str


@dataclass(frozen=True)
class RetryLastQuestion:
    """Take back the last question and its answer, and ask it again."""


@dataclass(frozen=True)
class Idle:
    """Nothing to send on this run."""


Step = AskTurn | RecordUnanswered | RetryLastQuestion | Idle


def next_step(
    pending: PendingTurn | None, prompt: str | None, action: FollowUp | None, language: str
) -> tuple[PendingTurn | None, Step]:
    """The pending turn to keep while this run's step runs, and the step.

    A typed question comes first (it drops an interrupted one), then the interrupted
    question, then a follow-up button.
    """
    if prompt and prompt.strip():
        return None, AskTurn(prompt.strip())
    if pending is not None:
        if pending.interruptions <= MAX_TURN_RESUMES:
            return pending, AskTurn(pending.prompt, pending.shown)
        return None, RecordUnanswered(pending.question)
    if action is FollowUp.RETRY:
        return None, RetryLastQuestion()
    if action is not None:
        return None, AskTurn(follow_up_prompt(action, language))
    return None, Idle()


def typed_question(value: object) -> PendingTurn | None:
    """The question the chat box just sent, kept as a turn still to run.

    Kept by the chat box's ``on_submit`` callback, which Streamlit runs before the
    script: a rerun that cuts that run short before its turn starts (seen under load:
    the cookie component's report of the last answer's write) then cannot lose the
    question; the next run asks it, as it asks an interrupted turn again.
    """
    if not isinstance(value, str) or not value.strip():
        return None
    return PendingTurn(value.strip(), None, 0)


def interrupted(pending: PendingTurn | None, turn: AskTurn) -> PendingTurn:
    """The state after a rerun cut ``turn`` short (``pending``: the state it ran under)."""
    count = pending.interruptions if pending is not None else 0
    return PendingTurn(turn.prompt, turn.shown, count + 1)
