"""Provider choice and construction: Mistral, OpenAI-compatible, local (no network)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from config.settings import AppConfig
from models.llms import (
    STOP_SEQUENCES,
    LLMConfigurationError,
    build_llm,
    build_mistral,
    build_openai_like,
    resolve_provider,
)

FAKE_KEY = "sk-test-Zq81x-DO-NOT-LEAK"


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({}, "local"),
        ({"mistral_api_key": FAKE_KEY}, "mistral"),
        ({"mistral_api_key": ""}, "local"),  # an empty key is no key
        ({"openai_like_base_url": "http://localhost:11434/v1"}, "openai_like"),
        # A Mistral key wins over an OpenAI-compatible URL in auto mode.
        ({"mistral_api_key": FAKE_KEY, "openai_like_base_url": "http://localhost:1/v1"}, "mistral"),
        # An explicit provider always wins.
        ({"llm_provider": "local", "mistral_api_key": FAKE_KEY}, "local"),
        ({"llm_provider": "openai_like"}, "openai_like"),
    ],
)
def test_resolve_provider(settings: dict[str, object], expected: str) -> None:
    assert resolve_provider(AppConfig(**settings)) == expected


def test_resolve_provider_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MISTRAL_API_KEY", FAKE_KEY)
    assert resolve_provider(AppConfig()) == "mistral"


def test_build_mistral_without_key() -> None:
    with pytest.raises(LLMConfigurationError, match="MISTRAL_API_KEY"):
        build_mistral(AppConfig(llm_provider="mistral"))


def test_build_mistral_with_key() -> None:
    from llama_index.llms.mistralai import MistralAI
    from mistralai.client.utils.retries import RetryConfig

    config = AppConfig(
        mistral_api_key=FAKE_KEY,
        mistral_model="mistral-small-latest",
        llm_temperature=0.2,
        llm_max_tokens=512,
        llm_timeout_s=42.0,
        llm_retry_budget_s=30.0,
    )
    llm = build_mistral(config)
    assert isinstance(llm, MistralAI)
    assert (llm.model, llm.temperature, llm.max_tokens, llm.timeout) == (
        "mistral-small-latest",
        0.2,
        512,
        42,
    )
    # One retry layer (issue 11): the engine's RetryPolicy retries, the SDK does not.
    # Its retries used to sleep through the engine's budget inside one attempt.
    retries = llm.additional_kwargs["retries"]
    assert isinstance(retries, RetryConfig)
    assert retries.strategy == "none"
    assert retries.retry_connection_errors is False
    assert llm.max_retries == 0
    assert llm.additional_kwargs["stop"] == STOP_SEQUENCES
    # What reaches the SDK: the RetryConfig replaces the wrapper's bare int.
    sdk_kwargs = llm._model_kwargs
    assert sdk_kwargs["retries"] is retries
    assert sdk_kwargs["stop"] == STOP_SEQUENCES


def test_mistral_llm_never_shows_its_key() -> None:
    llm = build_mistral(AppConfig(mistral_api_key=FAKE_KEY))
    assert FAKE_KEY not in repr(llm)
    assert FAKE_KEY not in str(llm)
    assert FAKE_KEY not in json.dumps(llm.model_dump(), default=str)
    assert FAKE_KEY not in repr(AppConfig(mistral_api_key=FAKE_KEY))


def test_build_mistral_custom_endpoint() -> None:
    llm = build_mistral(
        AppConfig(mistral_api_key=FAKE_KEY, mistral_endpoint="http://localhost:8081")
    )
    assert llm._client.sdk_configuration.server_url == "http://localhost:8081"


def test_build_openai_like_without_url() -> None:
    with pytest.raises(LLMConfigurationError, match="OPENAI_LIKE_BASE_URL"):
        build_openai_like(AppConfig(llm_provider="openai_like"))


def test_build_openai_like_with_url() -> None:
    from llama_index.llms.openai_like import OpenAILike

    llm = build_openai_like(
        AppConfig(
            openai_like_base_url="http://localhost:11434/v1",
            openai_like_model="qwen2.5:1.5b",
            openai_like_api_key=FAKE_KEY,
        )
    )
    assert isinstance(llm, OpenAILike)
    assert llm.api_base == "http://localhost:11434/v1"
    assert llm.model == "qwen2.5:1.5b"
    assert llm.is_chat_model
    assert llm.additional_kwargs["stop"] == STOP_SEQUENCES
    # One retry layer: 0 turns off the OpenAI client's retries and llama-index's tenacity.
    assert llm.max_retries == 0
    assert llm._get_client().max_retries == 0
    # The key reaches the client, but no repr, str or dump (instrumentation events) shows it.
    assert llm._get_credential_kwargs()["api_key"] == FAKE_KEY
    assert FAKE_KEY not in repr(llm)
    assert FAKE_KEY not in str(llm)
    assert FAKE_KEY not in json.dumps(llm.to_dict(), default=str)
    assert llm.class_name() == "OpenAILike"


def test_build_llm_dispatches_on_provider() -> None:
    from llama_index.llms.mistralai import MistralAI
    from llama_index.llms.openai_like import OpenAILike

    assert isinstance(build_llm(AppConfig(mistral_api_key=FAKE_KEY)), MistralAI)
    assert isinstance(
        build_llm(AppConfig(openai_like_base_url="http://localhost:1/v1")), OpenAILike
    )


def test_build_llm_local_failure_is_a_configuration_error(tmp_path: Path) -> None:
    text = tmp_path / "model.gguf"
    text.write_text("not a model")
    with pytest.raises(LLMConfigurationError, match="not a GGUF model"):
        build_llm(AppConfig(llm_provider="local", local_llm_path=str(text)))
