"""Chat mode: a theme answered by llama-index's chat engine instead of the ReAct loop."""

from __future__ import annotations

import asyncio
import logging
import time
import traceback
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from engine.fallback_answer import no_answer_text
from engine.stream_events import RawText, Sources, StreamEvent, TurnEnd
from engine.transport import FaultKind, backoff_delay, classify_fault, redact
from engine.turn_policy import retry_policy
from engine.turn_setup import TurnSetup
from engine.types import LLMFault, ReActBlock, ReActType, Source, StopReason, TurnOutcome
from models.llms import LLMConfigurationError, provider_of

logger = logging.getLogger(__name__)

_CHAT_LANGUAGE_RULE = {"fr": "Réponds en français.", "en": "Answer in English."}
_CHAT_STOP_OF_FAULT = {
    FaultKind.RETRYABLE: StopReason.LLM_UNAVAILABLE,
    FaultKind.AUTH: StopReason.LLM_AUTH_FAILED,
    FaultKind.CONTEXT_OVERFLOW: StopReason.CONTEXT_OVERFLOW,
    FaultKind.MODEL_ERROR: StopReason.MODEL_ERROR,
    FaultKind.FATAL: StopReason.INTERNAL_ERROR,
}


async def stream_chat_turn(setup: TurnSetup, prompt: str) -> AsyncIterator[StreamEvent]:
    """One turn in the theme's chat mode: retrieval, then one streamed answer.

    llama-index's ``CondensePlusContextChatEngine`` condenses the history and
    the prompt into one question, retrieves with the theme's retriever and
    streams the answer. The raw text is "Answer: " then the tokens; the
    retrieved passages come as one ``Sources`` event at the end. The
    response's token generator is always closed, even when the consumer
    stops early: left open, it keeps the model's HTTP stream (and a file
    descriptor) alive.
    """
    turn = _ChatTurn(setup)
    yield RawText("Answer: ")
    while True:
        turn.attempts += 1
        retry_in: float | None = None
        attempt = turn.attempt(prompt)
        try:
            async for delta in attempt:
                yield RawText(delta)
        except (GeneratorExit, asyncio.CancelledError):
            turn.stop_reason = StopReason.CANCELLED
            setup.record(turn.outcome())
            raise
        except LLMConfigurationError as exc:
            turn.stop_reason = StopReason.MODEL_ERROR
            turn.detail = redact(str(exc), turn.secrets)
        except Exception as exc:  # noqa: BLE001 - stream() must end with a typed reason
            retry_in = turn.judge_fault(exc)
        finally:
            await attempt.aclose()
            await turn.close_stream()
        if retry_in is None:
            break
        logger.warning("chat turn attempt %d failed: %s", turn.attempts, turn.detail)
        turn.stop_reason, turn.detail, turn.fault = StopReason.ANSWERED, "", None
        await asyncio.sleep(retry_in)
    if turn.stop_reason is StopReason.ANSWERED and not turn.answer.strip():
        turn.stop_reason = StopReason.INTERNAL_ERROR
        turn.detail = "the chat engine returned an empty answer"
    if not turn.answer.strip():
        yield RawText(turn.outcome().answer)
    yield RawText("\n")
    final = turn.outcome()
    setup.record(final)
    if final.sources:
        yield Sources(tuple(final.sources))
    yield TurnEnd(final)


