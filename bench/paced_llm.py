"""A scripted model that answers like a real one in time: a first token after 0.5 s, then
30 tokens/s, for the load benchmark (``bench.load``).

Unlike ``tests.fakes.ScriptedLLM`` it has no queue to share between sessions: every call
builds its answer from its own prompt, so eight concurrent sessions each get theirs. The
answer repeats the question's marker (``S3Q1``) and the theme fact found in the passages
(``FAIT-ALPHA``), so the benchmark can tell that a session saw only its own question, and
only its own theme's documents.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    ChatResponseAsyncGen,
    ChatResponseGen,
    CompletionResponse,
    CompletionResponseAsyncGen,
    CompletionResponseGen,
    LLMMetadata,
    MessageRole,
)
from llama_index.core.llms import CustomLLM

FIRST_TOKEN_S = 0.5
TOKENS_PER_S = 30.0
MARKER = re.compile(r"\bS\d+Q\d+\b")
FACT = re.compile(r"\bFAIT-[A-Z]+\b")
BODY_WORDS = 60  # about the length of a short documented answer


def answer_for(messages: Sequence[ChatMessage]) -> str:
    """The whole output for this prompt: the last question's marker, the facts it was shown."""
    # The current question is the last one in the prompt (history first, passages after
    # it carry no marker); its passages are what the prompt holds of the documents.
    prompt = "\n".join(str(m.content) for m in messages)
    markers = MARKER.findall(prompt)
    marker = markers[-1] if markers else "S?Q?"
    facts = sorted(set(FACT.findall(prompt)))
    body = " ".join(["mot"] * BODY_WORDS)
    return (
        f"Thought: Les passages suffisent.\nAnswer: DEBUT-{marker} {' '.join(facts) or 'AUCUN'} "
        f"{body} FIN-{marker}."
    )


def _tokens(text: str) -> list[str]:
    # A word and its following space is close to one token of a small model's vocabulary.
    return re.findall(r"\S+\s*|\s+", text)


class PacedLLM(CustomLLM):
    """Streams ``answer_for(messages)`` at a real model's pace; safe across threads."""

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(context_window=32768, num_output=1024, is_chat_model=True)

    # ------------------------------------------------------------------ sync

    def _paced(self, text: str) -> Iterator[str]:
        time.sleep(FIRST_TOKEN_S)
        for token in _tokens(text):
            yield token
            time.sleep(1.0 / TOKENS_PER_S)

    def stream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseGen:
        text = answer_for(messages)

        def gen() -> ChatResponseGen:
            done = ""
            for token in self._paced(text):
                done += token
                yield ChatResponse(
                    message=ChatMessage(role=MessageRole.ASSISTANT, content=done), delta=token
                )

        return gen()

    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        text = "".join(self._paced(answer_for(messages)))
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=text))

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        messages = [ChatMessage(role=MessageRole.USER, content=prompt)]
        return CompletionResponse(text="".join(self._paced(answer_for(messages))))

    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        messages = [ChatMessage(role=MessageRole.USER, content=prompt)]

        def gen() -> CompletionResponseGen:
            done = ""
            for token in self._paced(answer_for(messages)):
                done += token
                yield CompletionResponse(text=done, delta=token)

        return gen()

    # ------------------------------------------------------------------ async

    async def _apaced(self, text: str) -> AsyncIterator[str]:
        await asyncio.sleep(FIRST_TOKEN_S)
        for token in _tokens(text):
            yield token
            await asyncio.sleep(1.0 / TOKENS_PER_S)

    async def astream_chat(
        self, messages: Sequence[ChatMessage], **kwargs: Any
    ) -> ChatResponseAsyncGen:
        text = answer_for(messages)

        async def gen() -> ChatResponseAsyncGen:
            done = ""
            async for token in self._apaced(text):
                done += token
                yield ChatResponse(
                    message=ChatMessage(role=MessageRole.ASSISTANT, content=done), delta=token
                )

        return gen()

    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        text = "".join([t async for t in self._apaced(answer_for(messages))])
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=text))

    async def acomplete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponse:
        messages = [ChatMessage(role=MessageRole.USER, content=prompt)]
        text = "".join([t async for t in self._apaced(answer_for(messages))])
        return CompletionResponse(text=text)

    async def astream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseAsyncGen:
        messages = [ChatMessage(role=MessageRole.USER, content=prompt)]

        async def gen() -> CompletionResponseAsyncGen:
            done = ""
            async for token in self._apaced(answer_for(messages)):
                done += token
                yield CompletionResponse(text=done, delta=token)

        return gen()
