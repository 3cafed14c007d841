"""ReActEngine: the stateless orchestrator around the llama-index ReAct agent (seed 000 §3).

Per prompt: the ToolRouter picks tools, a fresh ``ChatitegoReActAgent`` is
built with them, the raw token stream is forwarded to the caller while the
engine's own ``ReActStreamParser`` rebuilds blocks for the ``ReActFinalizer``.
The engine keeps nothing between calls that the caller did not pass: theme,
index and token come through ``start``, the history through ``set_history``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
import traceback
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llama_index.core.agent.react.types import ActionReasoningStep, ObservationReasoningStep
from llama_index.core.agent.workflow.workflow_events import AgentStream, ToolCallResult
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.llms import LLM
from llama_index.core.tools import BaseTool
from llama_index.core.tools.types import adapt_to_async_tool
from llama_index.core.workflow import Context

from config.settings import AppConfig, get_config
from engine.agent import ASK_USER_TOOL, ChatitegoReActAgent, TurnState
from engine.compact import (
    CompactReActFormatter,
    compact_header,
    documents_system_message,
    tool_line,
)
from engine.events import CorrectionEvent, StepBoundary
from engine.finalizer import ReActFinalizer, Verdict
from engine.formatter import ChatitegoReActFormatter
from engine.history import PreparedHistory, prepare_history
from engine.intent import Intent, choose_date_tool, classify_intent
from engine.markers import is_fence, match_marker
from engine.observations import render_observation
from engine.prompts import Language, default_theme_prompt, stop_reason_text, system_header
from engine.router import ToolRouter
from engine.stream_parser import ReActStreamParser
from engine.tools.general import ALWAYS_ON_GENERAL_TOOLS, GeneralToolKit
from engine.tools.theme_rag import SEARCH_TOOL_NAME as _SEARCH_TOOL
from engine.transport import FaultKind, RetryPolicy, backoff_delay, classify_fault, redact
from engine.types import (
    LLMFault,
    ReActBlock,
    ReActType,
    Source,
    StopReason,
    ToolCallRecord,
    TurnOutcome,
    TurnUsage,
)
from models.inprocess import InProcessModel, is_in_process
from models.llms import LLMConfigurationError, provider_of, resolve_provider

if TYPE_CHECKING:
    from themes.index_storage import IndexVersion
    from themes.mcp_config import McpServerConfig
    from themes.retrieval import HybridRetriever
    from themes.theme import Theme

logger = logging.getLogger(__name__)

DETAIL_LEVELS = ("concise", "standard", "detailed")
_GATE_TIMEOUT_S = 30.0
# Upper bound of one query translation (an LLM call inside the RAG tool).
TRANSLATION_TIMEOUT_S = 15.0
_SEARCH_FIRST_THOUGHT = {
    "fr": "Je cherche d'abord dans les documents du thème.",
    "en": "I first search the theme's documents.",
}
_CHAT_LANGUAGE_RULE = {"fr": "Réponds en français.", "en": "Answer in English."}
# Compact profile: passages shown to the model, and the characters they may take (about
# 700 tokens with their headers: the focused-call baseline of the answer benchmark).
COMPACT_TOP_K = 3
COMPACT_OBSERVATION_CHARS = 2400
# A compact step writes one Thought line and a short Answer or one Action.
COMPACT_MAX_OUTPUT_TOKENS = 400
# The general tools a compact step gets for each intent.
COMPACT_INTENT_TOOLS = {
    Intent.CALCULATION: ("calculate",),
    # In this order: the small model leans to the first tool listed, and "now" only
    # answers questions about today.
    Intent.DATE: ("parse_date", "date_add", "date_diff", "now"),
}


class _StepGate:
    """Lets the agent wait until the engine has judged every event of the last step."""

    def __init__(self) -> None:
        self._waiting: dict[int, asyncio.Event] = {}

    async def wait(self, ctx: Context, step: int) -> None:
        if not ctx.is_running:
            return
        event = asyncio.Event()
        self._waiting[step] = event
        ctx.write_event_to_stream(StepBoundary(step=step))
        try:
            await asyncio.wait_for(event.wait(), timeout=_GATE_TIMEOUT_S)
        except TimeoutError:
            logger.warning("step %d started without the orchestrator's acknowledgement", step)

    def ack(self, step: int) -> None:
        event = self._waiting.pop(step, None)
        if event is not None:
            event.set()


def enabled_general_tools(theme: Theme | None) -> list[BaseTool]:
    """The general tools a theme allows (``enabled_tools``: names, or "*" for all)."""
    tools: list[BaseTool] = list(GeneralToolKit().tools())
    if theme is None or "*" in theme.settings.enabled_tools:
        return tools
    allowed = set(theme.settings.enabled_tools)
    return [t for t in tools if t.metadata.get_name() in allowed]


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
        self._llm = llm
        self._extra_tools = list(tools or [])
        self._embed_model = embed_model
        self._token = token
        self.progress: Any = None  # callable(stage, done, total) shown while models load
        self._started = False
        self._router: ToolRouter | None = None
        self.theme: str | None = None
        self.detail = "standard"
        self.language: Language = self.config.language
        self.index: Any = None
        self._theme: Theme | None = None
        self._theme_prompt = ""
        self._custom_theme_prompt = ""
        self._theme_title = ""
        self._retriever: HybridRetriever | None = None
        self._theme_tools: list[BaseTool] = []
        self._mcp_servers: list[McpServerConfig] = []
        self._live_routers: dict[tuple[str, ...], ToolRouter] = {}
        self._history = PreparedHistory(messages=[])
        self._compact = False
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
        if language is not None and language not in ("fr", "en"):
            raise ValueError(f"language must be 'fr' or 'en', not {language!r}")
        if detail is not None and detail not in DETAIL_LEVELS:
            raise ValueError(f"detail must be one of {DETAIL_LEVELS}, not {detail!r}")
        resolved = self._resolve_theme(theme)
        if resolved is not None and index is None:
            index = resolved.load_data()
        if resolved is not None:
            language = language or resolved.settings.language
            detail = detail or resolved.settings.detail
        # Everything that may fail comes before the first assignment: a failed start
        # leaves the previous configuration whole.
        compact = self._wants_compact_profile()
        retriever: HybridRetriever | None = None
        theme_tools: list[BaseTool] = []
        if index is not None:
            retriever, theme_tools = self._theme_toolkit(resolved, index, compact=compact)
        self._compact = compact
        self.theme = resolved.name if resolved is not None else None
        self.detail = detail or "standard"
        self.language = language or self.config.language  # type: ignore[assignment]
        self.index = index
        self._theme = resolved
        self._theme_prompt = resolved.system_prompt.strip() if resolved is not None else ""
        # The compact profile keeps only the admin's own prompt: the default one is
        # about calling the search tool, which a documents step does not have.
        self._custom_theme_prompt = self._theme_prompt
        self._theme_title = (resolved.settings.title or resolved.name) if resolved else ""
        if resolved is not None and not self._theme_prompt and theme_tools:
            self._theme_prompt = default_theme_prompt(
                resolved.settings.title or resolved.name, self.language, _SEARCH_TOOL
            )
        self._retriever = retriever
        self._theme_tools = theme_tools
        if token is not None:
            self._token = token
        routable = enabled_general_tools(resolved)
        self._router = self._make_router(routable)
        self._mcp_servers = list(resolved.settings.mcp_servers) if resolved is not None else []
        self._live_routers = {}
        self._started = True
        return self._build_agent([*routable, *self._theme_tools, *self._extra_tools], self._state())

    def _make_router(self, routable: Sequence[BaseTool]) -> ToolRouter:
        return ToolRouter(
            routable,
            self._embed_model_for(routable),
            top_k=self.config.router_top_k,
            always_on=[
                t.metadata.get_name()
                for t in routable
                if t.metadata.get_name() in ALWAYS_ON_GENERAL_TOOLS
            ],
        )

    async def _live_tools(self) -> list[BaseTool]:
        """The theme's MCP tools (allowed, read-only), from the per-server cache."""
        if not self._mcp_servers:
            return []
        from engine.tools.mcp import MCP_TOOLS  # the MCP SDK is imported by MCP themes only

        reserved = [
            t.metadata.get_name()
            for t in [*GeneralToolKit().tools(), *self._theme_tools, *self._extra_tools]
        ]
        tools, errors = await MCP_TOOLS.tools(self._mcp_servers, reserved)
        for error in errors:
            logger.warning("live-data tools missing this turn: %s", error)
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

    def _resolve_theme(self, theme: str | Theme | None) -> Theme | None:
        from themes.names import validate_theme_name
        from themes.theme import Theme, ThemeRepository

        if theme is None or isinstance(theme, Theme):
            return theme
        # The name may come from a URL or a cookie: check it before it touches the disk.
        return ThemeRepository(self.config.data_dir).get(validate_theme_name(theme))

    def _wants_compact_profile(self) -> bool:
        """The compact prompt profile: asked for, or ``auto`` with an in-process model."""
        profile = self.config.prompt_profile
        if profile != "auto":
            return profile == "compact"
        if self._llm is not None:
            return is_in_process(self._llm)
        from models.app_settings import get_app_settings

        loaded = get_app_settings()
        if loaded.locked and loaded.llm is not None:  # models already loaded for the process
            return is_in_process(loaded.llm)
        return resolve_provider(self.config) == "local"

    def _settle_profile(self, llm: LLM) -> None:
        """With ``auto``, the model that really answers decides the profile.

        ``start`` guesses before the model is loaded (from the configured provider);
        once loaded, a model that is not in-process (an injected or remote one) gets
        the full profile, and the theme's tools are rebuilt to match.
        """
        if self.config.prompt_profile != "auto" or self._compact == is_in_process(llm):
            return
        self._compact = is_in_process(llm)
        if self.index is not None:
            self._retriever, self._theme_tools = self._theme_toolkit(
                self._theme, self.index, compact=self._compact
            )

    def _theme_toolkit(
        self, theme: Theme | None, index: IndexVersion, *, compact: bool = False
    ) -> tuple[HybridRetriever, list[BaseTool]]:
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
        embed_model = self._get_embed_model()
        # The LLM is resolved when a translation is needed, not now: start() stays cheap.
        translator = make_llm_translator(
            self._get_llm, timeout_s=min(TRANSLATION_TIMEOUT_S, self.config.llm_timeout_s)
        )
        # A slow model translates only when the question's language is absent from the
        # corpus: a French question over a French and English guide finds the French page.
        retriever = HybridRetriever(
            index, embed_model, settings, translator=translator, translate_mixed=not compact
        )
        title = (theme.settings.title or theme.name) if theme is not None else "documents"
        extractor = make_llm_extractor(self._get_llm) if settings.llm_extraction else None
        max_chars = COMPACT_OBSERVATION_CHARS if compact else DEFAULT_MAX_CHARS
        toolkit = ThemeToolKit(retriever, title, extractor=extractor, max_chars=max_chars)
        return retriever, list(toolkit.tools())

    def _embed_model_for(self, routable: Sequence[BaseTool]) -> BaseEmbedding | None:
        needs = len(routable) - len(ALWAYS_ON_GENERAL_TOOLS) > self.config.router_top_k
        if needs:
            return self._get_embed_model()
        return self._embed_model

    def _get_embed_model(self) -> BaseEmbedding:
        if self._embed_model is None:
            if self._llm is None:
                self._embed_model = self._app_settings().embed_model
            else:  # an injected LLM (tests, benchmarks): do not load the configured one
                from models.embeddings import load_packaged_minilm

                self._embed_model = load_packaged_minilm()
        assert self._embed_model is not None
        return self._embed_model

    def _app_settings(self) -> Any:
        from models.app_settings import AppSettingsManager

        return AppSettingsManager.load_models(self.config, progress=self.progress)

    def warm_up(self) -> None:
        """Load the configured models now (instead of at the first prompt).

        With an in-process model and the compact profile, also read the stable
        start of the prompts (the system header of this session, the intent
        classifier's instructions) into the model's KV caches: the first question
        then only costs what follows them.
        """
        llm = self._get_llm()
        if not (self._started and self._compact and isinstance(llm, InProcessModel)):
            return
        header = self._compact_header(self.language)
        prefill = getattr(llm, "prefill", None)
        if prefill is not None:
            prefill([documents_system_message(header)])
        # A theme with MCP tools classifies with their summaries: the same prefix to read.
        summaries: list[str] = []

        async def live_summaries() -> None:
            summaries.extend(tool_line(t).removeprefix("- ") for t in await self._live_tools())

        _run_coroutine_sync(live_summaries())
        classify_intent(llm, "Bonjour", summaries)

    def describe_llm(self) -> str:
        """A short, key-free description of the model in use."""
        llm = self._get_llm()
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
        if not self._started:
            raise RuntimeError("call start() (or pass ragkwargs) before stream()")
        if not isinstance(prompt, str) or not prompt.strip():
            raise ValueError("the prompt is empty")
        if self._chat_mode:
            return self._stream_chat(prompt.strip())
        return self._stream(prompt.strip())

    def _searches_first(self) -> bool:
        theme, index = self._theme, self.index
        return (
            theme is not None
            and theme.settings.retrieval.search_first
            and index is not None
            and index.vectors.count() > 0
            and any(t.metadata.get_name() == _SEARCH_TOOL for t in self._theme_tools)
        )

    async def _search_first(
        self, prompt: str, state: TurnState, out: _RawStream, agent: ChatitegoReActAgent
    ) -> AsyncIterator[str]:
        """Run the theme search on the question as the turn's first, already-taken step.

        Seen live with the local 1.5B model: asked about a theme's subject, it
        answers from memory (or with the calculator) instead of searching. The
        step is shown in the stream like any other and handed to the agent as
        initial reasoning, so the model's first call already sees the passages.
        """
        tool = next(t for t in self._theme_tools if t.metadata.get_name() == _SEARCH_TOOL)
        kwargs = {"query": prompt}
        try:
            search = adapt_to_async_tool(tool).acall(**kwargs)
            output = await asyncio.wait_for(search, self.config.tool_timeout_s)
        except Exception as exc:  # noqa: BLE001 - a timeout or a failure: the model can still search
            logger.warning("search before the first step failed: %s", type(exc).__name__)
            return
        thought = _SEARCH_FIRST_THOUGHT[self.language]
        action_input = json.dumps(kwargs, ensure_ascii=False)
        for line in (
            f"Thought: {thought}",
            f"Action: {_SEARCH_TOOL}",
            f"Action Input: {action_input}",
        ):
            for text in out._line(line, agent):
                yield text
        observation = render_observation(_SEARCH_TOOL, output, out.secrets)
        out.add_sources(_sources_of_output(output))
        state.tool_calls.append(
            ToolCallRecord(_SEARCH_TOOL, kwargs, observation, bool(output.is_error))
        )
        state.note_result(_SEARCH_TOOL, output, observation)
        state.initial_reasoning = [
            ActionReasoningStep(thought=thought, action=_SEARCH_TOOL, action_input=kwargs),
            ObservationReasoningStep(observation=observation),
        ]
        for text in out._line(f"Observation: {_inert(observation)}", agent):
            yield text

    @property
    def _chat_mode(self) -> bool:
        theme = self._theme
        return (
            theme is not None
            and theme.settings.engine_mode == "chat"
            and self._retriever is not None
        )

    def get_engine_response(self, prompt: str) -> str:
        """Run a whole turn synchronously and return its final answer."""
        stream = self.stream(prompt)

        async def consume() -> None:
            async for _ in stream:
                pass

        _run_coroutine_sync(consume())
        assert self.last_outcome is not None
        return self.last_outcome.answer

    async def _stream(self, prompt: str) -> AsyncIterator[str]:
        state = self._state()
        secrets = self.config.secrets()
        out = _RawStream(self.language, self.config.max_steps, secrets)
        history = self._history
        handler = None
        finished = False
        route = "react"
        try:
            assert self._router is not None
            llm = self._get_llm()
            state.provider = provider_of(llm)
            self._settle_profile(llm)
            documents_first = False
            live = await self._live_tools()
            if self._compact and not history.waiting_for_user:
                summaries = [tool_line(t).removeprefix("- ") for t in live]  # as warm_up
                intent = await asyncio.to_thread(classify_intent, llm, prompt, summaries)
                # A live-data question gets the MCP tools only, not the documents.
                tools = live if intent is Intent.LIVE else self._compact_tools(intent)
                if intent is Intent.DATE and len(tools) > 1:
                    chosen = await asyncio.to_thread(choose_date_tool, llm, prompt)
                    tools = [t for t in tools if t.metadata.get_name() == chosen] or tools
                documents_first = intent is Intent.OTHER and self._searches_first()
                route = _compact_route(intent, documents_first)
                state.tool_required = intent is not Intent.OTHER and bool(tools)
            else:
                # The theme's tools are always offered: the router never drops the RAG tool.
                routed = self._router_with(live).select(prompt)
                tools = [*routed, *self._theme_tools, *self._extra_tools]
            agent = self._build_agent(tools, state, documents_first=documents_first)
            gate = _StepGate()
            agent.configure_turn(
                state,
                retry_policy=self._retry_policy(),
                step_gate=gate.wait,
                secrets=secrets,
                tool_timeout_s=self.config.tool_timeout_s,
                max_output_tokens=(
                    min(self.config.llm_max_tokens, COMPACT_MAX_OUTPUT_TOKENS)
                    if self._compact
                    else self.config.llm_max_tokens
                ),
                constrained_output=self._compact and is_in_process(llm),
                answer_after_tool=self._compact,
            )
            agent.llm = llm
            user_msg, chat_history = prompt, history.messages
            if history.waiting_for_user:
                user_msg = history.pending_task or prompt
                state.initial_reasoning = _resume_reasoning(history, prompt)
            elif documents_first or (not self._compact and self._searches_first()):
                async for text in self._search_first(prompt, state, out, agent):
                    yield text
            handler = agent.run(user_msg=user_msg, chat_history=chat_history)
            async for event in handler.stream_events():
                for text in out.handle(event, agent, gate):
                    yield text
            await handler
            finished = True
        except LLMConfigurationError as exc:
            # A model that cannot be built (no key, a bad GGUF) is not an unreachable one.
            state.stop_reason = StopReason.MODEL_ERROR
            state.answer = redact(str(exc), secrets)
        except (GeneratorExit, asyncio.CancelledError):
            state.stop_reason = StopReason.CANCELLED
            self.last_outcome = out.outcome(state, self.language, route)
            raise
        except Exception as exc:  # noqa: BLE001 - stream() must end with a typed reason
            # The message and traceback may quote an API key: redact before logging.
            logger.error(
                "turn failed outside the ReAct loop\n%s",
                redact("".join(traceback.format_exception(exc)), secrets),
            )
            state.stop_reason = StopReason.INTERNAL_ERROR
            state.stop_detail = redact(f"{type(exc).__name__}: {exc}", secrets)
        finally:
            if handler is not None and not finished:
                await handler.cancel_run(timeout=2.0)
        closing = out.closing_text(state, self.language)
        if closing:
            yield closing
        self.last_outcome = out.outcome(state, self.language, route)

    def _compact_tools(self, intent: Intent) -> list[BaseTool]:
        """The tools of a compact step: those the intent calls for, if the theme allows them."""
        wanted = COMPACT_INTENT_TOOLS.get(intent, ())
        enabled = {t.metadata.get_name(): t for t in enabled_general_tools(self._theme)}
        return [enabled[name] for name in wanted if name in enabled]

    def _state(self) -> TurnState:
        return TurnState(
            language=self.language,
            max_steps=self.config.max_steps,
            max_consecutive_retries=self.config.max_consecutive_retries,
        )

    async def _stream_chat(self, prompt: str) -> AsyncIterator[str]:
        """One turn in the theme's chat mode (seed "Chat Engine Mistral", C3).

        llama-index's ``CondensePlusContextChatEngine`` condenses the history and
        the prompt into one question, retrieves with the theme's retriever and
        streams the answer. The raw stream is "Answer: " then the tokens. The
        response's token generator is always closed, even when the consumer
        stops early: left open, it keeps the model's HTTP stream (and a file
        descriptor) alive.
        """
        from llama_index.core.chat_engine import CondensePlusContextChatEngine

        from engine.tools.theme_rag import source_of_node

        c = self.config
        secrets = c.secrets()
        answer = ""
        stop_reason = StopReason.ANSWERED
        detail = ""
        sources: list[Source] = []
        stream: Any = None
        fault: LLMFault | None = None
        provider = ""
        # The engine's RetryPolicy is the only retry layer (the SDKs' are off): a fault
        # before the first token is retried within the budget, retrieval included.
        policy = self._retry_policy()
        started = time.monotonic()
        deadline = started + policy.total_budget_s + c.tool_timeout_s
        attempts = 0

        def outcome() -> TurnOutcome:
            text = answer.strip() or _no_answer_text(self.language, stop_reason, fault)
            return TurnOutcome(
                stop_reason=stop_reason,
                answer=text,
                blocks=[ReActBlock(ReActType.ANSWER, text)],
                steps=1,
                sources=sources,
                detail=detail,
                fault=fault,
            )

        yield "Answer: "
        while True:
            attempts += 1
            retry_in: float | None = None
            try:
                assert self._retriever is not None
                llm = self._get_llm()
                provider = provider_of(llm)
                system_prompt = "\n\n".join(
                    p for p in (self._theme_prompt, _CHAT_LANGUAGE_RULE[self.language]) if p
                )
                chat_engine = CondensePlusContextChatEngine.from_defaults(
                    retriever=self._retriever,
                    llm=llm,
                    chat_history=list(self._history.messages),
                    system_prompt=system_prompt,
                )
                # asyncio.timeout, not wait_for: no extra task, see _own_chat_stream.
                async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                    response = await chat_engine.astream_chat(prompt)
                stream = _own_chat_stream(response)
                sources = [source_of_node(node) for node in response.source_nodes]
                timeout = c.llm_timeout_s  # until the first token, then the stall limit
                while True:
                    try:
                        async with asyncio.timeout(timeout):
                            chunk = await anext(stream)
                    except StopAsyncIteration:
                        break
                    timeout = c.llm_stall_timeout_s
                    delta = chunk.delta or ""
                    if delta:
                        answer += delta
                        yield delta
            except (GeneratorExit, asyncio.CancelledError):
                stop_reason = StopReason.CANCELLED
                self.last_outcome = outcome()
                raise
            except LLMConfigurationError as exc:
                stop_reason = StopReason.MODEL_ERROR
                detail = redact(str(exc), secrets)
            except Exception as exc:  # noqa: BLE001 - stream() must end with a typed reason
                kind, retry_after = classify_fault(exc)
                stop_reason = _CHAT_STOP_OF_FAULT[kind]
                detail = redact(f"{type(exc).__name__}: {exc}", secrets)[:300]
                if isinstance(exc, TimeoutError):
                    detail = "the chat engine gave no answer in time"
                if kind is FaultKind.FATAL:
                    logger.error(
                        "chat turn failed\n%s",
                        redact("".join(traceback.format_exception(exc)), secrets),
                    )
                elif kind is FaultKind.RETRYABLE and not answer:
                    delay = backoff_delay(attempts, retry_after, policy)
                    if attempts < policy.max_attempts and time.monotonic() + delay < deadline:
                        retry_in = delay
                if stop_reason in (StopReason.LLM_UNAVAILABLE, StopReason.LLM_AUTH_FAILED):
                    fault = LLMFault(provider, attempts, round(time.monotonic() - started, 2))
            finally:
                if stream is not None:
                    try:
                        await stream.aclose()
                    except Exception as exc:  # noqa: BLE001 - closing must not hide the outcome
                        logger.warning(
                            "closing the chat stream failed: %s", redact(str(exc), secrets)
                        )
                    stream = None
            if retry_in is None:
                break
            logger.warning("chat turn attempt %d failed: %s", attempts, detail)
            stop_reason, detail, fault = StopReason.ANSWERED, "", None
            await asyncio.sleep(retry_in)
        if stop_reason is StopReason.ANSWERED and not answer.strip():
            stop_reason = StopReason.INTERNAL_ERROR
            detail = "the chat engine returned an empty answer"
        if not answer.strip():
            yield outcome().answer
        yield "\n"
        self.last_outcome = outcome()

    def _compact_header(self, language: Language) -> str:
        return compact_header(language, self.detail, self._custom_theme_prompt, self._theme_title)

    def _build_agent(
        self, tools: Sequence[BaseTool], state: TurnState, *, documents_first: bool = False
    ) -> ChatitegoReActAgent:
        context = self._theme_prompt
        formatter: ChatitegoReActFormatter | CompactReActFormatter
        if self._compact:
            formatter = CompactReActFormatter(
                header=self._compact_header(state.language),
                documents_first=documents_first,
                language=state.language,
            )
        else:
            formatter = ChatitegoReActFormatter(
                system_header=system_header(
                    state.language, self.detail, with_context=bool(context)
                ),
                context=context,
            )
        agent = ChatitegoReActAgent(
            name="chatitego",
            tools=list(tools),
            llm=self._llm if self._llm is not None else _PlaceholderLLM.instance(),
            formatter=formatter,
            streaming=True,
            timeout=self._turn_timeout_s(),
        )
        agent.configure_turn(
            state, retry_policy=self._retry_policy(), tool_timeout_s=self.config.tool_timeout_s
        )
        return agent

    def _get_llm(self) -> LLM:
        if self._llm is None:
            self._llm = self._app_settings().llm
        assert self._llm is not None
        return self._llm

    def _retry_policy(self) -> RetryPolicy:
        c = self.config
        if is_in_process(self._llm):
            # A local model is never "unreachable": a slow first token is a long prompt
            # being read on a busy CPU, and a retry would only read it again.
            return RetryPolicy(
                max_attempts=1,
                total_budget_s=c.local_llm_turn_budget_s,
                first_token_timeout_s=c.local_llm_turn_budget_s,
                stall_timeout_s=max(c.llm_stall_timeout_s, 120.0),
                backoff_initial_s=c.llm_backoff_initial_s,
            )
        return RetryPolicy(
            max_attempts=c.llm_max_attempts,
            total_budget_s=c.llm_retry_budget_s,
            first_token_timeout_s=c.llm_timeout_s,
            stall_timeout_s=c.llm_stall_timeout_s,
            backoff_initial_s=c.llm_backoff_initial_s,
        )

    def _turn_timeout_s(self) -> float:
        c = self.config
        budget = max(c.llm_retry_budget_s, c.local_llm_turn_budget_s)
        return (c.max_steps + 2) * (budget + c.tool_timeout_s)


