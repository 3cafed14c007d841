"""Calling the LLM: streaming with bounded retries, backoff, Retry-After and stall detection.

Transport faults (connection error, timeout, 429/5xx, a stream that stalls)
are retried with exponential backoff inside a time budget; authentication
errors are not retried. Whatever happens, ``stream_llm`` returns or raises
``LLMCallFailed`` within the budget: the engine never hangs on a dead model.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import random
import re
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC
from enum import Enum
from typing import Any

from llama_index.core.llms import LLM, ChatMessage, ChatResponse

from engine.errors import EngineError
from models.errors import ContextOverflowError, LocalModelError

logger = logging.getLogger(__name__)


class FaultKind(Enum):
    RETRYABLE = "retryable"
    AUTH = "auth"
    FATAL = "fatal"
    # Not network faults: retrying would only fail the same way.
    CONTEXT_OVERFLOW = "context_overflow"
    MODEL_ERROR = "model_error"


@dataclass(frozen=True)
class RetryPolicy:
    """Bounds of one model call, retries included."""

    max_attempts: int = 4
    total_budget_s: float = 90.0
    first_token_timeout_s: float = 60.0
    stall_timeout_s: float = 30.0
    backoff_initial_s: float = 1.0
    backoff_max_s: float = 20.0


class LLMCallFailed(EngineError):
    """The model could not be reached within the policy; ``kind`` says why.

    ``attempts`` and ``elapsed_s`` say what was tried: the user's message quotes them.
    """

    def __init__(
        self, kind: FaultKind, message: str, *, attempts: int = 1, elapsed_s: float = 0.0
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.attempts = attempts
        self.elapsed_s = elapsed_s


class StreamStalled(EngineError, TimeoutError):
    """No token arrived within the stall timeout."""


_RETRYABLE_NAME = re.compile(r"Timeout|Connect|Network|RemoteProtocol|ReadError|Unavailable")
_SECRET = re.compile(r"(?i)(bearer\s+|api[_-]?key[=:\s]+)[A-Za-z0-9._\-]{6,}")


def classify_fault(exc: BaseException) -> tuple[FaultKind, float | None]:
    """Map any exception raised by an LLM client to a fault kind and a Retry-After delay."""
    if isinstance(exc, ContextOverflowError):
        return FaultKind.CONTEXT_OVERFLOW, None
    # A model that fails to run; the other ModelErrors (a model that cannot be found or
    # configured) are not faults of a model call and keep the generic classification.
    if isinstance(exc, LocalModelError):
        return FaultKind.MODEL_ERROR, None
    status = _status_code(exc)
    retry_after = _retry_after(exc)
    if status in (401, 403):
        return FaultKind.AUTH, None
    if status is not None:
        if status in (408, 409, 425, 429) or status >= 500:
            return FaultKind.RETRYABLE, retry_after
        return FaultKind.FATAL, None
    if isinstance(exc, (TimeoutError, ConnectionError, StreamStalled)):
        return FaultKind.RETRYABLE, retry_after
    if any(_RETRYABLE_NAME.search(cls.__name__) for cls in type(exc).__mro__):
        return FaultKind.RETRYABLE, retry_after
    return FaultKind.FATAL, None


def _status_code(exc: BaseException) -> int | None:
    for holder in (exc, getattr(exc, "response", None), getattr(exc, "raw_response", None)):
        code = getattr(holder, "status_code", None) if holder is not None else None
        if isinstance(code, int):
            return code
    return None


def _retry_after(exc: BaseException) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``retry-after``; None if absent or unreadable."""
    headers: Any = None
    for holder in (getattr(exc, "response", None), getattr(exc, "raw_response", None), exc):
        headers = getattr(holder, "headers", None) if holder is not None else None
        if headers:
            break
    if not headers:
        return None
    millis = _header(headers, "retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000.0)
        except (TypeError, ValueError):
            pass
    value = _header(headers, "retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except (TypeError, ValueError):
        pass
    try:  # an HTTP date
        parsed = email.utils.parsedate_to_datetime(str(value))
    except (TypeError, ValueError, IndexError):
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return max(0.0, parsed.timestamp() - time.time())


def _header(headers: Any, name: str) -> Any:
    """A header by lower-case ``name``: HTTP header names are case-insensitive, dicts are not."""
    try:
        value = headers.get(name)
        if value is None and isinstance(headers, Mapping):
            value = next((v for k, v in headers.items() if str(k).lower() == name), None)
    except (AttributeError, TypeError):
        return None
    return value


def redact(message: str, secrets: Sequence[str] = ()) -> str:
    """Remove API keys from an error message before anyone sees or logs it."""
    for secret in secrets:
        if secret:
            message = message.replace(secret, "***")
    return _SECRET.sub(r"\1***", message)


async def stream_llm(
    llm: LLM,
    messages: Sequence[ChatMessage],
    on_delta: Callable[[str], None],
    *,
    policy: RetryPolicy,
    on_retry: Callable[[int, str], None] | None = None,
    secrets: Sequence[str] = (),
    call_kwargs: Mapping[str, Any] | None = None,
) -> str:
    """Stream one chat call, retrying transport faults; return the full text.

    ``on_delta`` receives each text delta. When an attempt fails after some
    deltas, ``on_retry`` is told so that the caller can reset what it built.
    ``call_kwargs`` go to ``astream_chat`` (e.g. ``max_tokens``).
    """
    started = time.monotonic()
    deadline = started + policy.total_budget_s
    last_error = "no attempt made"
    made = 0  # attempts really started
    for attempt in range(1, policy.max_attempts + 1):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        made = attempt
        try:
            return await asyncio.wait_for(
                _one_attempt(llm, messages, on_delta, policy, call_kwargs or {}),
                timeout=remaining,
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - every client fault is classified below
            kind, retry_after = classify_fault(exc)
            last_error = redact(f"{type(exc).__name__}: {exc}", secrets)[:300]
            logger.warning("LLM call attempt %d failed (%s): %s", attempt, kind.value, last_error)
            if kind is not FaultKind.RETRYABLE:
                raise LLMCallFailed(
                    kind, last_error, attempts=made, elapsed_s=time.monotonic() - started
                ) from None
            if attempt == policy.max_attempts:
                break
            delay = backoff_delay(attempt, retry_after, policy)
            if time.monotonic() + delay >= deadline:
                break
            if on_retry is not None:
                on_retry(attempt, last_error)
            await asyncio.sleep(delay)
    raise LLMCallFailed(
        FaultKind.RETRYABLE, last_error, attempts=made, elapsed_s=time.monotonic() - started
    )


def backoff_delay(attempt: int, retry_after: float | None, policy: RetryPolicy) -> float:
    """The wait before attempt ``attempt + 1``: Retry-After when given, else jittered backoff."""
    if retry_after is not None:
        return min(retry_after, policy.total_budget_s)
    base = min(policy.backoff_max_s, policy.backoff_initial_s * 2 ** (attempt - 1))
    return base * (0.5 + random.random() / 2)  # jitter: two clients never retry in lockstep


async def _one_attempt(
    llm: LLM,
    messages: Sequence[ChatMessage],
    on_delta: Callable[[str], None],
    policy: RetryPolicy,
    call_kwargs: Mapping[str, Any],
) -> str:
    stream: AsyncIterator[ChatResponse] = await asyncio.wait_for(
        llm.astream_chat(list(messages), **call_kwargs), timeout=policy.first_token_timeout_s
    )
    parts: list[str] = []
    first = True
    try:
        while True:
            timeout = policy.first_token_timeout_s if first else policy.stall_timeout_s
            try:
                chunk = await asyncio.wait_for(anext(stream), timeout=timeout)
            except StopAsyncIteration:
                break
            except TimeoutError:
                raise StreamStalled(f"no token for {timeout:g} s") from None
            first = False
            delta = chunk.delta or ""
            if delta:
                parts.append(delta)
                on_delta(delta)
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            try:
                await aclose()
            except Exception:  # noqa: BLE001 - closing a broken stream must not mask the fault
                logger.debug("closing the LLM stream failed", exc_info=True)
    return "".join(parts)
