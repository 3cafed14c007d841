"""ReActEngine: the stateless facade of the engine.

Per prompt, a turn (``engine.react_turn`` or ``engine.chat_mode``) routes the
tools, builds a fresh agent and streams typed events (``stream_events``); the
raw ReAct text (``stream``) is one view over them. The engine keeps
nothing between calls that the caller did not pass: theme, index and token
come through ``start``, the history through ``set_history``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.llms import LLM
from llama_index.core.tools import BaseTool

from config.settings import AppConfig, get_config
from engine.agent import ChatitegoReActAgent
from engine.agent_factory import build_agent, new_turn_state
from engine.chat_mode import stream_chat_turn
from engine.compact import documents_prompt_start, tool_line
from engine.history import PreparedHistory, prepare_history
from engine.intent import classify_intent
from engine.prompts import Language
from engine.react_turn import stream_react_turn
from engine.router import ToolRouter
from engine.session_models import SessionModels
from engine.stream_events import StreamEvent, raw_text, with_block_events
from engine.sync_bridge import run_sync
from engine.theme_context import (
    DETAIL_LEVELS,
    ThemeContext,
    enabled_general_tools,
    resolve_theme,
    theme_toolkit,
)
from engine.tools.general import ALWAYS_ON_GENERAL_TOOLS, GeneralToolKit
from engine.transport import RetryPolicy
from engine.turn_policy import retry_policy
from engine.turn_setup import TurnSetup
from engine.types import TurnOutcome
from models.inprocess import InProcessModel, is_in_process

if TYPE_CHECKING:  # the theme types, through the one engine module that knows themes
    from engine.theme_context import HybridRetriever, IndexVersion, Theme

logger = logging.getLogger(__name__)


class ReActEngine:
    """Reasoning engine: ``start`` (or ``ragkwargs``), ``set_history``, then ``stream``."""

    def __init__(
        self,
        config: AppConfig | Mapping[str, Any] | None = None,
        llmapikey: str | None = None,
        token: str | None = None,
        ragkwargs: Mapping[str, Any] | None = None,
        *,
        llm: LLM | None = None,
        tools: Sequence[BaseTool] | None = None,
        embed_model: BaseEmbedding | None = None,
    ) -> None:
        self.config = _resolve_config(config, llmapikey)
        self._models = SessionModels(self.config, llm, embed_model)
        self._extra_tools = list(tools or [])
        self._token = token
        self._started = False
        self._router: ToolRouter | None = None
        self.theme: str | None = None
        self.detail = "standard"
        self.language: Language = self.config.language
        self.index: Any = None
        self._context = ThemeContext()
        self._live_routers: dict[tuple[str, ...], ToolRouter] = {}
        # What the last listing of the MCP servers could not reach, as the turn says it.
        self._live_notes: list[str] = []
        self._history = PreparedHistory(messages=[])
        self.last_outcome: TurnOutcome | None = None
        if ragkwargs is not None:  # mode 1: ready at construction
            self.start(**dict(ragkwargs))

    # --- configuration of a session -----------------------------------------------
    def start(
        self,
        theme: str | Theme | None = None,
        detail: str | None = None,
        language: str | None = None,
        token: str | None = None,
        index: IndexVersion | None = None,
    ) -> ChatitegoReActAgent:
        """Prepare the engine for a theme (mode 2); returns the configured agent.

        ``theme`` is a ``themes.theme.Theme`` or the name of one under the
        configured data folder; ``index`` one of its published
        ``IndexVersion`` (loaded from the theme when omitted). With either, the
        agent always gets the theme's ``search_documents`` tool, the theme's
        system prompt as context, and the theme's language and detail level
        unless given here. Nothing else is kept: a new ``start`` replaces all.
        """
        _check_choices(language, detail)
        resolved = resolve_theme(self.config.data_dir, theme)
        if resolved is not None and index is None:
            index = resolved.load_data()
        if resolved is not None:
            language = language or resolved.settings.language
            detail = detail or resolved.settings.detail
        # Everything that may fail comes before the first assignment: a failed start
        # leaves the previous configuration whole.
        compact = self._models.wants_compact_profile()
        retriever: HybridRetriever | None = None
        theme_tools: list[BaseTool] = []
        if index is not None:
            retriever, theme_tools = self._theme_toolkit(resolved, index, compact=compact)
        self.theme = resolved.name if resolved is not None else None
        self.detail = detail or "standard"
        self.language = language or self.config.language  # type: ignore[assignment]
        self.index = index
        self._context = ThemeContext.of(
            resolved,
            index,
            language=self.language,
            compact=compact,
            retriever=retriever,
            tools=theme_tools,
        )
        if token is not None:
            self._token = token
        routable = enabled_general_tools(resolved)
        self._router = self._make_router(routable)
        self._live_routers = {}
        self._started = True
        return build_agent(
            [*routable, *self._context.tools, *self._extra_tools],
            new_turn_state(self.config, self.language),
            config=self.config,
            context=self._context,
            detail=self.detail,
            llm=self._models.llm,
        )

    @property
    def progress(self) -> Any:
        """``progress(stage, done, total)``, called while the configured models load."""
        return self._models.progress

    @progress.setter
    def progress(self, value: Any) -> None:
        self._models.progress = value

    @property
    def _llm(self) -> LLM | None:
        return self._models.llm

    @_llm.setter
    def _llm(self, llm: LLM | None) -> None:
        self._models.llm = llm

    @property
    def _compact(self) -> bool:
        return self._context.compact

    def warm_up(self) -> None:
        """Load the configured models now (instead of at the first prompt).

        With an in-process model and the compact profile, also read the stable
        start of the prompts (how a documents step starts, the intent
        classifier's instructions) into the model's KV caches: the first question
        then only costs what follows them.
        """
        llm = self._models.get_llm()
        if not (self._started and self._compact and isinstance(llm, InProcessModel)):
            return
        prefill = getattr(llm, "prefill", None)
        if prefill is not None:
            prefill(documents_prompt_start(self.language, self.detail, self._context.custom_prompt))
        # A theme with MCP tools classifies with their summaries: the same prefix to read.
        summaries: list[str] = []

        async def live_summaries() -> None:
            summaries.extend(tool_line(t).removeprefix("- ") for t in await self._live_tools())

        run_sync(live_summaries())
        classify_intent(llm, "Bonjour", summaries)

    def describe_llm(self) -> str:
        """A short, key-free description of the model in use."""
        llm = self._models.get_llm()
        name = getattr(llm, "model", None) or getattr(llm, "model_path", None) or ""
        return f"{type(llm).__name__} {Path(str(name)).name if name else ''}".strip()

    def set_history(self, messages: Sequence[Mapping[str, Any]] | None) -> None:
        """Give the conversation so far (OpenAI style); it is cleaned and compressed."""
        self._history = prepare_history(
            messages,
            max_messages=self.config.history_max_messages,
            max_chars=self.config.history_max_chars,
        )

    @property
    def compressed_history(self) -> PreparedHistory:
        return self._history

    # --- running a turn -----------------------------------------------------------------
    def stream(self, prompt: str) -> AsyncIterator[str]:
        """Raw ReAct text deltas of one turn; never raises once iterated, never hangs."""
        return raw_text(self.stream_events(prompt))

    def stream_events(self, prompt: str) -> AsyncIterator[StreamEvent]:
        """Typed events of one turn (see ``engine.stream_events``), ``TurnEnd`` last.

        Like ``stream``: never raises once iterated, never hangs; closing it
        early records a ``cancelled`` outcome.
        """
        if not self._started:
            raise RuntimeError("call start() (or pass ragkwargs) before stream()")
        if not isinstance(prompt, str) or not prompt.strip():
            raise ValueError("the prompt is empty")
        setup = self._turn_setup()
        if self._context.chat_mode:
            return with_block_events(stream_chat_turn(setup, prompt.strip()))
        return with_block_events(stream_react_turn(setup, prompt.strip()))

    def get_engine_response(self, prompt: str) -> str:
        """Run a whole turn synchronously and return its final answer."""
        stream = self.stream(prompt)

        async def consume() -> None:
            async for _ in stream:
                pass

        run_sync(consume())
        assert self.last_outcome is not None
        return self.last_outcome.answer

    # --- the parts of a session a turn uses ---------------------------------------------
    def _turn_setup(self) -> TurnSetup:
        return TurnSetup(
            config=self.config,
            language=self.language,
            detail=self.detail,
            history=self._history,
            context=self._context,
            models=self._models,
            extra_tools=list(self._extra_tools),
            settle_profile=self._settle_profile,
            live_tools=self._live_tools,
            live_notes=lambda: list(self._live_notes),
            router_with=self._router_with,
            record=self._record,
        )

    def _record(self, outcome: TurnOutcome) -> None:
        self.last_outcome = outcome

    def _make_router(self, routable: Sequence[BaseTool]) -> ToolRouter:
        return ToolRouter(
            routable,
            self._models.embed_model_for_router(routable),
            top_k=self.config.router_top_k,
            always_on=[
                t.metadata.get_name()
                for t in routable
                if t.metadata.get_name() in ALWAYS_ON_GENERAL_TOOLS
            ],
        )

    async def _live_tools(self) -> list[BaseTool]:
        """The theme's MCP tools (allowed, read-only), from the per-server cache."""
        self._live_notes = []
        if not self._context.mcp_servers:
            return []
        from engine.tools.mcp import MCP_TOOLS  # the MCP SDK is imported by MCP themes only
        from engine.tools.mcp_client import unavailable_note

        reserved = [
            t.metadata.get_name()
            for t in [*GeneralToolKit().tools(), *self._context.tools, *self._extra_tools]
        ]
        tools, errors = await MCP_TOOLS.tools(self._context.mcp_servers, reserved)
        for error in errors:
            logger.warning("live-data tools missing this turn: %s", error)
        self._live_notes = [unavailable_note(error, self.language) for error in errors]
        return list(tools)

    def _router_with(self, live: Sequence[BaseTool]) -> ToolRouter:
        """The router over the general tools and ``live`` ones: MCP tools are routed alike."""
        assert self._router is not None
        if not live:
            return self._router
        key = tuple(t.metadata.get_name() for t in live)
        if key not in self._live_routers:
            self._live_routers[key] = self._make_router([*self._router.tools, *live])
        return self._live_routers[key]

    def _settle_profile(self, llm: LLM) -> ThemeContext:
        """With ``auto``, the model that really answers decides the profile.

        ``start`` guesses before the model is loaded (from the configured provider);
        once loaded, a model that is not in-process (an injected or remote one) gets
        the full profile, and the theme's tools are rebuilt to match.
        """
        context = self._context
        if self.config.prompt_profile != "auto" or context.compact == is_in_process(llm):
            return context
        context.compact = is_in_process(llm)
        if context.index is not None:
            context.retriever, context.tools = self._theme_toolkit(
                context.theme, context.index, compact=context.compact
            )
        return context

    def _theme_toolkit(
        self, theme: Theme | None, index: IndexVersion, *, compact: bool
    ) -> tuple[HybridRetriever, list[BaseTool]]:
        return theme_toolkit(
            theme,
            index,
            embed_model=self._models.get_embed_model(),
            get_llm=self._models.get_llm,
            llm_timeout_s=self.config.llm_timeout_s,
            compact=compact,
        )

    def _retry_policy(self) -> RetryPolicy:
        return retry_policy(self.config, self._models.llm)


def _check_choices(language: str | None, detail: str | None) -> None:
    if language is not None and language not in ("fr", "en"):
        raise ValueError(f"language must be 'fr' or 'en', not {language!r}")
    if detail is not None and detail not in DETAIL_LEVELS:
        raise ValueError(f"detail must be one of {DETAIL_LEVELS}, not {detail!r}")


def _resolve_config(
    config: AppConfig | Mapping[str, Any] | None, llmapikey: str | None
) -> AppConfig:
    if config is None:
        base = get_config()
    elif isinstance(config, AppConfig):
        base = config
    else:
        base = AppConfig(**dict(config))
    if llmapikey:
        base = base.model_copy(update={"mistral_api_key": llmapikey})
    return base