class _RawStream:
    """The raw text of a turn, the engine's parser over it, and the Finalizer's verdicts."""

    def __init__(self, language: Language, max_steps: int, secrets: Sequence[str] = ()) -> None:
        self.secrets = tuple(secrets)
        self.parser = ReActStreamParser()
        self.finalizer = ReActFinalizer(language=language, max_steps=max_steps)
        self.sources: list[Source] = []
        self.text = ""
        self._at_line_start = True

    def handle(self, event: Any, agent: ChatitegoReActAgent, gate: _StepGate) -> list[str]:
        if isinstance(event, AgentStream):
            return self._emit(event.delta, agent)
        if isinstance(event, ToolCallResult):
            observation = render_observation(event.tool_name, event.tool_output, self.secrets)
            # One passage found by two searches is one source.
            self.add_sources(_sources_of_output(event.tool_output))
            if event.tool_name == ASK_USER_TOOL and not event.tool_output.is_error:
                return []  # the question is the turn's answer, emitted at the end
            texts = self._line(f"Observation: {_inert(observation)}", agent)
            texts += self._judge_observation(observation, agent)
            return texts
        if isinstance(event, CorrectionEvent):
            if event.kind == "llm_retry":
                return self._line("", agent) if not self._at_line_start else []
            return self._line(f"Observation: Error: {_inert(event.message)}", agent)
        if isinstance(event, StepBoundary):
            gate.ack(event.step)
        return []

    def add_sources(self, sources: Sequence[Source]) -> None:
        # One passage found by two searches is one source.
        known = {s.chunk_id for s in self.sources}
        self.sources.extend(s for s in sources if s.chunk_id not in known)

    def _line(self, text: str, agent: ChatitegoReActAgent) -> list[str]:
        prefix = "" if self._at_line_start else "\n"
        return self._emit(f"{prefix}{text}\n", agent)

    def _emit(self, text: str, agent: ChatitegoReActAgent) -> list[str]:
        if not text:
            return []
        self._at_line_start = text.endswith("\n")
        self.text += text
        extra: list[str] = []
        for block in self.parser.feed(text):
            if block.type is not ReActType.OBSERVATION:
                extra += self._apply(self.finalizer.observe(block), agent)
        return [text, *extra]

    def _judge_observation(self, observation: str, agent: ChatitegoReActAgent) -> list[str]:
        return self._apply(
            self.finalizer.observe(ReActBlock(ReActType.OBSERVATION, observation)), agent
        )

    def _apply(self, decision: Any, agent: ChatitegoReActAgent) -> list[str]:
        if decision.verdict is Verdict.INJECT and decision.thought:
            agent.inject_thought(decision.thought)
            return self._line(f"Thought: {decision.thought}", agent)
        if decision.verdict is Verdict.FORCE_FINAL:
            agent.turn.request_final(StopReason.FORCED_FINAL)
        return []

    def closing_text(self, state: TurnState, language: Language) -> str:
        """The Answer line to add when the stream does not end with the turn's answer."""
        answer = _final_answer(state, language)
        self.parser.flush()
        blocks = self.parser.blocks
        if blocks and blocks[-1].type.is_closing and blocks[-1].content == answer:
            return ""
        prefix = "" if self._at_line_start else "\n"
        text = f"{prefix}Answer: {answer}\n"
        # Re-segment with the closing line so the outcome's blocks match what clients see.
        self.parser = ReActStreamParser.parse(self.text + text)
        return text

    def outcome(self, state: TurnState, language: Language, route: str = "react") -> TurnOutcome:
        self.parser.flush()
        return TurnOutcome(
            stop_reason=state.stop_reason or StopReason.INTERNAL_ERROR,
            answer=_final_answer(state, language),
            blocks=self.parser.blocks,
            tool_calls=list(state.tool_calls),
            steps=state.llm_calls,
            sources=self.sources,
            detail=state.stop_detail,
            usage=TurnUsage(
                model_calls=len(state.usage),
                prompt_tokens=sum(u.prompt_tokens for u in state.usage),
                cached_tokens=sum(u.cached_tokens for u in state.usage),
                completion_tokens=sum(u.completion_tokens for u in state.usage),
            ),
            route=route,
            fault=state.fault,
        )


