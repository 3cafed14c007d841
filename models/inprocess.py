"""What the engine needs to know of a model computed by this process (llama.cpp).

A model reached over a network is slow to answer because of the network; an
in-process one because it reads the prompt on the local CPU. The engine
treats them differently (one long attempt instead of retries, a compact
prompt, a token budget counted with the model's own tokenizer, constrained
output), and recognises the second kind by this protocol, not by class names.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from llama_index.core.llms import ChatMessage


@dataclass(frozen=True)
class GenerationUsage:
    """One model call: tokens read (and how many came from the KV cache), tokens written."""

    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    seconds: float


@runtime_checkable
class InProcessModel(Protocol):
    """A model run in this process: one generation at a time, its own tokenizer."""

    @property
    def generation_lock(self) -> threading.Lock:
        """Held around every generation: a llama.cpp context is not thread-safe."""
        ...

    @property
    def context_tokens(self) -> int:
        """The context window, in tokens."""
        ...

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` as the model reads it (special tokens included)."""
        ...

    def count_chat_tokens(self, messages: Sequence[ChatMessage]) -> int:
        """Tokens of the whole prompt these messages become."""
        ...

    def side_complete(
        self,
        prompt: str | Sequence[ChatMessage],
        *,
        max_tokens: int,
        grammar: str | None = None,
        stop: Sequence[str] = (),
        wait_s: float = 60.0,
    ) -> str:
        """A short completion in a second, small context, so the main one keeps its cache.

        A string is one user message; ``wait_s`` bounds the wait for the model.
        """
        ...


def is_in_process(llm: object) -> bool:
    """True for a model computed by this process rather than reached over a network."""
    return isinstance(llm, InProcessModel)
