"""ScriptedLLM: the only LLM unit tests use (style lesson 7: fakes are scripted chunk queues).

Each model call pops the next script item: a list of text chunks streamed in
order, a plain string (split into ``chunk_size`` pieces), or an exception
instance (raised when the call starts; with ``after_chunks`` it is raised in
the middle of the stream). Prompts received are recorded for assertions.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Generator, Sequence
from dataclasses import dataclass
from typing import Any

from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    ChatResponseAsyncGen,
    ChatResponseGen,
    CompletionResponse,
    CompletionResponseGen,
    LLMMetadata,
    MessageRole,
)
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.llms.custom import CustomLLM


@dataclass
class FailMidStream:
    """Stream ``chunks`` then raise ``error`` (a transport fault in the middle of a stream)."""

    chunks: list[str]
    error: BaseException


@dataclass
class Stall:
    """Stream ``chunks`` then go silent for ``seconds`` (a stalled stream)."""

    chunks: list[str]
    seconds: float


ScriptItem = str | list[str] | BaseException | FailMidStream | Stall


class ScriptExhausted(AssertionError):
    """The engine called the model more often than the test scripted."""


# Every exhaustion is recorded here: the engine turns any model error into a
# typed stop reason, so the exception alone would never fail a test.
EXHAUSTED: list[str] = []


class ScriptedLLM(CustomLLM):
    """A llama-index LLM that replays a script of outputs."""

    chunk_size: int = 7
    _script: list[ScriptItem] = PrivateAttr(default_factory=list)
    _prompts: list[list[ChatMessage]] = PrivateAttr(default_factory=list)

    def __init__(self, script: Sequence[ScriptItem] = (), chunk_size: int = 7, **kw: Any) -> None:
        super().__init__(chunk_size=chunk_size, **kw)
        self._script = list(script)
        self._prompts = []

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(context_window=32768, num_output=1024, is_chat_model=True)

    @property
    def calls(self) -> list[list[ChatMessage]]:
        """The messages of every call, in order."""
        return self._prompts

    @property
    def remaining(self) -> int:
        return len(self._script)

    def enqueue(self, *items: ScriptItem) -> None:
        self._script.extend(items)

    def _next(self, messages: Sequence[ChatMessage]) -> ScriptItem:
        self._prompts.append(list(messages))
        if not self._script:
            message = f"model called {len(self._prompts)} times; script is empty"
            EXHAUSTED.append(message)
            raise ScriptExhausted(message)
        return self._script.pop(0)

    def _chunks(self, item: str | list[str]) -> list[str]:
        if isinstance(item, list):
            return item
        return [item[i : i + self.chunk_size] for i in range(0, len(item), self.chunk_size)] or [""]

    # --- chat API (what the agent uses) ------------------------------------------
    async def astream_chat(
        self, messages: Sequence[ChatMessage], **kwargs: Any
    ) -> ChatResponseAsyncGen:
        item = self._next(messages)
        if isinstance(item, BaseException):
            raise item

        async def gen() -> AsyncGenerator[ChatResponse, None]:
            chunks = item.chunks if isinstance(item, (FailMidStream, Stall)) else self._chunks(item)
            text = ""
            for chunk in chunks:
                text += chunk
                yield ChatResponse(
                    message=ChatMessage(role=MessageRole.ASSISTANT, content=text), delta=chunk
                )
            if isinstance(item, FailMidStream):
                raise item.error
            if isinstance(item, Stall):
                await asyncio.sleep(item.seconds)

        return gen()

    def stream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseGen:
        item = self._next(messages)
        if isinstance(item, BaseException):
            raise item
        assert isinstance(item, (str, list))
        chunks = self._chunks(item)

        def gen() -> Generator[ChatResponse, None, None]:
            text = ""
            for chunk in chunks:
                text += chunk
                yield ChatResponse(
                    message=ChatMessage(role=MessageRole.ASSISTANT, content=text), delta=chunk
                )

        return gen()

    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        *_, last = self.stream_chat(messages, **kwargs)
        return last

    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return self.chat(messages, **kwargs)

    # --- completion API (required by CustomLLM; routed through chat) ---------------
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        response = self.chat([ChatMessage(role=MessageRole.USER, content=prompt)])
        return CompletionResponse(text=response.message.content or "")

    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        def gen() -> Generator[CompletionResponse, None, None]:
            for r in self.stream_chat([ChatMessage(role=MessageRole.USER, content=prompt)]):
                yield CompletionResponse(text=r.message.content or "", delta=r.delta)

        return gen()


class ScriptedLocalLLM(ScriptedLLM):
    """A ``ScriptedLLM`` that is also an ``InProcessModel`` (the llama.cpp model's protocol).

    Tokens are counted as one per 4 characters; ``side_script`` answers the
    side-context calls (intent, translation) in order, "other" once it is empty.
    Per-call keyword arguments (``grammar``, ``max_tokens``) are recorded.
    """

    window: int = 4096
    _lock: Any = PrivateAttr(default=None)
    _side_script: list[str] = PrivateAttr(default_factory=list)
    _side_calls: list[Any] = PrivateAttr(default_factory=list)
    _call_kwargs: list[dict[str, Any]] = PrivateAttr(default_factory=list)
    _prefilled: list[list[ChatMessage]] = PrivateAttr(default_factory=list)

    def __init__(
        self, script: Sequence[ScriptItem] = (), side_script: Sequence[str] = (), **kw: Any
    ) -> None:
        import threading

        super().__init__(script, **kw)
        self._lock = threading.Lock()
        self._side_script = list(side_script)
        self._side_calls = []
        self._call_kwargs = []

    @property
    def generation_lock(self) -> Any:
        return self._lock

    @property
    def context_tokens(self) -> int:
        return self.window

    def count_tokens(self, text: str) -> int:
        return len(text) // 4 + 1

    def count_chat_tokens(self, messages: Sequence[ChatMessage]) -> int:
        return sum(self.count_tokens(m.content or "") + 4 for m in messages)

    def side_complete(
        self,
        prompt: Any,
        *,
        max_tokens: int,
        grammar: str | None = None,
        stop: Sequence[str] = (),
        wait_s: float = 60.0,
    ) -> str:
        self._side_calls.append(prompt)
        return self._side_script.pop(0) if self._side_script else "other"

    @property
    def side_calls(self) -> list[Any]:
        return self._side_calls

    def prefill(self, messages: Sequence[ChatMessage]) -> int:
        self._prefilled.append(list(messages))
        return self.count_chat_tokens(messages)

    @property
    def prefilled(self) -> list[list[ChatMessage]]:
        return self._prefilled

    @property
    def call_kwargs(self) -> list[dict[str, Any]]:
        return self._call_kwargs

    async def astream_chat(
        self, messages: Sequence[ChatMessage], **kwargs: Any
    ) -> ChatResponseAsyncGen:
        from models.inprocess import GenerationUsage

        sink = kwargs.pop("usage_sink", None)
        self._call_kwargs.append(dict(kwargs))
        if sink is not None:
            sink.append(GenerationUsage(self.count_chat_tokens(messages), 0, 0, 0.0))
        return await super().astream_chat(messages, **kwargs)


@dataclass
class Upload:
    """What ``st.file_uploader`` gives, reduced to what staging reads."""

    name: str
    data: bytes

    @property
    def size(self) -> int:
        return len(self.data)

    def getvalue(self) -> bytes:
        return self.data
