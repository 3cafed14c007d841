"""The token budget of one model call: prompt + reserved answer never exceed the window.

A prompt is built from parts of unequal value: the system header and the
question must stay; the history and the tool results may shrink. When the
whole does not fit, ``fit_prompt`` shortens the tool observations (oldest
first, down to a floor), then drops the oldest history messages, then lowers
the room left for the answer (down to ``min_output``). Only when even that
fails does it raise ``ContextOverflowError``: a typed fault that names the
sizes, never a wrong "the model is not answering".

Tokens are counted by a function the caller gives: the model's own tokenizer
for an in-process model, an estimate for a remote one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from llama_index.core.agent.react.types import BaseReasoningStep, ObservationReasoningStep
from llama_index.core.llms import ChatMessage

from models.errors import ContextOverflowError

# Characters per token when no tokenizer is at hand: French and English prose with
# markup average 3.5-4.5 on current tokenizers; 3 overestimates, which is the safe side.
ESTIMATED_CHARS_PER_TOKEN = 3.0
# An observation is never shortened below this many characters.
OBSERVATION_FLOOR_CHARS = 400
SHORTENED_MARK = "\n[… shortened to fit the model's context window]"

CountTokens = Callable[[Sequence[ChatMessage]], int]
Render = Callable[[list[ChatMessage], list[BaseReasoningStep]], list[ChatMessage]]


@dataclass(frozen=True)
class TokenBudget:
    """The window of one model and what a call must leave for the answer."""

    window: int
    max_output: int
    min_output: int = 256
    # Chat templates add a few tokens around what the count sees.
    margin: int = 16


@dataclass
class FittedPrompt:
    """Messages that fit, the answer room left, and what had to give way."""

    messages: list[ChatMessage]
    max_output: int
    prompt_tokens: int
    trimmed: list[str] = field(default_factory=list)


def estimate_tokens(messages: Sequence[ChatMessage]) -> int:
    """A safe over-estimate of a prompt's tokens for models without a local tokenizer."""
    chars = sum(len(m.content or "") + 8 for m in messages)
    return int(chars / ESTIMATED_CHARS_PER_TOKEN) + 1


def fit_prompt(
    history: list[ChatMessage],  # the conversation, ending with the current question
    reasoning: list[BaseReasoningStep],
    render: Render,
    count: CountTokens,
    budget: TokenBudget,
) -> FittedPrompt:
    """Render the prompt, trimmed until it and the answer fit in ``budget.window``."""
    history = list(history)
    reasoning = list(reasoning)
    trimmed: list[str] = []
    limit = budget.window - budget.margin
    while True:
        messages = render(history, reasoning)
        tokens = count(messages)
        if tokens + budget.max_output <= limit:
            return FittedPrompt(messages, budget.max_output, tokens, trimmed)
        if _shorten_oldest_observation(reasoning, tokens + budget.max_output - limit):
            if "observations" not in trimmed:
                trimmed.append("observations")
            continue
        if len(history) > 1:
            # The last message is the question itself: it stays. Drop a whole exchange
            # from the oldest end: a lone answer without its question misleads.
            del history[: min(2, len(history) - 1)]
            if "history" not in trimmed:
                trimmed.append("history")
            continue
        room = limit - tokens
        if room >= budget.min_output:
            trimmed.append("answer length")
            return FittedPrompt(messages, room, tokens, trimmed)
        raise ContextOverflowError(tokens, budget.window, budget.min_output)


def _shorten_oldest_observation(reasoning: list[BaseReasoningStep], excess_tokens: int) -> bool:
    """Shorten the oldest observation still above the floor; False when none is left."""
    for i, step in enumerate(reasoning):
        if not isinstance(step, ObservationReasoningStep):
            continue
        text = step.observation
        if len(text) <= OBSERVATION_FLOOR_CHARS + len(SHORTENED_MARK):
            continue
        # Cut what is too much (estimated generously), at least a quarter of the text.
        cut = max(int(excess_tokens * ESTIMATED_CHARS_PER_TOKEN * 1.2), len(text) // 4)
        keep = max(OBSERVATION_FLOOR_CHARS, len(text) - cut)
        head = text[:keep]
        line_end = head.rfind("\n")
        if line_end > OBSERVATION_FLOOR_CHARS // 2:
            head = head[:line_end]
        reasoning[i] = ObservationReasoningStep(
            observation=head.rstrip() + SHORTENED_MARK, return_direct=step.return_direct
        )
        return True
    return False
