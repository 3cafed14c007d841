"""The answer of a turn, or the sentence that says why there is none."""

from __future__ import annotations

from engine.prompts import FALLBACK_ANSWER, Language, stop_reason_text
from engine.turn_state import TurnState
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


def compose_fallback_answer(state: TurnState, reason: StopReason) -> str:
    """A clear final answer built from what the turn learnt, when the model could not give one."""
    texts = FALLBACK_ANSWER[state.language]
    reason_text = stop_reason_text(state.language, reason.value, state.fault)
    lines = [texts["intro"].format(reason=reason_text)]
    # Each distinct finding once: a model going in circles gets the same one many times.
    # The findings are written for the user (engine.observations.findings_of): never
    # the Observation's own framing, which is written for the model.
    useful = list(dict.fromkeys(state.findings))
    if useful:
        lines.append(texts["known"])
        # One line per finding: a tool's own line breaks could read as ReAct markers.
        lines.extend(f"- {finding}" for finding in useful[-5:])
    else:
        lines.append(texts["nothing"])
    lines.append(texts["next"])
    return "\n".join(lines)
