"""Every setting in one place: environment variables, then an optional TOML file, then defaults.

Environment variables win over ``chatitego.toml`` (or the file named by
``CHATITEGO_CONFIG``); the README's settings table is generated from the
fields below (``python -m engine settings``).
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import (
    SettingsConfigDict,
)

from config.store import StoreSettings, config_file

# Offline by default: no model hub is reachable on many customer sites. Set
# before any Hugging Face library reads it.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

LLMProvider = Literal["auto", "mistral", "openai_like", "local"]


__all__ = ["AppConfig", "LLMProvider", "config_file", "get_config"]


class AppConfig(StoreSettings):
    """Chatitego configuration (env var = field name in upper case).

    The storage settings (``VECTOR_BACKEND``, ``DATABASE_URL``...) come from
    ``config.store.StoreSettings``, which ``themes`` reads on its own.
    """

    model_config = SettingsConfigDict(extra="ignore", case_sensitive=False)

    llm_provider: LLMProvider = Field(
        "auto",
        description="auto, mistral, openai_like or local (auto: Mistral if a key is set, "
        "else an OpenAI-compatible URL if set, else the local model)",
    )
    mistral_api_key: SecretStr | None = Field(None, description="Mistral API key")
    mistral_model: str = Field("mistral-small-latest", description="Mistral model name")
    mistral_endpoint: str | None = Field(None, description="Mistral API base URL (optional)")
    openai_like_base_url: str | None = Field(
        None, description="OpenAI-compatible endpoint (Ollama, vLLM, llama.cpp server)"
    )
    openai_like_model: str = Field("local-model", description="Model name at that endpoint")
    openai_like_api_key: SecretStr | None = Field(None, description="Key for that endpoint")
    local_llm_path: str | None = Field(None, description="Path of another GGUF model to run")
    local_llm_repo: str | None = Field(None, description="Hub repo of a GGUF (when online)")
    local_llm_file: str | None = Field(None, description="GGUF file name in that repo")
    local_llm_threads: int = Field(0, ge=0, description="llama.cpp threads (0 = all free cores)")
    local_llm_context: int = Field(4096, ge=2048, description="Local model context window")
    local_llm_turn_budget_s: float = Field(
        600.0, gt=0, description="Max time of one local model call (prefill is slow on a busy CPU)"
    )
    local_llm_gpu_layers: int = Field(0, ge=-1, description="Layers offloaded to a GPU (-1 all)")
    llm_max_tokens: int = Field(1024, ge=64, description="Max tokens per model call")
    prompt_profile: Literal["auto", "full", "compact"] = Field(
        "auto",
        description="full: the rich ReAct prompt; compact: short prompts, intent routing and "
        "constrained output for small models; auto: compact for the in-process local model",
    )
    llm_temperature: float = Field(0.0, ge=0.0, le=1.0, description="Sampling temperature")
    llm_timeout_s: float = Field(60.0, gt=0, description="Timeout of one model request (s)")
    llm_retry_budget_s: float = Field(90.0, gt=0, description="Total time for retries (s)")
    llm_max_attempts: int = Field(4, ge=1, description="Attempts per model call")
    llm_stall_timeout_s: float = Field(30.0, gt=0, description="Max silence inside a stream (s)")
    llm_backoff_initial_s: float = Field(
        1.0, gt=0, description="First delay between two model attempts (s), doubled each time"
    )
    tool_timeout_s: float = Field(30.0, gt=0, description="Max time of one tool call (s)")
    max_steps: int = Field(8, ge=1, le=50, description="Max model calls (ReAct steps) per turn")
    max_consecutive_retries: int = Field(2, ge=0, description="Format retries before forcing")
    router_top_k: int = Field(2, ge=1, description="Tools routed per prompt (besides always-on)")
    history_max_messages: int = Field(12, ge=0, description="History messages sent to the model")
    history_max_chars: int = Field(6000, ge=200, description="Character budget of that history")
    data_dir: Path = Field(
        Path("data"),
        validation_alias=AliasChoices("chatitego_data_dir", "data_dir"),
        description="Where themes, indexes and models live (env CHATITEGO_DATA_DIR)",
    )
    language: Literal["fr", "en"] = Field("fr", description="Default answer language")
    mode: Literal["production", "development"] = Field(
        "production",
        validation_alias=AliasChoices("chatitego_mode", "mode"),
        description="production hides error details in the pages; development shows them "
        "(env CHATITEGO_MODE)",
    )
    cookie_password: SecretStr | None = Field(
        None,
        description="Key of the chat page's encrypted cookie (unset: a random one is made "
        "once and kept in <data_dir>/.secrets/)",
    )
    admin_password_hash: SecretStr | None = Field(
        None,
        description="RAG Manager admin password hash (make one with "
        "'python -m manager hash-password'); unset: the RAG Manager stays closed",
    )
    admin_session_minutes: int = Field(
        30, ge=1, description="RAG Manager session length without activity (minutes)"
    )
    max_upload_mb: int = Field(50, ge=1, description="Largest document the RAG Manager accepts")
    ingest_max_minutes: float = Field(
        30.0,
        ge=0,
        description="Longest estimated indexing time of one ingest (minutes; 0 = no limit): "
        "larger files are refused up front with the estimate",
    )

    # The sources (environment, then the TOML file, then defaults) are StoreSettings'.

    def secrets(self) -> list[str]:
        """Secret values to redact from any message."""
        keys = (
            self.mistral_api_key,
            self.openai_like_api_key,
            self.cookie_password,
            self.admin_password_hash,
            self.database_url,
        )
        return [k.get_secret_value() for k in keys if k is not None and k.get_secret_value()]


@lru_cache(maxsize=1)
def get_config() -> AppConfig:
    """The process-wide configuration, read once."""
    return AppConfig()
