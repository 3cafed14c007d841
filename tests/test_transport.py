"""Calling the model: fault classification, Retry-After, backoff, time budget, redaction."""

from __future__ import annotations

import asyncio
import email.utils
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

import engine.transport as transport
from engine.transport import (
    FaultKind,
    LLMCallFailed,
    RetryPolicy,
    StreamStalled,
    classify_fault,
    redact,
    stream_llm,
)
from tests.fakes import FailMidStream, ScriptedLLM, Stall

MESSAGES: list[Any] = []
_REAL_SLEEP = asyncio.sleep


class _StatusError(Exception):
    def __init__(self, status: int, headers: Any = None, *, on: str = "exc") -> None:
        super().__init__(f"HTTP {status}")
        holder = SimpleNamespace(status_code=status, headers=headers)
        if on == "exc":
            self.status_code = status
            self.headers = headers
        else:
            setattr(self, on, holder)


def _httpx_status_error(
    status: int, headers: dict[str, str] | None = None
) -> httpx.HTTPStatusError:
    request = httpx.Request("POST", "https://api.example.invalid/v1/chat")
    response = httpx.Response(status, headers=headers, request=request)
    return httpx.HTTPStatusError(f"HTTP {status}", request=request, response=response)


class APIConnectionError(Exception):
    """Named like the OpenAI SDK's: recognised by its class name only."""


class ServiceUnavailableError(Exception):
    """Named like a provider's 503 error, without a status code."""


# --- classify_fault --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (_StatusError(401), FaultKind.AUTH),
        (_StatusError(403), FaultKind.AUTH),
        (_StatusError(429), FaultKind.RETRYABLE),
        (_StatusError(408), FaultKind.RETRYABLE),
        (_StatusError(500), FaultKind.RETRYABLE),
        (_StatusError(502), FaultKind.RETRYABLE),
        (_StatusError(503), FaultKind.RETRYABLE),
        (_StatusError(400), FaultKind.FATAL),
        (_StatusError(404), FaultKind.FATAL),
        (_StatusError(422), FaultKind.FATAL),
        (_StatusError(401, on="response"), FaultKind.AUTH),
        (_StatusError(503, on="raw_response"), FaultKind.RETRYABLE),
        (_httpx_status_error(401), FaultKind.AUTH),
        (_httpx_status_error(429), FaultKind.RETRYABLE),
        (_httpx_status_error(400), FaultKind.FATAL),
        (httpx.ConnectError("refused"), FaultKind.RETRYABLE),
        (httpx.ConnectTimeout("slow"), FaultKind.RETRYABLE),
        (httpx.ReadTimeout("slow"), FaultKind.RETRYABLE),
        (httpx.RemoteProtocolError("peer closed"), FaultKind.RETRYABLE),
        (httpx.ReadError("reset"), FaultKind.RETRYABLE),
        (APIConnectionError("no route"), FaultKind.RETRYABLE),
        (ServiceUnavailableError("busy"), FaultKind.RETRYABLE),
        (ConnectionResetError("reset"), FaultKind.RETRYABLE),
        (TimeoutError(), FaultKind.RETRYABLE),
        (StreamStalled("no token"), FaultKind.RETRYABLE),
        (ValueError("bad arguments"), FaultKind.FATAL),
        (KeyError("choices"), FaultKind.FATAL),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else str(v),
)
def test_classify_fault(exc: BaseException, kind: FaultKind) -> None:
    assert classify_fault(exc)[0] is kind


def test_auth_and_fatal_faults_carry_no_delay() -> None:
    headers = {"retry-after": "5"}
    assert classify_fault(_StatusError(401, headers)) == (FaultKind.AUTH, None)
    assert classify_fault(_StatusError(400, headers)) == (FaultKind.FATAL, None)
    assert classify_fault(_StatusError(429, headers)) == (FaultKind.RETRYABLE, 5.0)


def _http_date_in(seconds: float) -> str:
    return email.utils.formatdate(time.time() + seconds, usegmt=True)


@pytest.mark.parametrize(
    ("exc", "low", "high"),
    [
        (_httpx_status_error(429, {"Retry-After": "3"}), 3.0, 3.0),
        (_httpx_status_error(503, {"retry-after-ms": "1500"}), 1.5, 1.5),
        (_httpx_status_error(429, {"retry-after-ms": "250", "retry-after": "9"}), 0.25, 0.25),
        (_StatusError(429, {"Retry-After": "2"}), 2.0, 2.0),  # a plain dict, canonical case
        (_StatusError(429, {"Retry-After-Ms": "40"}, on="response"), 0.04, 0.04),
        (_StatusError(429, {"retry-after": "-4"}), 0.0, 0.0),
    ],
    ids=["seconds", "ms", "ms-wins", "plain-dict", "ms-plain-dict", "negative"],
)
def test_retry_after_headers(exc: BaseException, low: float, high: float) -> None:
    kind, delay = classify_fault(exc)
    assert kind is FaultKind.RETRYABLE
    assert delay is not None and low <= delay <= high


