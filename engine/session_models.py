"""The models a session uses: injected ones, or the process's configured ones, loaded late."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.llms import LLM
from llama_index.core.tools import BaseTool

from config.settings import AppConfig
from engine.tools.general import ALWAYS_ON_GENERAL_TOOLS
from models.inprocess import is_in_process
from models.llms import resolve_provider

# progress(stage, done, total), shown while the configured models load.
Progress = Callable[[str, int, int], None]


class SessionModels:
    """The LLM and the embedding model of one engine, each loaded on first use."""

    def __init__(
        self, config: AppConfig, llm: LLM | None = None, embed_model: BaseEmbedding | None = None
    ) -> None:
        self.config = config
        self.llm = llm  # None until loaded (or injected)
        self.embed_model = embed_model
        self.progress: Any = None

    def get_llm(self) -> LLM:
        if self.llm is None:
            self.llm = self._app_settings().llm
        assert self.llm is not None
        return self.llm

    def get_embed_model(self) -> BaseEmbedding:
        if self.embed_model is None:
            if self.llm is None:
                self.embed_model = self._app_settings().embed_model
            else:  # an injected LLM (tests, benchmarks): do not load the configured one
                from models.embeddings import load_packaged_minilm

                self.embed_model = load_packaged_minilm()
        assert self.embed_model is not None
        return self.embed_model

    def embed_model_for_router(self, routable: Sequence[BaseTool]) -> BaseEmbedding | None:
        """The embedding model, loaded only if the router has more tools than it keeps."""
        needs = len(routable) - len(ALWAYS_ON_GENERAL_TOOLS) > self.config.router_top_k
        if needs:
            return self.get_embed_model()
        return self.embed_model

    def wants_compact_profile(self) -> bool:
        """The compact prompt profile: asked for, or ``auto`` with an in-process model."""
        profile = self.config.prompt_profile
        if profile != "auto":
            return profile == "compact"
        if self.llm is not None:
            return is_in_process(self.llm)
        from models.app_settings import get_app_settings

        loaded = get_app_settings()
        if loaded.locked and loaded.llm is not None:  # models already loaded for the process
            return is_in_process(loaded.llm)
        return resolve_provider(self.config) == "local"

    def _app_settings(self) -> Any:
        from models.app_settings import AppSettingsManager

        return AppSettingsManager.load_models(self.config, progress=self.progress)
