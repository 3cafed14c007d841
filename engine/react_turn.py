"""One ReAct turn: route the tools, build the agent, stream its events."""

from __future__ import annotations

import asyncio
import json
import logging
import traceback
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from llama_index.core.agent.react.types import ActionReasoningStep, ObservationReasoningStep
from llama_index.core.llms import LLM
from llama_index.core.tools import BaseTool
from llama_index.core.tools.types import adapt_to_async_tool

from engine.agent import ASK_USER_TOOL, ChatitegoReActAgent
from engine.agent_factory import build_agent, new_turn_state
from engine.compact import tool_line
from engine.formatter import InjectedThoughtStep
from engine.history import PreparedHistory
from engine.intent import Intent, choose_date_tool, classify_intent
from engine.observations import render_observation
from engine.raw_stream import RawStream, sources_of_output
from engine.step_gate import StepGate
from engine.stream_events import RawText, StreamEvent, ToolCall, TurnEnd
from engine.theme_context import ThemeContext, enabled_general_tools
from engine.tools.theme_rag import SEARCH_TOOL_NAME
from engine.transport import redact
from engine.turn_policy import retry_policy
from engine.turn_setup import TurnSetup
from engine.turn_state import TurnState
from engine.types import StopReason, ToolCallRecord
from models.inprocess import is_in_process
from models.llms import LLMConfigurationError, provider_of

logger = logging.getLogger(__name__)

_SEARCH_FIRST_THOUGHT = {
    "fr": "Je cherche d'abord dans les documents du thème.",
    "en": "I first search the theme's documents.",
}
# A compact step writes one Thought line and a short Answer or one Action.
COMPACT_MAX_OUTPUT_TOKENS = 400
# The general tools a compact step gets for each intent.
COMPACT_INTENT_TOOLS = {
    Intent.CALCULATION: ("calculate",),
    # In this order: the small model leans to the first tool listed, and "now" only
    # answers questions about today.
    Intent.DATE: ("parse_date", "date_add", "date_diff", "now"),
}


async def stream_react_turn(setup: TurnSetup, prompt: str) -> AsyncIterator[StreamEvent]:
    """The events of one turn (raw text and tool events), ``TurnEnd`` last.

    The outcome also goes to ``setup.record``; a cancelled turn (closed, or its
    task cancelled) records it there alone.
    """
    language = setup.language
    state = new_turn_state(setup.config, language)
    secrets = setup.config.secrets()
    out = RawStream(language, setup.config.max_steps, secrets)
    history = setup.history
    handler = None
    finished = False
    route = "react"
    try:
        llm = setup.models.get_llm()
        state.provider = provider_of(llm)
        context = setup.settle_profile(llm)
        live = await setup.live_tools()
        choice = await _choose_tools(setup, context, llm, prompt, live)
        route, documents_first = choice.route, choice.documents_first
        state.tool_required = choice.tool_required
        gate = StepGate()
        agent = _turn_agent(setup, context, state, llm, choice, gate)
        # A live-data server that could not be reached is said, not silently missing: the
        # user sees why, and the model reads it before it answers a live-data question.
        for note in setup.live_notes():
            state.initial_reasoning.append(InjectedThoughtStep(thought=note))
            for note_event in out.line(f"Thought: {note}", agent):
                yield note_event
        user_msg, chat_history = prompt, history.messages
        if history.waiting_for_user:
            user_msg = history.pending_task or prompt
            state.initial_reasoning += _resume_reasoning(history, prompt)
        elif documents_first or (not context.compact and context.searches_first()):
            async for first_step_event in _search_first(setup, context, prompt, state, out, agent):
                yield first_step_event
        handler = agent.run(user_msg=user_msg, chat_history=chat_history)
        async for event in handler.stream_events():
            for stream_event in out.handle(event, agent, gate):
                yield stream_event
        await handler
        finished = True
    except LLMConfigurationError as exc:
        # A model that cannot be built (no key, a bad GGUF) is not an unreachable one.
        state.stop_reason = StopReason.MODEL_ERROR
        state.answer = redact(str(exc), secrets)
    except (GeneratorExit, asyncio.CancelledError):
        state.stop_reason = StopReason.CANCELLED
        setup.record(out.outcome(state, language, route))
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
    closing = out.closing_text(state, language)
    if closing:
        yield RawText(closing)
    outcome = out.outcome(state, language, route)
    setup.record(outcome)
    yield TurnEnd(outcome)


@dataclass(frozen=True)
class _ToolChoice:
    tools: list[BaseTool]
    route: str  # "react", or the compact profile's route: an intent, "documents", "direct"
    documents_first: bool = False
    # The compact step must call a tool (its intent named one and the theme allows it).
    tool_required: bool = False


