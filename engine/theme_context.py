"""The theme a session answers about: its prompt, its search tools, its general tools.

With the theme tool modules, this is the only engine code that imports ``themes``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.llms import LLM
from llama_index.core.tools import BaseTool

from engine.prompts import Language, default_theme_prompt
from engine.tools.general import GeneralToolKit
from engine.tools.theme_rag import SEARCH_TOOL_NAME
from themes.theme_settings import DETAIL_LEVELS as DETAIL_LEVELS  # for the engine's callers

if TYPE_CHECKING:  # also the facade's source of these types
    from themes.index_storage import IndexVersion
    from themes.mcp_config import McpServerConfig
    from themes.retrieval import HybridRetriever
    from themes.theme import Theme

# Upper bound of one query translation (an LLM call inside the RAG tool).
TRANSLATION_TIMEOUT_S = 15.0
# Compact profile: passages shown to the model, and the characters they may take (about
# 700 tokens with their headers: the focused-call baseline of the answer benchmark).
COMPACT_TOP_K = 3
COMPACT_OBSERVATION_CHARS = 2400


@dataclass
class ThemeContext:
    """What a started session knows of its theme; empty without one."""

    theme: Theme | None = None
    index: IndexVersion | None = None
    compact: bool = False
    retriever: HybridRetriever | None = None
    tools: list[BaseTool] = field(default_factory=list)
    # The prompt the full profile shows: the admin's, else a default one about searching.
    prompt: str = ""
    # The compact profile keeps only the admin's own prompt: the default one is about
    # calling the search tool, which a documents step does not have.
    custom_prompt: str = ""
    title: str = ""
    mcp_servers: list[McpServerConfig] = field(default_factory=list)

    @classmethod
    def of(
        cls,
        theme: Theme | None,
        index: IndexVersion | None,
        *,
        language: Language,
        compact: bool,
        retriever: HybridRetriever | None,
        tools: list[BaseTool],
    ) -> ThemeContext:
        custom_prompt = theme.system_prompt.strip() if theme is not None else ""
        title = (theme.settings.title or theme.name) if theme is not None else ""
        prompt = custom_prompt
        if theme is not None and not prompt and tools:
            prompt = default_theme_prompt(title, language, SEARCH_TOOL_NAME)
        return cls(
            theme=theme,
            index=index,
            compact=compact,
            retriever=retriever,
            tools=tools,
            prompt=prompt,
            custom_prompt=custom_prompt,
            title=title,
            mcp_servers=list(theme.settings.mcp_servers) if theme is not None else [],
        )

    @property
    def chat_mode(self) -> bool:
        """The theme answers through llama-index's chat engine, not the ReAct loop."""
        theme = self.theme
        return (
            theme is not None
            and theme.settings.engine_mode == "chat"
            and self.retriever is not None
        )

    def searches_first(self) -> bool:
        """The theme asks for a search on the question before the model's first step."""
        theme, index = self.theme, self.index
        return (
            theme is not None
            and theme.settings.retrieval.search_first
            and index is not None
            and index.vectors.count() > 0
            and any(t.metadata.get_name() == SEARCH_TOOL_NAME for t in self.tools)
        )


def resolve_theme(data_dir: Path, theme: str | Theme | None) -> Theme | None:
    """``theme`` itself, or the theme of that name under ``data_dir``."""
    from themes.names import validate_theme_name
    from themes.theme import Theme, ThemeRepository

    if theme is None or isinstance(theme, Theme):
        return theme
    # The name may come from a URL or a cookie: check it before it touches the disk.
    return ThemeRepository(data_dir).get(validate_theme_name(theme))


def enabled_general_tools(theme: Theme | None) -> list[BaseTool]:
    """The general tools a theme allows (``enabled_tools``: names, or "*" for all)."""
    tools: list[BaseTool] = list(GeneralToolKit().tools())
    if theme is None or "*" in theme.settings.enabled_tools:
        return tools
    allowed = set(theme.settings.enabled_tools)
    return [t for t in tools if t.metadata.get_name() in allowed]


def theme_toolkit(
    theme: Theme | None,
    index: IndexVersion,
    *,
    embed_model: BaseEmbedding,
    get_llm: Callable[[], LLM],
    llm_timeout_s: float,
    compact: bool = False,
) -> tuple[HybridRetriever, list[BaseTool]]:
    """The theme's retriever and its search tool, sized for the prompt profile."""
    from engine.tools.theme_rag import (
        DEFAULT_MAX_CHARS,
        ThemeToolKit,
        make_llm_extractor,
        make_llm_translator,
    )
    from themes.retrieval import HybridRetriever
    from themes.theme import RetrievalSettings

    settings = theme.settings.retrieval if theme is not None else RetrievalSettings()
    if compact:
        settings = settings.model_copy(update={"top_k": min(settings.top_k, COMPACT_TOP_K)})
    # The LLM is resolved when a translation is needed, not now: start() stays cheap.
    translator = make_llm_translator(get_llm, timeout_s=min(TRANSLATION_TIMEOUT_S, llm_timeout_s))
    # A slow model translates only when the question's language is absent from the
    # corpus: a French question over a French and English guide finds the French page.
    retriever = HybridRetriever(
        index, embed_model, settings, translator=translator, translate_mixed=not compact
    )
    title = (theme.settings.title or theme.name) if theme is not None else "documents"
    extractor = make_llm_extractor(get_llm) if settings.llm_extraction else None
    max_chars = COMPACT_OBSERVATION_CHARS if compact else DEFAULT_MAX_CHARS
    toolkit = ThemeToolKit(retriever, title, extractor=extractor, max_chars=max_chars)
    return retriever, list(toolkit.tools())