class _ChatTurn:
    """What one chat-mode turn knows so far, across its attempts."""

    def __init__(self, setup: TurnSetup) -> None:
        self.setup = setup
        self.secrets = setup.config.secrets()
        self.answer = ""
        self.stop_reason = StopReason.ANSWERED
        self.detail = ""
        self.sources: list[Source] = []
        self.fault: LLMFault | None = None
        self.provider = ""
        self.attempts = 0
        self._stream: Any = None
        # The engine's RetryPolicy is the only retry layer (the SDKs' are off): a fault
        # before the first token is retried within the budget, retrieval included.
        self.policy = retry_policy(setup.config, setup.models.llm)
        self.started = time.monotonic()
        self.deadline = self.started + self.policy.total_budget_s + setup.config.tool_timeout_s

    def outcome(self) -> TurnOutcome:
        text = self.answer.strip() or no_answer_text(
            self.setup.language, self.stop_reason, self.fault
        )
        return TurnOutcome(
            stop_reason=self.stop_reason,
            answer=text,
            blocks=[ReActBlock(ReActType.ANSWER, text)],
            steps=1,
            sources=self.sources,
            detail=self.detail,
            fault=self.fault,
        )

    async def attempt(self, prompt: str) -> AsyncGenerator[str, None]:
        """The answer's tokens from one try of the chat engine."""
        from llama_index.core.chat_engine import CondensePlusContextChatEngine

        from engine.tools.theme_rag import source_of_node

        setup, context, c = self.setup, self.setup.context, self.setup.config
        assert context.retriever is not None
        llm = setup.models.get_llm()
        self.provider = provider_of(llm)
        system_prompt = "\n\n".join(
            p for p in (context.prompt, _CHAT_LANGUAGE_RULE[setup.language]) if p
        )
        chat_engine = CondensePlusContextChatEngine.from_defaults(
            retriever=context.retriever,
            llm=llm,
            chat_history=list(setup.history.messages),
            system_prompt=system_prompt,
        )
        # asyncio.timeout, not wait_for: no extra task, see own_chat_stream.
        async with asyncio.timeout(max(0.0, self.deadline - time.monotonic())):
            response = await chat_engine.astream_chat(prompt)
        self._stream = own_chat_stream(response)
        self.sources = [source_of_node(node) for node in response.source_nodes]
        timeout = c.llm_timeout_s  # until the first token, then the stall limit
        while True:
            try:
                async with asyncio.timeout(timeout):
                    chunk = await anext(self._stream)
            except StopAsyncIteration:
                return
            timeout = c.llm_stall_timeout_s
            delta = chunk.delta or ""
            if delta:
                self.answer += delta
                yield delta

    def judge_fault(self, exc: Exception) -> float | None:
        """Record why the attempt failed; the delay before the next one, if any."""
        kind, retry_after = classify_fault(exc)
        self.stop_reason = _CHAT_STOP_OF_FAULT[kind]
        self.detail = redact(f"{type(exc).__name__}: {exc}", self.secrets)[:300]
        if isinstance(exc, TimeoutError):
            self.detail = "the chat engine gave no answer in time"
        retry_in: float | None = None
        if kind is FaultKind.FATAL:
            logger.error(
                "chat turn failed\n%s",
                redact("".join(traceback.format_exception(exc)), self.secrets),
            )
        elif kind is FaultKind.RETRYABLE and not self.answer:
            delay = backoff_delay(self.attempts, retry_after, self.policy)
            if self.attempts < self.policy.max_attempts and (
                time.monotonic() + delay < self.deadline
            ):
                retry_in = delay
        if self.stop_reason in (StopReason.LLM_UNAVAILABLE, StopReason.LLM_AUTH_FAILED):
            elapsed = round(time.monotonic() - self.started, 2)
            self.fault = LLMFault(self.provider, self.attempts, elapsed)
        return retry_in

    async def close_stream(self) -> None:
        if self._stream is None:
            return
        try:
            await self._stream.aclose()
        except Exception as exc:  # noqa: BLE001 - closing must not hide the outcome
            logger.warning("closing the chat stream failed: %s", redact(str(exc), self.secrets))
        self._stream = None


def own_chat_stream(response: Any) -> Any:
    """The token stream of a ``StreamingAgentChatResponse``, read by the engine alone.

    ``astream_chat`` schedules a task that copies the model's stream into a
    queue and into the chat engine's memory. The engine is stateless (that
    memory is dropped), and the task would go on reading the model after the
    consumer stopped; it also makes a stalled stream impossible to abandon
    (its reader waits for the task). So the task is cancelled before it ever
    runs, and the engine reads ``achat_stream`` itself and closes it.
    """
    task = response.awrite_response_to_history_task
    if task is not None:
        task.cancel()
        response.awrite_response_to_history_task = None
    if response.aqueue is not None:  # the task already ran: the stream is half read
        raise RuntimeError("llama-index started reading the chat stream before the engine")
    if response.achat_stream is None:
        raise RuntimeError("the chat engine returned no stream")
    return response.achat_stream