async def _choose_tools(
    setup: TurnSetup, context: ThemeContext, llm: LLM, prompt: str, live: Sequence[BaseTool]
) -> _ToolChoice:
    """The turn's tools: by the question's intent (compact profile), else by the router."""
    if context.compact and not setup.history.waiting_for_user:
        summaries = [tool_line(t).removeprefix("- ") for t in live]  # as warm_up
        intent = await asyncio.to_thread(classify_intent, llm, prompt, summaries)
        # A live-data question gets the MCP tools only, not the documents.
        tools = list(live) if intent is Intent.LIVE else _compact_tools(context, intent)
        if intent is Intent.DATE and len(tools) > 1:
            chosen = await asyncio.to_thread(choose_date_tool, llm, prompt)
            tools = [t for t in tools if t.metadata.get_name() == chosen] or tools
        documents_first = intent is Intent.OTHER and context.searches_first()
        return _ToolChoice(
            tools,
            _compact_route(intent, documents_first),
            documents_first,
            tool_required=intent is not Intent.OTHER and bool(tools),
        )
    # The theme's tools are always offered: the router never drops the RAG tool.
    routed = setup.router_with(live).select(prompt)
    return _ToolChoice([*routed, *context.tools, *setup.extra_tools], "react")


def _turn_agent(
    setup: TurnSetup,
    context: ThemeContext,
    state: TurnState,
    llm: LLM,
    choice: _ToolChoice,
    gate: StepGate,
) -> ChatitegoReActAgent:
    """The turn's agent over the chosen tools, its model and limits set, waiting on ``gate``."""
    config = setup.config
    agent = build_agent(
        choice.tools,
        state,
        config=config,
        context=context,
        detail=setup.detail,
        llm=llm,
        documents_first=choice.documents_first,
    )
    agent.configure_turn(
        state,
        retry_policy=retry_policy(config, llm),
        step_gate=gate.wait,
        secrets=config.secrets(),
        tool_timeout_s=config.tool_timeout_s,
        max_output_tokens=(
            min(config.llm_max_tokens, COMPACT_MAX_OUTPUT_TOKENS)
            if context.compact
            else config.llm_max_tokens
        ),
        constrained_output=context.compact and is_in_process(llm),
        answer_after_tool=context.compact,
    )
    agent.llm = llm
    return agent


def _compact_tools(context: ThemeContext, intent: Intent) -> list[BaseTool]:
    """The tools of a compact step: those the intent calls for, if the theme allows them."""
    wanted = COMPACT_INTENT_TOOLS.get(intent, ())
    enabled = {t.metadata.get_name(): t for t in enabled_general_tools(context.theme)}
    return [enabled[name] for name in wanted if name in enabled]


def _compact_route(intent: Intent, documents_first: bool) -> str:
    if intent is not Intent.OTHER:
        return intent.value
    return "documents" if documents_first else "direct"


async def _search_first(
    setup: TurnSetup,
    context: ThemeContext,
    prompt: str,
    state: TurnState,
    out: RawStream,
    agent: ChatitegoReActAgent,
) -> AsyncIterator[StreamEvent]:
    """Run the theme search on the question as the turn's first, already-taken step.

    Seen live with the local 1.5B model: asked about a theme's subject, it
    answers from memory (or with the calculator) instead of searching. The
    step is shown in the stream like any other and handed to the agent as
    initial reasoning, so the model's first call already sees the passages.
    """
    tool = next(t for t in context.tools if t.metadata.get_name() == SEARCH_TOOL_NAME)
    kwargs = {"query": prompt}
    try:
        search = adapt_to_async_tool(tool).acall(**kwargs)
        output = await asyncio.wait_for(search, setup.config.tool_timeout_s)
    except Exception as exc:  # noqa: BLE001 - a timeout or a failure: the model can still search
        logger.warning("search before the first step failed: %s", type(exc).__name__)
        return
    thought = _SEARCH_FIRST_THOUGHT[setup.language]
    action_input = json.dumps(kwargs, ensure_ascii=False)
    for line in (
        f"Thought: {thought}",
        f"Action: {SEARCH_TOOL_NAME}",
        f"Action Input: {action_input}",
    ):
        for event in out.line(line, agent):
            yield event
    yield ToolCall(SEARCH_TOOL_NAME, dict(kwargs))
    observation = render_observation(SEARCH_TOOL_NAME, output, out.secrets)
    for event in out.add_sources(sources_of_output(output)):
        yield event
    state.tool_calls.append(
        ToolCallRecord(SEARCH_TOOL_NAME, kwargs, observation, bool(output.is_error))
    )
    state.note_result(SEARCH_TOOL_NAME, output, observation)
    state.initial_reasoning += [
        ActionReasoningStep(thought=thought, action=SEARCH_TOOL_NAME, action_input=kwargs),
        ObservationReasoningStep(observation=observation),
    ]
    for event in out.observation(SEARCH_TOOL_NAME, observation, bool(output.is_error), agent):
        yield event


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