def test_retry_after_http_date() -> None:
    # Built here, not at collection: the date must still be in the future.
    exc = _httpx_status_error(429, {"Retry-After": _http_date_in(6)})
    kind, delay = classify_fault(exc)
    assert kind is FaultKind.RETRYABLE
    assert delay is not None and 4.0 <= delay <= 6.0


@pytest.mark.parametrize("value", ["soon", "", "Wed, 99 Foo 2024 99:99:99 GMT"])
def test_unreadable_retry_after_is_ignored(value: str) -> None:
    assert classify_fault(_StatusError(429, {"retry-after": value})) == (FaultKind.RETRYABLE, None)


# --- stream_llm: retries ---------------------------------------------------------------------


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[float]]:
    """Record the backoff delays instead of waiting them."""
    delays: list[float] = []

    async def fake_sleep(delay: float, result: Any = None) -> Any:
        delays.append(delay)
        await _REAL_SLEEP(0)
        return result

    monkeypatch.setattr(transport.asyncio, "sleep", fake_sleep)
    yield delays


def _policy(**overrides: Any) -> RetryPolicy:
    values: dict[str, Any] = {
        "max_attempts": 4,
        "total_budget_s": 30.0,
        "first_token_timeout_s": 1.0,
        "stall_timeout_s": 1.0,
        "backoff_initial_s": 1.0,
        "backoff_max_s": 20.0,
    }
    values.update(overrides)
    return RetryPolicy(**values)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [({"Retry-After": "3"}, 3.0), ({"retry-after-ms": "1500"}, 1.5)],
    ids=["seconds", "ms"],
)
async def test_retry_after_is_honoured(
    sleeps: list[float], headers: dict[str, str], expected: float
) -> None:
    llm = ScriptedLLM([_httpx_status_error(429, headers), "fine"])
    text = await stream_llm(llm, MESSAGES, lambda _: None, policy=_policy())
    assert text == "fine"
    assert sleeps == [expected]
    assert len(llm.calls) == 2


async def test_retry_after_beyond_the_budget_gives_up_at_once(sleeps: list[float]) -> None:
    llm = ScriptedLLM([_httpx_status_error(429, {"Retry-After": "120"}), "too late"])
    with pytest.raises(LLMCallFailed) as info:
        await stream_llm(llm, MESSAGES, lambda _: None, policy=_policy(total_budget_s=10.0))
    assert info.value.kind is FaultKind.RETRYABLE
    assert sleeps == []
    assert len(llm.calls) == 1


async def test_backoff_grows_with_jitter_and_is_capped(sleeps: list[float]) -> None:
    llm = ScriptedLLM([ConnectionError("down")] * 4 + ["up"])
    policy = _policy(max_attempts=5, backoff_initial_s=1.0, backoff_max_s=2.5)
    assert await stream_llm(llm, MESSAGES, lambda _: None, policy=policy) == "up"
    assert len(sleeps) == 4
    for delay, base in zip(sleeps, [1.0, 2.0, 2.5, 2.5], strict=True):
        assert base / 2 <= delay <= base


async def test_unreadable_retry_after_falls_back_to_backoff(sleeps: list[float]) -> None:
    llm = ScriptedLLM([_StatusError(503, {"retry-after": "soon"}), "ok"])
    policy = _policy(backoff_initial_s=0.4)
    assert await stream_llm(llm, MESSAGES, lambda _: None, policy=policy) == "ok"
    assert len(sleeps) == 1 and 0.2 <= sleeps[0] <= 0.4


async def test_max_attempts_is_respected(sleeps: list[float]) -> None:
    llm = ScriptedLLM([ConnectionError("down")] * 10)
    with pytest.raises(LLMCallFailed) as info:
        await stream_llm(llm, MESSAGES, lambda _: None, policy=_policy(max_attempts=3))
    assert info.value.kind is FaultKind.RETRYABLE
    assert "ConnectionError: down" in info.value.message
    assert len(llm.calls) == 3
    assert len(sleeps) == 2  # no pointless wait after the last attempt


@pytest.mark.parametrize(
    ("exc", "kind"),
    [(_StatusError(401), FaultKind.AUTH), (_StatusError(400), FaultKind.FATAL)],
    ids=["auth", "fatal"],
)
async def test_auth_and_fatal_faults_are_not_retried(
    sleeps: list[float], exc: BaseException, kind: FaultKind
) -> None:
    llm = ScriptedLLM([exc, "never reached"])
    with pytest.raises(LLMCallFailed) as info:
        await stream_llm(llm, MESSAGES, lambda _: None, policy=_policy())
    assert info.value.kind is kind
    assert len(llm.calls) == 1
    assert sleeps == []


