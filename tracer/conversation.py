"""The chat page's conversation: typed entries, what the engine is given, follow-up actions.

The engine is stateless (one engine serves every session): the page keeps the
conversation and hands it back before every prompt.
An assistant entry keeps what the page shows under an answer: its stop
reason, its sources and its reasoning blocks.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, Field

from engine.types import ReActBlock, ReActType, StopReason, TurnOutcome
from themes.feedback import FeedbackSource, FeedbackStep

# The review list stores what the conversation holds: one model for both.
SourceRef = FeedbackSource


class ReasoningStep(FeedbackStep):
    """One reasoning block of a turn (``type`` is a ``ReActType`` value)."""

    def as_block(self) -> ReActBlock:
        try:
            kind = ReActType(self.type)
        except ValueError:
            kind = ReActType.UNKNOWN
        return ReActBlock(kind, self.content)


class ChatEntry(BaseModel):
    """One message of the conversation."""

    id: str = Field(default_factory=lambda: uuid.uuid4().hex[:12])
    role: Literal["user", "assistant"]
    content: str
    stop_reason: str | None = None
    detail: str | None = None
    # The model's provider when it failed (llm_unavailable, llm_auth_failed); session only.
    provider: str | None = None
    sources: list[SourceRef] = Field(default_factory=list)
    reasoning: list[ReasoningStep] = Field(default_factory=list)
    rating: int | None = None

    @property
    def stop(self) -> StopReason | None:
        try:
            return StopReason(self.stop_reason) if self.stop_reason else None
        except ValueError:
            return None


class FollowUp(str, Enum):
    """What the user can do after a turn that did not end with a plain answer."""

    CONTINUE = "continue"
    ANSWER_NOW = "answer_now"
    RETRY = "retry"


_FOLLOW_UPS: dict[StopReason, tuple[FollowUp, ...]] = {
    StopReason.MAX_STEPS: (FollowUp.CONTINUE, FollowUp.ANSWER_NOW, FollowUp.RETRY),
    StopReason.CANCELLED: (FollowUp.CONTINUE, FollowUp.ANSWER_NOW, FollowUp.RETRY),
    StopReason.FORCED_FINAL: (FollowUp.CONTINUE, FollowUp.RETRY),
    StopReason.LLM_UNAVAILABLE: (FollowUp.RETRY,),
    StopReason.LLM_AUTH_FAILED: (FollowUp.RETRY,),
    StopReason.CONTEXT_OVERFLOW: (FollowUp.RETRY,),
    StopReason.MODEL_ERROR: (FollowUp.RETRY,),
    StopReason.INTERNAL_ERROR: (FollowUp.RETRY,),
}

_FOLLOW_UP_PROMPTS = {
    "fr": {
        FollowUp.CONTINUE: "Continue ton raisonnement là où tu t'es arrêté et termine la réponse.",
        FollowUp.ANSWER_NOW: (
            "Réponds maintenant avec ce que tu sais déjà, sans utiliser d'autre outil, "
            "en disant ce qui reste incertain."
        ),
    },
    "en": {
        FollowUp.CONTINUE: "Continue your reasoning where you stopped and finish the answer.",
        FollowUp.ANSWER_NOW: (
            "Answer now with what you already know, without using another tool, "
            "and say what remains uncertain."
        ),
    },
}


def follow_ups(stop_reason: StopReason | None) -> tuple[FollowUp, ...]:
    """The actions offered under a turn that ended for ``stop_reason``."""
    return _FOLLOW_UPS.get(stop_reason, ()) if stop_reason is not None else ()


def follow_up_prompt(action: FollowUp, language: str) -> str:
    """The message sent for CONTINUE or ANSWER_NOW (RETRY re-sends the question)."""
    return _FOLLOW_UP_PROMPTS["en" if language == "en" else "fr"][action]


class Conversation(BaseModel):
    """All messages of one theme's conversation, oldest first."""

    entries: list[ChatEntry] = Field(default_factory=list)

    def add_user(self, text: str) -> ChatEntry:
        entry = ChatEntry(role="user", content=text)
        self.entries.append(entry)
        return entry

    def add_assistant(
        self, outcome: TurnOutcome | None, answer: str, blocks: Sequence[ReActBlock]
    ) -> ChatEntry:
        """Record a finished turn; ``answer`` is what the tracer showed."""
        entry = ChatEntry(
            role="assistant",
            content=answer or (outcome.answer if outcome else ""),
            stop_reason=(outcome.stop_reason.value if outcome else StopReason.CANCELLED.value),
            detail=outcome.detail if outcome else None,
            provider=outcome.fault.provider if outcome and outcome.fault else None,
            sources=[
                SourceRef(
                    file=s.file, page=s.page, chunk_id=s.chunk_id, score=s.score, snippet=s.snippet
                )
                for s in (outcome.sources if outcome else [])
            ],
            reasoning=[
                ReasoningStep(type=b.type.value, content=b.content)
                for b in blocks
                if not b.type.is_closing
            ],
        )
        self.entries.append(entry)
        return entry

    def engine_history(self) -> list[dict[str, Any]]:
        """The messages in the form ``ReActEngine.set_history`` takes."""
        history: list[dict[str, Any]] = []
        for e in self.entries:
            message: dict[str, Any] = {"role": e.role, "content": e.content}
            if e.stop is StopReason.WAITING_FOR_USER:
                message["stop_reason"] = StopReason.WAITING_FOR_USER.value
            history.append(message)
        return history

    @property
    def waiting_for_user(self) -> bool:
        """The last answer is a question the model asked the user (``ask_user``)."""
        return bool(self.entries) and self.entries[-1].stop is StopReason.WAITING_FOR_USER

    def question_before(self, entry_id: str) -> str:
        """The user message that an assistant entry answers."""
        for i, e in enumerate(self.entries):
            if e.id == entry_id:
                for previous in reversed(self.entries[:i]):
                    if previous.role == "user":
                        return previous.content
        return ""

    def take_back_last_turn(self) -> str | None:
        """Remove the last question and its answer (to ask again); returns the question."""
        while self.entries and self.entries[-1].role == "assistant":
            self.entries.pop()
        if self.entries and self.entries[-1].role == "user":
            return self.entries.pop().content
        return None

    def find(self, entry_id: str) -> ChatEntry | None:
        return next((e for e in self.entries if e.id == entry_id), None)
