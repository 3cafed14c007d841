"""Issue 11, LLM faults through the real provider clients.

``llama-index-llms-mistralai`` and ``llama-index-llms-openai-like`` are built from
``AppConfig`` exactly as in production (``models.llms.build_llm``) and pointed at a
local HTTP server (``tests/fake_llm_server.py``) that answers, rate-limits (429 with
Retry-After), fails (5xx), stalls mid-stream, refuses the key (401) or sends an empty
stream. Each fault ends with a typed ``StopReason`` within ``LLM_RETRY_BUDGET_S``, a
message that names the provider, and never a tool's raw text.

Seen before these tests: the SDKs retried on their own (Mistral's ``RetryConfig``, the
OpenAI client's and llama-index's ``max_retries``), so a 5xx-forever endpoint got 8
requests for 3 engine attempts, and one engine attempt could sleep through the whole
budget in the SDK's backoff; a Mistral stream chunk without ``choices`` (a usage-only
chunk) raised ``IndexError`` and read as an outage; a fallback answer quoted
``search_documents → Documents found (data, not instructions)…``; chat mode reported a
503 as an internal error.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from config.settings import AppConfig
from engine import ReActEngine, StopReason
from engine.tools.theme_rag import SEARCH_TOOL_NAME
from engine.types import TurnOutcome
from models.llms import build_llm
from tests.fake_llm_server import FakeLLMServer, Reply, answer, empty, serve, stall, status
from tests.test_theme_rag import make_theme, minilm  # noqa: F401 - fixture
from tracer.ui_text import stop_text

KEY = "sk-test-Zq81x-FAULTS-DO-NOT-LEAK"
PROVIDERS = ["mistral", "openai_like"]
# How each provider is named in the fallback answer (French, the default language).
UNAVAILABLE = {
    "mistral": "Mistral ne répond pas",
    "openai_like": "le serveur compatible OpenAI ne répond pas",
}
AUTH_REFUSED = {
    "mistral": "Mistral refuse la clé d'accès",
    "openai_like": "le serveur compatible OpenAI refuse la clé d'accès",
}
KEY_SETTING = {"mistral": "MISTRAL_API_KEY", "openai_like": "OPENAI_LIKE_API_KEY"}
HELLO = "Thought: Je peux répondre directement.\nAnswer: Bonjour !"
# Small budgets: every fault costs at most a few seconds. SLACK covers a busy 2-core CI.
BUDGET_S = 2.0
SLACK_S = 1.5
# Tool framing written for the model, never for the user.
RAW_TOOL_TEXT = ("Documents found", "data, not instructions", f"{SEARCH_TOOL_NAME} →", "[Source")


def config_for(server: FakeLLMServer, provider: str, **overrides: Any) -> AppConfig:
    values: dict[str, Any] = {
        "llm_timeout_s": 1.0,
        "llm_stall_timeout_s": 0.5,
        "llm_retry_budget_s": BUDGET_S,
        "llm_max_attempts": 3,
        "llm_backoff_initial_s": 0.05,
        "max_steps": 4,
        "max_consecutive_retries": 1,
        "tool_timeout_s": 5.0,
        "router_top_k": 50,  # every general tool offered: no embedding model needed
        "prompt_profile": "full",
        **overrides,
    }
    if provider == "mistral":
        values.update(
            llm_provider="mistral", mistral_api_key=KEY, mistral_endpoint=server.mistral_endpoint
        )
    else:
        values.update(
            llm_provider="openai_like",
            openai_like_base_url=server.openai_base_url,
            openai_like_api_key=KEY,
        )
    return AppConfig(**values)


@dataclass(frozen=True)
class Turn:
    outcome: TurnOutcome
    raw: str
    elapsed_s: float
    server: FakeLLMServer


async def run_turn(
    server: FakeLLMServer,
    provider: str,
    prompt: str = "Bonjour",
    *,
    theme: str | None = None,
    embed_model: Any = None,
    **overrides: Any,
) -> Turn:
    config = config_for(server, provider, **overrides)
    engine = ReActEngine(config, llm=build_llm(config), tools=[], embed_model=embed_model)
    engine.start(theme=theme)
    started = time.monotonic()
    raw = "".join([delta async for delta in engine.stream(prompt)])
    elapsed = time.monotonic() - started
    assert engine.last_outcome is not None
    outcome = engine.last_outcome
    assert KEY not in raw + outcome.answer + outcome.detail
    return Turn(outcome, raw, elapsed, server)


@pytest.fixture
def fake() -> Iterator[FakeLLMServer]:
    with serve() as server:
        yield server


def set_default(server: FakeLLMServer, reply: Reply) -> None:
    server.default = reply


# --- answers ----------------------------------------------------------------------------------
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_normal_answer_streams_through_the_real_client(
    fake: FakeLLMServer, provider: str
) -> None:
    fake.enqueue(answer(HELLO))
    turn = await run_turn(fake, provider)
    assert turn.outcome.stop_reason is StopReason.ANSWERED
    assert turn.outcome.answer == "Bonjour !"
    assert turn.outcome.fault is None
    [request] = fake.requests
    assert request.streamed and request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert "Bonjour" in request.prompt_text


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_non_streamed_call_reads_the_whole_reply(
    fake: FakeLLMServer, provider: str
) -> None:
    from llama_index.core.llms import ChatMessage

    fake.enqueue(answer("Paris."))
    llm = build_llm(config_for(fake, provider))
    response = await llm.achat([ChatMessage(role="user", content="Capitale ?")])
    assert response.message.content == "Paris."
    assert not fake.requests[0].streamed


# --- 429 -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_429_with_retry_after_is_waited_once_then_answered(
    fake: FakeLLMServer, provider: str
) -> None:
    fake.enqueue(status(429, retry_after=0.6), answer(HELLO))
    turn = await run_turn(fake, provider)
    assert turn.outcome.stop_reason is StopReason.ANSWERED
    assert turn.outcome.answer == "Bonjour !"
    first, second = fake.requests  # one request per engine attempt: no SDK retry
    assert 0.6 <= second.at - first.at < 0.6 + SLACK_S


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_429_with_retry_after_beyond_the_budget_gives_up_at_once(
    fake: FakeLLMServer, provider: str
) -> None:
    set_default(fake, status(429, retry_after=60))
    turn = await run_turn(fake, provider)
    assert turn.outcome.stop_reason is StopReason.LLM_UNAVAILABLE
    assert len(fake.requests) == 1
    assert turn.elapsed_s < SLACK_S  # waiting 60 s would only fail later
    assert UNAVAILABLE[provider] in turn.outcome.answer


# --- 5xx -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_5xx_then_an_answer_is_retried_by_the_engine_alone(
    fake: FakeLLMServer, provider: str
) -> None:
    fake.enqueue(status(503), status(502), answer(HELLO))
    turn = await run_turn(fake, provider)
    assert turn.outcome.stop_reason is StopReason.ANSWERED
    assert turn.outcome.answer == "Bonjour !"
    assert len(fake.requests) == 3


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_5xx_forever_makes_one_request_per_attempt_and_names_the_provider(
    fake: FakeLLMServer, provider: str
) -> None:
    set_default(fake, status(503))
    turn = await run_turn(fake, provider, llm_max_attempts=3)
    outcome = turn.outcome
    assert outcome.stop_reason is StopReason.LLM_UNAVAILABLE
    # 8 requests before the SDKs' retries were turned off.
    assert len(fake.requests) == 3
    assert outcome.fault is not None
    assert (outcome.fault.provider, outcome.fault.attempts) == (provider, 3)
    assert outcome.answer.startswith(
        f"Je n'ai pas pu terminer mon raisonnement ({UNAVAILABLE[provider]}, 3 tentatives en "
    )
    assert "503" in outcome.detail
    page = stop_text("fr", outcome.stop_reason, outcome.fault.provider)
    assert page.startswith(UNAVAILABLE[provider][0].upper() + UNAVAILABLE[provider][1:])


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_5xx_forever_worst_case_is_the_retry_budget(
    fake: FakeLLMServer, provider: str
) -> None:
    set_default(fake, status(500))
    turn = await run_turn(fake, provider, llm_max_attempts=1000, llm_backoff_initial_s=0.2)
    assert turn.outcome.stop_reason is StopReason.LLM_UNAVAILABLE
    assert turn.elapsed_s < BUDGET_S + SLACK_S
    assert turn.outcome.fault is not None and turn.outcome.fault.attempts == len(fake.requests)


# --- stalls --------------------------------------------------------------------------------------
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_stream_stalled_mid_answer_is_cut_and_retried(
    fake: FakeLLMServer, provider: str
) -> None:
    fake.enqueue(stall("Thought: Je réfléchis", seconds=30), answer(HELLO))
    turn = await run_turn(fake, provider)
    assert turn.outcome.stop_reason is StopReason.ANSWERED
    assert turn.outcome.answer == "Bonjour !"
    assert len(fake.requests) == 2
    assert turn.elapsed_s < 0.5 + SLACK_S  # one stall timeout, not the 30 s silence


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("before", ["", "Thought: Je réfléchis"], ids=["silent", "mid_stream"])
async def test_a_stalled_endpoint_stops_within_the_retry_budget(
    fake: FakeLLMServer, provider: str, before: str
) -> None:
    set_default(fake, stall(before, seconds=60))
    turn = await run_turn(fake, provider, llm_max_attempts=1000)
    outcome = turn.outcome
    assert outcome.stop_reason is StopReason.LLM_UNAVAILABLE
    assert turn.elapsed_s < BUDGET_S + SLACK_S
    assert UNAVAILABLE[provider] in outcome.answer
    assert "StreamStalled" in outcome.detail or "Timeout" in outcome.detail


async def test_a_closed_port_is_unavailable_within_the_budget() -> None:
    with serve() as server:
        closed = server
    turn = await run_turn(closed, "openai_like", llm_max_attempts=1000)
    assert turn.outcome.stop_reason is StopReason.LLM_UNAVAILABLE
    assert turn.elapsed_s < BUDGET_S + SLACK_S
    assert UNAVAILABLE["openai_like"] in turn.outcome.answer


# --- 401 -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_401_is_not_retried_and_names_the_key_to_check(
    fake: FakeLLMServer, provider: str
) -> None:
    set_default(fake, status(401, message=f"invalid key {KEY}"))
    turn = await run_turn(fake, provider)
    outcome = turn.outcome
    assert outcome.stop_reason is StopReason.LLM_AUTH_FAILED
    assert len(fake.requests) == 1
    assert AUTH_REFUSED[provider] in outcome.answer
    assert outcome.fault is not None and outcome.fault.provider == provider
    page = stop_text("fr", outcome.stop_reason, provider)
    assert KEY_SETTING[provider] in page
    assert KEY_SETTING[provider] in stop_text("en", outcome.stop_reason, provider)


# --- empty replies -------------------------------------------------------------------------------
@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("shape", ["role_only", "nothing", "no_choices"])
async def test_an_empty_stream_is_retried_like_a_format_error(
    fake: FakeLLMServer, provider: str, shape: Any
) -> None:
    fake.enqueue(empty(shape), answer(HELLO))
    turn = await run_turn(fake, provider)
    assert turn.outcome.stop_reason is StopReason.ANSWERED
    assert turn.outcome.answer == "Bonjour !"
    first, second = fake.requests
    # The second call tells the model what was wrong, as for any malformed step.
    assert "Your previous response was empty" in second.prompt_text
    assert "Your previous response was empty" not in first.prompt_text


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_endless_empty_streams_are_not_an_outage(fake: FakeLLMServer, provider: str) -> None:
    set_default(fake, empty("no_choices"))
    turn = await run_turn(fake, provider)
    assert turn.outcome.stop_reason is StopReason.FORCED_FINAL
    assert turn.outcome.fault is None
    assert "ne répond pas" not in turn.outcome.answer
    assert len(fake.requests) <= 4  # bounded by the format retries, not the budget


# --- partial answers -----------------------------------------------------------------------------
@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("who_searches", ["engine", "model"])
async def test_a_dead_endpoint_after_a_search_lists_sources_not_tool_text(
    fake: FakeLLMServer,
    provider: str,
    who_searches: str,
    _isolated_data_dir: Path,
    minilm: Any,  # noqa: F811 - the fixture
) -> None:
    make_theme(
        _isolated_data_dir, minilm, search_first=who_searches == "engine", translate_queries=False
    )
    if who_searches == "model":
        fake.enqueue(
            answer(
                "Thought: I search.\nAction: search_documents\n"
                'Action Input: {"query": "work from home days"}'
            )
        )
    set_default(fake, status(503))
    turn = await run_turn(
        fake,
        provider,
        "How many days per week can I work from home?",
        theme="hr",
        embed_model=minilm,
    )
    outcome = turn.outcome
    assert outcome.stop_reason is StopReason.LLM_UNAVAILABLE
    assert outcome.tool_calls and outcome.tool_calls[0].name == SEARCH_TOOL_NAME
    # The theme is in English: the answer is too.
    name = {"mistral": "Mistral", "openai_like": "the OpenAI-compatible server"}[provider]
    assert f"({name} is not answering, 3 attempts in " in outcome.answer
    assert "Here is what I found:" in outcome.answer
    assert "- hr-policy.pdf, p. 3: “" in outcome.answer  # the source, quoted
    for framing in RAW_TOOL_TEXT:
        assert framing not in outcome.answer


# --- chat mode (CondensePlusContextChatEngine) ------------------------------------------------
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_chat_mode_retries_5xx_before_the_first_token(
    fake: FakeLLMServer,
    provider: str,
    _isolated_data_dir: Path,
    minilm: Any,  # noqa: F811
) -> None:
    make_theme(_isolated_data_dir, minilm, engine_mode="chat", translate_queries=False)
    fake.enqueue(status(503), answer("Two days per week."))
    turn = await run_turn(fake, provider, "Work from home?", theme="hr", embed_model=minilm)
    assert turn.outcome.stop_reason is StopReason.ANSWERED
    assert turn.raw == "Answer: Two days per week.\n"
    assert len(fake.requests) == 2


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(
    ("reply", "stop", "words"),
    [
        (status(503), StopReason.LLM_UNAVAILABLE, "is not answering"),
        (stall("", seconds=60), StopReason.LLM_UNAVAILABLE, "is not answering"),
        (status(401), StopReason.LLM_AUTH_FAILED, "refused the access key"),
    ],
    ids=["5xx", "stall", "401"],
)
async def test_chat_mode_faults_are_typed_and_bounded(
    fake: FakeLLMServer,
    provider: str,
    reply: Reply,
    stop: StopReason,
    words: str,
    _isolated_data_dir: Path,
    minilm: Any,  # noqa: F811
) -> None:
    make_theme(_isolated_data_dir, minilm, engine_mode="chat", translate_queries=False)
    set_default(fake, reply)
    turn = await run_turn(fake, provider, "Work from home?", theme="hr", embed_model=minilm)
    outcome = turn.outcome
    assert outcome.stop_reason is stop
    assert outcome.fault is not None and outcome.fault.provider == provider
    assert words in outcome.answer
    assert turn.elapsed_s < BUDGET_S + 5.0 + SLACK_S  # the budget, retrieval included
    if stop is StopReason.LLM_AUTH_FAILED:
        assert len(fake.requests) == 1
