"""Chat mode: a theme answered by llama-index's chat engine instead of the ReAct loop."""

from __future__ import annotations

import asyncio
import logging
import time
import traceback
from collections.abc import AsyncIterator
from typing import Any

from engine.fallback_answer import no_answer_text
from engine.llms import LLMConfigurationError, provider_of
from engine.stream_events import RawText, Sources, StreamEvent, TurnEnd
from engine.transport import FaultKind, backoff_delay, classify_fault, redact
from engine.turn_policy import retry_policy
from engine.turn_setup import TurnSetup
from engine.types import LLMFault, ReActBlock, ReActType, Source, StopReason, TurnOutcome

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
    from llama_index.core.chat_engine import CondensePlusContextChatEngine

    from engine.tools.theme_rag import source_of_node

    c = setup.config
    context = setup.context
    secrets = c.secrets()
    answer = ""
    stop_reason = StopReason.ANSWERED
    detail = ""
    sources: list[Source] = []
    stream: Any = None
    fault: LLMFault | None = None
    provider = ""
    # The engine's RetryPolicy is the only retry layer (the SDKs' are off): a fault
    # before the first token is retried within the budget, retrieval included.
    policy = retry_policy(c, setup.models.llm)
    started = time.monotonic()
    deadline = started + policy.total_budget_s + c.tool_timeout_s
    attempts = 0

    def outcome() -> TurnOutcome:
        text = answer.strip() or no_answer_text(setup.language, stop_reason, fault)
        return TurnOutcome(
            stop_reason=stop_reason,
            answer=text,
            blocks=[ReActBlock(ReActType.ANSWER, text)],
            steps=1,
            sources=sources,
            detail=detail,
            fault=fault,
        )

    yield RawText("Answer: ")
    while True:
        attempts += 1
        retry_in: float | None = None
        try:
            assert context.retriever is not None
            llm = setup.models.get_llm()
            provider = provider_of(llm)
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
            async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                response = await chat_engine.astream_chat(prompt)
            stream = own_chat_stream(response)
            sources = [source_of_node(node) for node in response.source_nodes]
            timeout = c.llm_timeout_s  # until the first token, then the stall limit
            while True:
                try:
                    async with asyncio.timeout(timeout):
                        chunk = await anext(stream)
                except StopAsyncIteration:
                    break
                timeout = c.llm_stall_timeout_s
                delta = chunk.delta or ""
                if delta:
                    answer += delta
                    yield RawText(delta)
        except (GeneratorExit, asyncio.CancelledError):
            stop_reason = StopReason.CANCELLED
            setup.record(outcome())
            raise
        except LLMConfigurationError as exc:
            stop_reason = StopReason.MODEL_ERROR
            detail = redact(str(exc), secrets)
        except Exception as exc:  # noqa: BLE001 - stream() must end with a typed reason
            kind, retry_after = classify_fault(exc)
            stop_reason = _CHAT_STOP_OF_FAULT[kind]
            detail = redact(f"{type(exc).__name__}: {exc}", secrets)[:300]
            if isinstance(exc, TimeoutError):
                detail = "the chat engine gave no answer in time"
            if kind is FaultKind.FATAL:
                logger.error(
                    "chat turn failed\n%s",
                    redact("".join(traceback.format_exception(exc)), secrets),
                )
            elif kind is FaultKind.RETRYABLE and not answer:
                delay = backoff_delay(attempts, retry_after, policy)
                if attempts < policy.max_attempts and time.monotonic() + delay < deadline:
                    retry_in = delay
            if stop_reason in (StopReason.LLM_UNAVAILABLE, StopReason.LLM_AUTH_FAILED):
                fault = LLMFault(provider, attempts, round(time.monotonic() - started, 2))
        finally:
            if stream is not None:
                try:
                    await stream.aclose()
                except Exception as exc:  # noqa: BLE001 - closing must not hide the outcome
                    logger.warning("closing the chat stream failed: %s", redact(str(exc), secrets))
                stream = None
        if retry_in is None:
            break
        logger.warning("chat turn attempt %d failed: %s", attempts, detail)
        stop_reason, detail, fault = StopReason.ANSWERED, "", None
        await asyncio.sleep(retry_in)
    if stop_reason is StopReason.ANSWERED and not answer.strip():
        stop_reason = StopReason.INTERNAL_ERROR
        detail = "the chat engine returned an empty answer"
    if not answer.strip():
        yield RawText(outcome().answer)
    yield RawText("\n")
    final = outcome()
    setup.record(final)
    if final.sources:
        yield Sources(tuple(final.sources))
    yield TurnEnd(final)


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
