"""ReActEngine: the stateless orchestrator around the llama-index ReAct agent (seed 000 §3).

Per prompt: the ToolRouter picks tools, a fresh ``ChatitegoReActAgent`` is
built with them, the raw token stream is forwarded to the caller while the
engine's own ``ReActStreamParser`` rebuilds blocks for the ``ReActFinalizer``.
The engine keeps nothing between calls that the caller did not pass: theme,
index and token come through ``start``, the history through ``set_history``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import traceback
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from llama_index.core.agent.react.types import ActionReasoningStep, ObservationReasoningStep
from llama_index.core.agent.workflow.workflow_events import AgentStream, ToolCallResult
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.llms import LLM
from llama_index.core.tools import BaseTool
from llama_index.core.workflow import Context

from engine.agent import ASK_USER_TOOL, ChatitegoReActAgent, TurnState
from engine.events import CorrectionEvent, StepBoundary
from engine.finalizer import ReActFinalizer, Verdict
from engine.formatter import ChatitegoReActFormatter
from engine.history import PreparedHistory, prepare_history
from engine.llms import LLMConfigurationError
from engine.markers import is_fence, match_marker
from engine.observations import render_observation
from engine.prompts import STOP_REASON_TEXT, Language, system_header
from engine.router import ToolRouter
from engine.settings import AppConfig, get_config
from engine.stream_parser import ReActStreamParser
from engine.tools.general import ALWAYS_ON_GENERAL_TOOLS, GeneralToolKit
from engine.transport import RetryPolicy, redact
from engine.types import ReActType, Source, StopReason, TurnOutcome

logger = logging.getLogger(__name__)

DETAIL_LEVELS = ("concise", "standard", "detailed")
_GATE_TIMEOUT_S = 30.0


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
        self._history = PreparedHistory(messages=[])
        self.last_outcome: TurnOutcome | None = None
        if ragkwargs is not None:  # mode 1: ready at construction
            self.start(**dict(ragkwargs))

    # --- configuration of a session -----------------------------------------------
    def start(
        self,
        theme: str | None = None,
        detail: str = "standard",
        language: str = "fr",
        token: str | None = None,
        index: Any = None,
    ) -> ChatitegoReActAgent:
        """Prepare the engine for a theme (mode 2); returns the configured agent."""
        if language not in ("fr", "en"):
            raise ValueError(f"language must be 'fr' or 'en', not {language!r}")
        if detail not in DETAIL_LEVELS:
            raise ValueError(f"detail must be one of {DETAIL_LEVELS}, not {detail!r}")
        self.theme = theme
        self.detail = detail
        self.language = language  # type: ignore[assignment]
        self.index = index
        if token is not None:
            self._token = token
        routable = GeneralToolKit().tools()
        self._router = ToolRouter(
            routable,
            self._embed_model_for(routable),
            top_k=self.config.router_top_k,
            always_on=ALWAYS_ON_GENERAL_TOOLS,
        )
        self._started = True
        return self._build_agent([*routable, *self._extra_tools], self._state())

    def _embed_model_for(self, routable: Sequence[BaseTool]) -> BaseEmbedding | None:
        needs = len(routable) - len(ALWAYS_ON_GENERAL_TOOLS) > self.config.router_top_k
        if needs and self._embed_model is None:
            if self._llm is None:
                self._embed_model = self._app_settings().embed_model
            else:  # an injected LLM (tests, benchmarks): do not load the configured one
                from engine.models.embeddings import load_packaged_minilm

                self._embed_model = load_packaged_minilm()
        return self._embed_model

    def _app_settings(self) -> Any:
        from engine.models.app_settings import AppSettingsManager

        return AppSettingsManager.load_models(self.config, progress=self.progress)

    def warm_up(self) -> None:
        """Load the configured models now (instead of at the first prompt)."""
        self._get_llm()

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
        return self._stream(prompt.strip())

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
        try:
            assert self._router is not None
            tools = [*self._router.select(prompt), *self._extra_tools]
            llm = self._get_llm()
            agent = self._build_agent(tools, state)
            gate = _StepGate()
            agent.configure_turn(
                state,
                retry_policy=self._retry_policy(),
                step_gate=gate.wait,
                secrets=secrets,
                tool_timeout_s=self.config.tool_timeout_s,
            )
            agent.llm = llm
            user_msg, chat_history = prompt, history.messages
            if history.waiting_for_user:
                user_msg = history.pending_task or prompt
                state.initial_reasoning = _resume_reasoning(history, prompt)
            handler = agent.run(user_msg=user_msg, chat_history=chat_history)
            async for event in handler.stream_events():
                for text in out.handle(event, agent, gate):
                    yield text
            await handler
            finished = True
        except LLMConfigurationError as exc:
            state.stop_reason = StopReason.LLM_UNAVAILABLE
            state.answer = redact(str(exc), secrets)
        except (GeneratorExit, asyncio.CancelledError):
            state.stop_reason = StopReason.CANCELLED
            self.last_outcome = out.outcome(state, self.language)
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
        self.last_outcome = out.outcome(state, self.language)

    def _state(self) -> TurnState:
        return TurnState(
            language=self.language,
            max_steps=self.config.max_steps,
            max_consecutive_retries=self.config.max_consecutive_retries,
        )

    def _build_agent(self, tools: Sequence[BaseTool], state: TurnState) -> ChatitegoReActAgent:
        context = ""
        formatter = ChatitegoReActFormatter(
            system_header=system_header(state.language, self.detail, with_context=bool(context)),
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
        return RetryPolicy(
            max_attempts=c.llm_max_attempts,
            total_budget_s=c.llm_retry_budget_s,
            first_token_timeout_s=c.llm_timeout_s,
            stall_timeout_s=c.llm_stall_timeout_s,
            backoff_initial_s=c.llm_backoff_initial_s,
        )

    def _turn_timeout_s(self) -> float:
        c = self.config
        return (c.max_steps + 2) * (c.llm_retry_budget_s + c.tool_timeout_s)


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
            self.sources.extend(_sources_of(event))
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
        from engine.types import ReActBlock

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
        self.parser = _reparse(self.text + text)
        return text

    def outcome(self, state: TurnState, language: Language) -> TurnOutcome:
        self.parser.flush()
        return TurnOutcome(
            stop_reason=state.stop_reason or StopReason.INTERNAL_ERROR,
            answer=_final_answer(state, language),
            blocks=self.parser.blocks,
            tool_calls=list(state.tool_calls),
            steps=state.llm_calls,
            sources=self.sources,
            detail=state.stop_detail,
        )


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


def _reparse(text: str) -> ReActStreamParser:
    parser = ReActStreamParser()
    parser.feed(text)
    parser.flush()
    return parser


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


def _sources_of(event: ToolCallResult) -> list[Source]:
    raw = event.tool_output.raw_output
    sources = getattr(raw, "sources", None)
    if isinstance(sources, list):
        return [s for s in sources if isinstance(s, Source)]
    return []


def _no_answer_text(language: Language, stop_reason: StopReason | None) -> str:
    key = "cancelled" if stop_reason is StopReason.CANCELLED else "internal_error"
    reason = STOP_REASON_TEXT[language][key]
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
