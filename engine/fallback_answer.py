"""The answer of a turn, or the sentence that says why there is none."""

from __future__ import annotations

from engine.agent import TurnState
from engine.prompts import Language, stop_reason_text
from engine.types import LLMFault, StopReason

# Stops whose reason the user is told (any other is an internal error to them).
_NAMED_NO_ANSWER = frozenset(
    {
        StopReason.CANCELLED,
        StopReason.LLM_UNAVAILABLE,
        StopReason.LLM_AUTH_FAILED,
        StopReason.CONTEXT_OVERFLOW,
        StopReason.MODEL_ERROR,
    }
)


def final_answer(state: TurnState, language: Language) -> str:
    """The turn's answer, or why it has none."""
    if state.answer and state.answer.strip():
        return state.answer.strip()
    return no_answer_text(language, state.stop_reason)


def no_answer_text(
    language: Language, stop_reason: StopReason | None, fault: LLMFault | None = None
) -> str:
    """What the user reads when a turn produced no answer."""
    key = stop_reason.value if stop_reason in _NAMED_NO_ANSWER else "internal_error"
    reason = stop_reason_text(language, key, fault)
    if language == "fr":
        return f"Désolé, la réponse n'a pas pu être produite ({reason}). Réessayez."
    return f"Sorry, the answer could not be produced ({reason}). Please retry."