async def test_a_broken_stream_is_retried_and_the_caller_told(sleeps: list[float]) -> None:
    llm = ScriptedLLM([FailMidStream(["par", "tial"], ConnectionError("reset")), ["who", "le"]])
    events: list[tuple[str, Any]] = []
    text = await stream_llm(
        llm,
        MESSAGES,
        lambda delta: events.append(("delta", delta)),
        policy=_policy(backoff_initial_s=0.01),
        on_retry=lambda attempt, error: events.append(("retry", (attempt, error))),
    )
    assert text == "whole"  # only the attempt that succeeded
    assert events == [
        ("delta", "par"),
        ("delta", "tial"),
        ("retry", (1, "ConnectionError: reset")),
        ("delta", "who"),
        ("delta", "le"),
    ]


async def test_a_stalled_stream_is_cut_and_retried() -> None:
    llm = ScriptedLLM([Stall(["Thought: slow"], 30.0), "fast"])
    started = time.monotonic()
    errors: list[str] = []
    text = await stream_llm(
        llm,
        MESSAGES,
        lambda _: None,
        policy=_policy(stall_timeout_s=0.1, backoff_initial_s=0.01),
        on_retry=lambda _, error: errors.append(error),
    )
    assert text == "fast"
    assert time.monotonic() - started < 2.0  # the stall would last 30 s
    assert errors == ["StreamStalled: no token for 0.1 s"]


# --- stream_llm: the total budget ----------------------------------------------------------


async def test_total_budget_bounds_endless_retries() -> None:
    llm = ScriptedLLM([ConnectionError("down")] * 1000)
    policy = _policy(
        max_attempts=1000, total_budget_s=0.4, backoff_initial_s=0.02, backoff_max_s=0.1
    )
    started = time.monotonic()
    with pytest.raises(LLMCallFailed) as info:
        await stream_llm(llm, MESSAGES, lambda _: None, policy=policy)
    assert time.monotonic() - started < 0.4 + 1.0  # 1000 attempts would take 50 s
    assert info.value.kind is FaultKind.RETRYABLE
    assert 2 <= len(llm.calls) < 1000


async def test_total_budget_bounds_a_single_slow_attempt() -> None:
    # Tokens arrive, then silence shorter than the stall timeout but longer than the budget.
    llm = ScriptedLLM([Stall(["Thought: a"], 30.0)] * 5)
    policy = _policy(total_budget_s=0.3, first_token_timeout_s=10.0, stall_timeout_s=10.0)
    started = time.monotonic()
    with pytest.raises(LLMCallFailed):
        await stream_llm(llm, MESSAGES, lambda _: None, policy=policy)
    assert time.monotonic() - started < 2.0  # the stall would last 30 s
    assert len(llm.calls) == 1


async def test_failure_messages_are_redacted(sleeps: list[float]) -> None:
    key = "sk-test-0123456789abcdef"
    llm = ScriptedLLM([PermissionError(f"401 for key {key}")])
    with pytest.raises(LLMCallFailed) as info:
        await stream_llm(llm, MESSAGES, lambda _: None, policy=_policy(), secrets=[key])
    assert key not in info.value.message
    assert "***" in info.value.message


# --- redact --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "secrets", "expected"),
    [
        ("key sk-abcdef123456 refused", ["sk-abcdef123456"], "key *** refused"),
        ("twice: K1234567 and K1234567", ["K1234567"], "twice: *** and ***"),
        ("Authorization: Bearer eyJhbGciOi.JIUzI1", [], "Authorization: Bearer ***"),
        ("bearer abc.def-ghi_jkl", [], "bearer ***"),
        ("GET /v1?api_key=abcd1234efgh", [], "GET /v1?api_key=***"),
        ("API-KEY: QWERTY123456", [], "API-KEY: ***"),
        ("apikey=short", [], "apikey=short"),  # too short to be a key
        ("nothing to hide", ["sk-unrelated"], "nothing to hide"),
        ("an empty secret is ignored", [""], "an empty secret is ignored"),
    ],
)
def test_redact(message: str, secrets: list[str], expected: str) -> None:
    assert redact(message, secrets) == expected


def test_every_engine_error_derives_from_its_root() -> None:
    """``EngineError`` roots the engine's errors, ``ModelError`` those of its models."""
    from engine.errors import EngineError, ForceFinalizeException, RetryException
    from engine.tools.mcp_client import McpUnavailable
    from models.app_settings import AppSettingsError
    from models.errors import ContextOverflowError, LocalModelError, ModelError
    from models.factory import ModelNotAvailableError, ModelTypeMismatchError
    from models.llms import LLMConfigurationError

    for engine_error in (
        RetryException,
        ForceFinalizeException,
        transport.LLMCallFailed,
        transport.StreamStalled,
        McpUnavailable,
    ):
        assert issubclass(engine_error, EngineError), engine_error
    assert issubclass(transport.StreamStalled, TimeoutError)  # its other base stays
    for model_error in (
        LocalModelError,
        ContextOverflowError,
        ModelNotAvailableError,
        ModelTypeMismatchError,
        AppSettingsError,
        LLMConfigurationError,  # models/ cannot import the engine's root: a lower layer
    ):
        assert issubclass(model_error, ModelError), model_error
    # A model that cannot be found is not a fault of a model call.
    assert classify_fault(ModelNotAvailableError("no model"))[0] is not FaultKind.MODEL_ERROR