# What a chat-mode turn that failed says (a ReAct turn composes its own fallback answer).
_NAMED_NO_ANSWER = frozenset(
    {
        StopReason.CANCELLED,
        StopReason.LLM_UNAVAILABLE,
        StopReason.LLM_AUTH_FAILED,
        StopReason.CONTEXT_OVERFLOW,
        StopReason.MODEL_ERROR,
    }
)
_CHAT_STOP_OF_FAULT = {
    FaultKind.RETRYABLE: StopReason.LLM_UNAVAILABLE,
    FaultKind.AUTH: StopReason.LLM_AUTH_FAILED,
    FaultKind.CONTEXT_OVERFLOW: StopReason.CONTEXT_OVERFLOW,
    FaultKind.MODEL_ERROR: StopReason.MODEL_ERROR,
    FaultKind.FATAL: StopReason.INTERNAL_ERROR,
}


def _compact_route(intent: Intent, documents_first: bool) -> str:
    if intent is not Intent.OTHER:
        return intent.value
    return "documents" if documents_first else "direct"


def _final_answer(state: TurnState, language: Language) -> str:
    if state.answer and state.answer.strip():
        return state.answer.strip()
    return _no_answer_text(language, state.stop_reason)


def _inert(text: str) -> str:
    """Observation text for the raw stream: none of its lines may read as a marker or a fence.

    Tool results and error messages (whose format reminder has "Answer: ..."
    lines) are data: a client parsing the stream, and the Finalizer, must not
    see a Thought, an Answer or a code fence opening in them. Such lines get a
    leading no-break space, which no marker or fence pattern accepts.
    """
    lines = text.split("\n")
    return "\n".join(
        [lines[0], *("\u00a0" + ln if match_marker(ln) or is_fence(ln) else ln for ln in lines[1:])]
    )


