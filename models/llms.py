"""Building the configured LLM (Mistral, an OpenAI-compatible endpoint; local in models/).

Stop sequences are set here because the agent calls ``astream_chat`` without
per-call kwargs: ``Observation:`` stops the model before it invents a tool
result (the client-side cut in ``step_stream`` stays as the guarantee).
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from typing import Any

from llama_index.core.llms import LLM
from pydantic import Field

from config.settings import AppConfig
from models.errors import ModelError
from models.progress import Progress

STOP_SEQUENCES = ["\nObservation:", "\nObservation :"]


class LLMConfigurationError(ModelError):
    """The configured provider cannot be built; the message says what to set."""


def resolve_provider(config: AppConfig) -> str:
    """The provider ``auto`` stands for, given what is configured."""
    if config.llm_provider != "auto":
        return config.llm_provider
    if config.mistral_api_key is not None and config.mistral_api_key.get_secret_value():
        return "mistral"
    if config.openai_like_base_url:
        return "openai_like"
    return "local"


def provider_of(llm: object) -> str:
    """The provider an LLM object talks to: "mistral", "openai_like", "local", or ""."""
    from models.inprocess import is_in_process

    names = {cls.__name__ for cls in type(llm).__mro__}
    if "MistralAI" in names:
        return "mistral"
    if names & {"OpenAILike", "OpenAI"}:
        return "openai_like"
    if is_in_process(llm):
        return "local"
    return ""


def build_llm(config: AppConfig, progress: Progress | None = None) -> LLM:
    """The LLM the configuration asks for (``progress`` reports local model preparation)."""
    provider = resolve_provider(config)
    if provider == "mistral":
        return build_mistral(config)
    if provider == "openai_like":
        return build_openai_like(config)
    from models.local_llm import LocalModelError, build_local_llm

    try:
        return build_local_llm(config, progress)
    except LocalModelError as exc:
        raise LLMConfigurationError(str(exc)) from None


def build_mistral(config: AppConfig) -> LLM:
    """Mistral through llama-index-llms-mistralai, with the SDK's own retries turned off."""
    from mistralai.client.utils.retries import BackoffStrategy, RetryConfig

    if config.mistral_api_key is None or not config.mistral_api_key.get_secret_value():
        raise LLMConfigurationError(
            "LLM_PROVIDER=mistral needs MISTRAL_API_KEY (environment or chatitego.toml)."
        )
    # One retry layer: the engine's RetryPolicy (engine/transport.py) retries inside
    # LLM_RETRY_BUDGET_S. A second layer in the SDK multiplied the attempts and let one
    # engine attempt sleep through the whole budget. The wrapper passes max_retries as
    # an int, which the SDK ignores: an explicit RetryConfig("none") says it.
    no_retries = RetryConfig("none", BackoffStrategy(0, 0, 1.0, 0), retry_connection_errors=False)
    kwargs: dict[str, object] = {
        "model": config.mistral_model,
        "api_key": config.mistral_api_key.get_secret_value(),
        "temperature": config.llm_temperature,
        "max_tokens": config.llm_max_tokens,
        "timeout": int(config.llm_timeout_s),
        "max_retries": 0,
        "additional_kwargs": {"retries": no_retries, "stop": STOP_SEQUENCES},
    }
    if config.mistral_endpoint:
        kwargs["endpoint"] = config.mistral_endpoint
    return _mistral_class()(**kwargs)


@functools.cache
def _mistral_class() -> type[LLM]:
    """``MistralAI`` that skips stream chunks without choices.

    The wrapper reads ``chunk.data.choices[0]`` and raised ``IndexError`` on a chunk
    whose ``choices`` list is empty (a usage-only chunk, as some gateways send): an
    empty reply then read as an outage instead of being retried as a format error
    (tests/test_llm_faults_http.py).
    """
    from llama_index.llms.mistralai import MistralAI as Base

    class MistralAI(Base):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self._client.chat = _ChoicesOnly(self._client.chat)  # type: ignore[assignment]

    return MistralAI


class _ChoicesOnly:
    """The SDK's ``chat`` namespace whose ``stream_async`` yields only chunks with choices."""

    def __init__(self, chat: Any) -> None:
        self._chat = chat

    def __getattr__(self, name: str) -> Any:
        return getattr(self._chat, name)

    async def stream_async(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        stream = await self._chat.stream_async(*args, **kwargs)
        return _with_choices(stream)


async def _with_choices(stream: Any) -> AsyncIterator[Any]:
    try:
        async for event in stream:
            if getattr(getattr(event, "data", None), "choices", None):
                yield event
    finally:
        close = getattr(stream, "close", None)  # EventStreamAsync: close() ends the HTTP body
        if close is not None:
            await close()


@functools.cache
def _openai_like_class() -> type[LLM]:
    """``OpenAILike`` whose ``api_key`` field stays out of repr, str and dumps.

    The base class shows the key in ``repr(llm)`` (so in any log or traceback
    printing the LLM) and in ``model_dump``/``to_dict``, which llama-index puts in
    its instrumentation events. The client still reads the attribute.
    """
    from llama_index.llms.openai_like import OpenAILike as Base

    # Same class name as the base: describe_llm() and logs show "OpenAILike".
    class OpenAILike(Base):
        api_key: str | None = Field(
            default=None, description="The API key.", repr=False, exclude=True
        )

    return OpenAILike


def build_openai_like(config: AppConfig) -> LLM:
    """Any OpenAI-compatible server (Ollama, vLLM, llama.cpp server)."""
    OpenAILike = _openai_like_class()

    if not config.openai_like_base_url:
        raise LLMConfigurationError(
            "LLM_PROVIDER=openai_like needs OPENAI_LIKE_BASE_URL, e.g. http://localhost:11434/v1."
        )
    key = config.openai_like_api_key.get_secret_value() if config.openai_like_api_key else "none"
    return OpenAILike(  # type: ignore[call-arg]
        model=config.openai_like_model,
        api_base=config.openai_like_base_url,
        api_key=key,
        is_chat_model=True,
        context_window=8192,
        max_tokens=config.llm_max_tokens,
        temperature=config.llm_temperature,
        timeout=config.llm_timeout_s,
        # One retry layer (see build_mistral): 0 turns off both the OpenAI client's
        # retries and the tenacity decorator llama-index adds around each call.
        max_retries=0,
        additional_kwargs={"stop": STOP_SEQUENCES},
    )
