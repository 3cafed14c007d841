"""The embedded local LLM (llama.cpp). Completed by the models issue."""

from __future__ import annotations

from llama_index.core.llms import LLM

from engine.settings import AppConfig


def build_local_llm(config: AppConfig) -> LLM:
    """Not available yet: say what to configure instead."""
    from engine.llms import LLMConfigurationError

    raise LLMConfigurationError(
        "The embedded local model is not installed yet. Set MISTRAL_API_KEY (Mistral) or "
        "OPENAI_LIKE_BASE_URL (an OpenAI-compatible server such as Ollama)."
    )