def _resume_reasoning(history: PreparedHistory, reply: str) -> list[Any]:
    question = history.pending_question or ""
    return [
        ActionReasoningStep(
            thought="I need more information from the user.",
            action=ASK_USER_TOOL,
            action_input={"question": question},
        ),
        ObservationReasoningStep(observation=f"The user answered: {reply}"),
    ]


def _own_chat_stream(response: Any) -> Any:
    """The token stream of a ``StreamingAgentChatResponse``, read by the engine alone.

    ``astream_chat`` schedules a task that copies the model's stream into a
    queue and into the chat engine's memory. The engine is stateless (that
    memory is dropped), and the task would go on reading the model after the
    consumer stopped; it also makes a stalled stream impossible to abandon
    (its reader waits for the task). So the task is cancelled before it ever
    runs, and the engine reads ``achat_stream`` itself and closes it.
    """
    task = response.awrite_response_to_history_task
    if task is not None:
        task.cancel()
        response.awrite_response_to_history_task = None
    if response.aqueue is not None:  # the task already ran: the stream is half read
        raise RuntimeError("llama-index started reading the chat stream before the engine")
    if response.achat_stream is None:
        raise RuntimeError("the chat engine returned no stream")
    return response.achat_stream


def _sources_of_output(output: Any) -> list[Source]:
    raw = output.raw_output
    sources = getattr(raw, "sources", None)
    if isinstance(sources, list):
        return [s for s in sources if isinstance(s, Source)]
    return []


def _no_answer_text(
    language: Language, stop_reason: StopReason | None, fault: LLMFault | None = None
) -> str:
    key = stop_reason.value if stop_reason in _NAMED_NO_ANSWER else "internal_error"
    reason = stop_reason_text(language, key, fault)
    if language == "fr":
        return f"Désolé, la réponse n'a pas pu être produite ({reason}). Réessayez."
    return f"Sorry, the answer could not be produced ({reason}). Please retry."


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


def _run_coroutine_sync(coro: Any) -> None:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(coro)
        return
    # Called from inside a running loop (a notebook, a server): use a private one.
    errors: list[BaseException] = []

    def target() -> None:
        try:
            asyncio.run(coro)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            errors.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]


class _PlaceholderLLM:
    """Stands in for the LLM until the first turn builds the configured one."""

    _instance: LLM | None = None

    @classmethod
    def instance(cls) -> LLM:
        if cls._instance is None:
            from llama_index.core.llms.mock import MockLLM

            cls._instance = MockLLM()
        return cls._instance
