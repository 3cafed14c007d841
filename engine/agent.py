"""ChatitegoReActAgent: llama-index's workflow ``ReActAgent``, made never silent.

Overrides:
- ``take_step``: inside it only ``RetryException`` and ``ForceFinalizeException``
  exist; any other exception is converted to one of them. A retry replays the
  same step with the error message appended *after* the scratchpad (llama-index
  repeats the user question instead); after too many consecutive retries the
  next call must give a final answer; if even that fails, a final answer is
  composed from what is known.
- ``parse_agent_output``: the final answer is checked before any step limit
  (llama-index checks ``max_iterations`` first and raises on a finished turn).
- ``handle_tool_call_results``: tells an empty result from a tool error, turns
  foreign exceptions into teaching observations, handles ``ask_user``.

``TurnState``, ``resolve_tool_call`` and ``compose_fallback_answer`` have
modules of their own and stay importable from here.
"""

from __future__ import annotations

import asyncio
import logging
import traceback
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

from llama_index.core.agent.react.types import (
    ActionReasoningStep,
    BaseReasoningStep,
    ObservationReasoningStep,
    ResponseReasoningStep,
)
from llama_index.core.agent.workflow import ReActAgent
from llama_index.core.agent.workflow.workflow_events import (
    AgentInput,
    AgentOutput,
    AgentStream,
    ToolCall,
    ToolCallResult,
)
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.llms import ChatMessage, MessageRole
from llama_index.core.memory import BaseMemory
from llama_index.core.tools import AsyncBaseTool, ToolOutput, ToolSelection
from llama_index.core.workflow import Context, StopEvent, step

from engine.budget import FittedPrompt, TokenBudget, estimate_tokens, fit_prompt
from engine.compact import ANSWER_ONLY_STOPS, COMPACT_STOPS, react_grammar
from engine.errors import ForceFinalizeException, RetryException
from engine.events import CorrectionEvent
from engine.fallback_answer import compose_fallback_answer
from engine.formatter import InjectedThoughtStep
from engine.observations import render_observation
from engine.output_parser import TolerantReActOutputParser
from engine.prompts import FORCE_FINAL_INSTRUCTION, STOP_REASON_TEXT
from engine.step_stream import StepShaper
from engine.tool_calls import check_not_echo, resolve_tool_call
from engine.transport import FaultKind, LLMCallFailed, RetryPolicy, redact, stream_llm
from engine.turn_state import TurnState
from engine.types import LLMFault, StopReason, ToolCallRecord
from models.errors import ContextOverflowError
from models.inprocess import GenerationUsage, InProcessModel

logger = logging.getLogger(__name__)

ASK_USER_TOOL = "ask_user"
DEFAULT_TOOL_TIMEOUT_S = 30.0
StepWait = Callable[[Context, int], Awaitable[None]]


class ChatitegoReActAgent(ReActAgent):
    """ReActAgent whose loop always ends with an answer or a typed stop reason."""

    _turn: TurnState = PrivateAttr(default_factory=TurnState)
    _retry_policy: RetryPolicy = PrivateAttr(default_factory=RetryPolicy)
    _step_gate: StepWait | None = PrivateAttr(default=None)
    _secrets: tuple[str, ...] = PrivateAttr(default=())
    _tool_timeout_s: float = PrivateAttr(default=DEFAULT_TOOL_TIMEOUT_S)
    _max_output_tokens: int = PrivateAttr(default=1024)
    _constrained: bool = PrivateAttr(default=False)
    _answer_after_tool: bool = PrivateAttr(default=False)

    def configure_turn(
        self,
        state: TurnState,
        *,
        retry_policy: RetryPolicy,
        step_gate: StepWait | None = None,
        secrets: Sequence[str] = (),
        tool_timeout_s: float = DEFAULT_TOOL_TIMEOUT_S,
        max_output_tokens: int = 1024,
        constrained_output: bool = False,
        answer_after_tool: bool = False,
    ) -> None:
        """Attach the per-turn state and the orchestrator hook before ``run``.

        ``constrained_output``: an in-process model writes each step under a
        grammar (a Thought line, then an Answer or an Action on the step's tools).
        ``answer_after_tool``: once a tool has answered without error, the next step
        may only answer (seen with the 1.5B model: it calls the same tool again and
        again instead of reading the Observation).
        """
        self._turn = state
        self._retry_policy = retry_policy
        self._step_gate = step_gate
        self._secrets = tuple(secrets)
        self._tool_timeout_s = tool_timeout_s
        self._max_output_tokens = max_output_tokens
        self._constrained = constrained_output
        self._answer_after_tool = answer_after_tool
        self.output_parser = TolerantReActOutputParser()

    @property
    def turn(self) -> TurnState:
        return self._turn

    def inject_thought(self, thought: str) -> None:
        """Queue a corrective Thought for the next model call (used by the Finalizer)."""
        self._turn.pending_thoughts.append(thought)

    # --- one step -----------------------------------------------------------
    async def take_step(  # type: ignore[override]  # the workflow always passes a Context
        self,
        ctx: Context,
        llm_input: list[ChatMessage],
        tools: Sequence[AsyncBaseTool],
        memory: BaseMemory,
    ) -> AgentOutput:
        """One ReAct step; malformed output becomes a retry, never an exception."""
        state = self._turn
        if self._step_gate is not None:
            await self._step_gate(ctx, state.llm_calls)
        if state.llm_calls >= state.max_steps:
            state.request_final(StopReason.MAX_STEPS)
        try:
            return await self._take_step_guarded(ctx, llm_input, tools)
        except RetryException as exc:
            return self._retry(ctx, exc.message)
        except ForceFinalizeException as exc:
            return self._force_final(ctx, exc.message)
        except LLMCallFailed as exc:
            return self._llm_failed(exc)
        except ContextOverflowError as exc:
            return self._llm_failed(LLMCallFailed(FaultKind.CONTEXT_OVERFLOW, str(exc)))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - the loop must not stop silently
            # The message and traceback may quote an API key: redact before logging.
            logger.error(
                "unexpected error inside a ReAct step\n%s",
                redact("".join(traceback.format_exception(exc)), self._secrets),
            )
            state.internal_errors.append(redact(f"{type(exc).__name__}: {exc}", self._secrets))
            return self._retry(
                ctx,
                f"An internal error occurred ({type(exc).__name__}). "
                "Try again, or answer with what you know.",
            )

    async def _take_step_guarded(
        self, ctx: Context, llm_input: list[ChatMessage], tools: Sequence[AsyncBaseTool]
    ) -> AgentOutput:
        state = self._turn
        if llm_input and llm_input[0].role == MessageRole.SYSTEM:
            llm_input = llm_input[1:]
        reasoning = await self._reasoning_so_far(ctx)
        step_tools: Sequence[AsyncBaseTool] = tools
        if state.force_final or (self._answer_after_tool and _last_tool_succeeded(state)):
            step_tools = []
        fitted = self._fit_prompt(llm_input, reasoning, tools)
        if state.force_final:
            state.force_final_attempted = True
        state.last_output = ""
        must_act = (
            bool(step_tools)
            and state.tool_required
            and not any(not call.is_error for call in state.tool_calls)
        )
        call_kwargs = self._call_kwargs(fitted.max_output, step_tools, must_act)
        text = await self._call_model(ctx, fitted.messages, reasoning, call_kwargs)
        if not isinstance(self.llm, InProcessModel):
            state.usage.append(GenerationUsage(fitted.prompt_tokens, 0, 0, 0.0))
        state.llm_calls += 1
        state.last_output = text
        logger.debug("model output of step %d (%s): %r", state.llm_calls, sorted(call_kwargs), text)
        return await self._act_on(ctx, text, reasoning, tools)

    async def _reasoning_so_far(self, ctx: Context) -> list[BaseReasoningStep]:
        """The scratchpad, with the reasoning to resume from and the Thoughts to inject."""
        state = self._turn
        reasoning: list[BaseReasoningStep] = await ctx.store.get(self.reasoning_key, default=[])
        if state.initial_reasoning:
            reasoning = [*state.initial_reasoning, *reasoning]
            state.initial_reasoning = []
            await ctx.store.set(self.reasoning_key, reasoning)
        if state.pending_thoughts:
            reasoning.extend(InjectedThoughtStep(thought=t) for t in state.pending_thoughts)
            state.pending_thoughts.clear()
            await ctx.store.set(self.reasoning_key, reasoning)
        return reasoning

    def _fit_prompt(
        self,
        llm_input: list[ChatMessage],
        reasoning: list[BaseReasoningStep],
        tools: Sequence[AsyncBaseTool],
    ) -> FittedPrompt:
        """The step's prompt, shortened to the model's window; what was cut is noted."""
        state = self._turn

        def render(history: list[ChatMessage], steps: list[BaseReasoningStep]) -> list[ChatMessage]:
            return self._render_prompt(tools, history, steps)

        fitted = fit_prompt(list(llm_input), reasoning, render, *self._budget())
        for part in fitted.trimmed:
            if part not in state.trimmed:
                state.trimmed.append(part)
        return fitted

    def _render_prompt(
        self,
        tools: Sequence[AsyncBaseTool],
        history: list[ChatMessage],
        steps: list[BaseReasoningStep],
    ) -> list[ChatMessage]:
        state = self._turn
        messages = self.formatter.format(tools, chat_history=history, current_reasoning=steps)
        messages.extend(state.pending_correction)
        if state.force_final:
            reason = STOP_REASON_TEXT[state.language].get(
                (state.force_final_reason or StopReason.FORCED_FINAL).value, ""
            )
            messages.append(
                ChatMessage(
                    role=MessageRole.USER,
                    content=FORCE_FINAL_INSTRUCTION[state.language].format(reason=reason),
                )
            )
        return merge_same_roles(messages)

    async def _act_on(
        self,
        ctx: Context,
        text: str,
        reasoning: list[BaseReasoningStep],
        tools: Sequence[AsyncBaseTool],
    ) -> AgentOutput:
        """The model's output as the step's result: its answer, or a checked tool call."""
        state = self._turn
        step_out = self.output_parser.parse(text, is_streaming=False)
        if isinstance(step_out, ResponseReasoningStep):
            return await self._answered(ctx, reasoning, step_out, text)
        action = cast(ActionReasoningStep, step_out)
        if state.force_final:
            return self._compose_fallback()
        user_message = await ctx.store.get("user_msg_str", "")
        tool, kwargs = resolve_tool_call(action, tools, user_message)
        if tool == ASK_USER_TOOL:
            check_not_echo(str(kwargs.get("question", "")), user_message)
        action = ActionReasoningStep(thought=action.thought, action=tool, action_input=kwargs)
        reasoning.append(action)
        await ctx.store.set(self.reasoning_key, reasoning)
        state.pending_correction = []
        state.consecutive_retries = 0
        return AgentOutput(
            response=ChatMessage(role=MessageRole.ASSISTANT, content=text),
            tool_calls=[
                ToolSelection(tool_id=str(uuid.uuid4()), tool_name=tool, tool_kwargs=kwargs)
            ],
            raw=None,
            current_agent_name=self.name,
        )

    def _budget(self) -> tuple[Callable[[Sequence[ChatMessage]], int], TokenBudget]:
        """How to count a prompt's tokens, and the window to fit it in."""
        llm = self.llm
        if isinstance(llm, InProcessModel):
            return llm.count_chat_tokens, TokenBudget(llm.context_tokens, self._max_output_tokens)
        window = llm.metadata.context_window
        return estimate_tokens, TokenBudget(window, min(self._max_output_tokens, window // 4))

    def _call_kwargs(
        self, max_output: int, step_tools: Sequence[AsyncBaseTool], must_act: bool = False
    ) -> dict[str, Any]:
        if not isinstance(self.llm, InProcessModel):
            # Only a shortened answer room is passed on: remote models keep their settings.
            return {"max_tokens": max_output} if max_output < self._max_output_tokens else {}
        kwargs: dict[str, Any] = {"max_tokens": max_output, "usage_sink": self._turn.usage}
        if self._constrained:
            kwargs["grammar"] = react_grammar(step_tools, require_action=must_act)
            kwargs["stop"] = list(COMPACT_STOPS if step_tools else ANSWER_ONLY_STOPS)
        return kwargs

    async def _call_model(
        self,
        ctx: Context,
        messages: list[ChatMessage],
        reasoning: list[BaseReasoningStep],
        call_kwargs: dict[str, Any] | None = None,
    ) -> str:
        after_observation = bool(self._turn.pending_correction) or bool(
            reasoning and not isinstance(reasoning[-1], ActionReasoningStep)
        )
        shaper = StepShaper(needs_leading_marker=after_observation)
        shapers = [shaper]

        def forward(delta: str) -> None:
            out = shapers[-1].feed(delta)
            if out and ctx.is_running:
                ctx.write_event_to_stream(
                    AgentStream(delta=out, response="", current_agent_name=self.name)
                )

        def restart(attempt: int, error: str) -> None:
            shapers.append(StepShaper(needs_leading_marker=after_observation))
            if ctx.is_running:
                ctx.write_event_to_stream(
                    CorrectionEvent(kind="llm_retry", message=f"attempt {attempt}: {error}")
                )

        await stream_llm(
            self.llm,
            messages,
            forward,
            policy=self._retry_policy,
            on_retry=restart,
            secrets=self._secrets,
            call_kwargs=call_kwargs,
        )
        tail = shapers[-1].finish()
        if tail and ctx.is_running:
            ctx.write_event_to_stream(
                AgentStream(delta=tail, response="", current_agent_name=self.name)
            )
        return shapers[-1].kept_text

    async def _answered(
        self,
        ctx: Context,
        reasoning: list[BaseReasoningStep],
        step_out: ResponseReasoningStep,
        text: str,
    ) -> AgentOutput:
        state = self._turn
        reasoning.append(step_out)
        await ctx.store.set(self.reasoning_key, reasoning)
        state.answer = step_out.response
        if state.stop_reason is None:
            state.stop_reason = (
                state.force_final_reason if state.force_final else StopReason.ANSWERED
            )
        return AgentOutput(
            response=ChatMessage(role=MessageRole.ASSISTANT, content=text),
            raw=None,
            current_agent_name=self.name,
        )

    # --- the two loop exceptions, and the model being unreachable ------------
    def _retry(self, ctx: Context, message: str) -> AgentOutput:
        state = self._turn
        state.consecutive_retries += 1
        state.total_retries += 1
        if state.force_final_attempted:
            return self._compose_fallback()
        if state.consecutive_retries > state.max_consecutive_retries:
            return self._force_final(ctx, message)
        if ctx.is_running:
            ctx.write_event_to_stream(CorrectionEvent(kind="retry", message=message))
        # The model sees its own faulty output, then what was wrong with it.
        state.pending_correction = [
            *(
                [ChatMessage(role=MessageRole.ASSISTANT, content=state.last_output)]
                if state.last_output.strip()
                else []
            ),
            ChatMessage(role=MessageRole.USER, content=f"Error: {message}"),
        ]
        return self._loop_again()

    def _force_final(self, ctx: Context, message: str) -> AgentOutput:
        state = self._turn
        if state.force_final_attempted:
            return self._compose_fallback()
        state.request_final(StopReason.FORCED_FINAL)
        state.pending_correction = []
        if ctx.is_running:
            ctx.write_event_to_stream(CorrectionEvent(kind="force_final", message=message))
        return self._loop_again()

    def _loop_again(self) -> AgentOutput:
        # A non-empty retry_messages makes parse_agent_output run another step.
        return AgentOutput(
            response=ChatMessage(role=MessageRole.ASSISTANT, content=""),
            retry_messages=[ChatMessage(role=MessageRole.USER, content="retry")],
            raw=None,
            current_agent_name=self.name,
        )

    def _llm_failed(self, exc: LLMCallFailed) -> AgentOutput:
        state = self._turn
        state.stop_reason = _STOP_OF_FAULT.get(exc.kind, StopReason.LLM_UNAVAILABLE)
        state.stop_detail = exc.message
        if state.stop_reason in (StopReason.LLM_UNAVAILABLE, StopReason.LLM_AUTH_FAILED):
            state.fault = LLMFault(state.provider, exc.attempts, round(exc.elapsed_s, 2))
        return self._final_output(compose_fallback_answer(state, state.stop_reason))

    def _compose_fallback(self) -> AgentOutput:
        state = self._turn
        reason = state.force_final_reason or StopReason.FORCED_FINAL
        state.stop_reason = reason
        return self._final_output(compose_fallback_answer(state, reason))

    def _final_output(self, answer: str) -> AgentOutput:
        self._turn.answer = answer
        return AgentOutput(
            response=ChatMessage(role=MessageRole.ASSISTANT, content=answer),
            raw=None,
            current_agent_name=self.name,
        )

    async def _call_tool(
        self, ctx: Context, tool: AsyncBaseTool, tool_input: dict[str, Any]
    ) -> ToolOutput:
        """Run a tool within ``tool_timeout_s``: a hung tool becomes a teaching error."""
        timeout = self._tool_timeout_s
        try:
            return await asyncio.wait_for(
                super()._call_tool(ctx, tool, tool_input), timeout=timeout
            )
        except TimeoutError:
            name = tool.metadata.get_name()
            error = RetryException(
                f"The tool {name} did not answer within {timeout:g} s. Try again with "
                "simpler arguments, use another tool, or answer with what you already know."
            )
            return ToolOutput(
                content=error.message,
                tool_name=name,
                raw_input=tool_input,
                raw_output=None,
                is_error=True,
                exception=error,
            )

    # --- workflow steps -----------------------------------------------------------
    @step
    async def parse_agent_output(
        self, ctx: Context, ev: AgentOutput
    ) -> StopEvent | AgentInput | ToolCall | None:
        """Route an agent output: retry, final answer, or tool calls (no iteration cap here)."""
        memory: BaseMemory = await ctx.store.get("memory")
        if ev.retry_messages:
            return AgentInput(input=await memory.aget(), current_agent_name=self.name)
        if not ev.tool_calls:
            output = await self.finalize(ctx, ev, memory)
            await ctx.store.set("current_tool_calls", [])
            return StopEvent(result=output)
        await ctx.store.set("num_tool_calls", len(ev.tool_calls))
        for tool_call in ev.tool_calls:
            ctx.send_event(
                ToolCall(
                    tool_name=tool_call.tool_name,
                    tool_kwargs=tool_call.tool_kwargs,
                    tool_id=tool_call.tool_id,
                )
            )
        return None

    async def handle_tool_call_results(
        self, ctx: Context, results: list[ToolCallResult], memory: BaseMemory
    ) -> None:
        """Record each tool result as an Observation; errors teach, empty is not an error."""
        state = self._turn
        reasoning: list[BaseReasoningStep] = await ctx.store.get(self.reasoning_key, default=[])
        for result in results:
            output = result.tool_output
            observation = render_observation(result.tool_name, output, self._secrets)
            if isinstance(output.exception, ForceFinalizeException):
                state.request_final(StopReason.FORCED_FINAL)
            state.tool_calls.append(
                ToolCallRecord(
                    name=result.tool_name,
                    kwargs=dict(result.tool_kwargs),
                    output=observation,
                    is_error=bool(output.is_error),
                )
            )
            state.note_result(result.tool_name, output, observation)
            reasoning.append(ObservationReasoningStep(observation=observation))
            if result.tool_name == ASK_USER_TOOL and not output.is_error:
                question = str(output.content).strip()
                state.waiting_question = question
                state.stop_reason = StopReason.WAITING_FOR_USER
                state.answer = question
                reasoning.append(
                    ResponseReasoningStep(thought="I need the user's answer.", response=question)
                )
                break
        await ctx.store.set(self.reasoning_key, reasoning)

    async def finalize(self, ctx: Context, output: AgentOutput, memory: BaseMemory) -> AgentOutput:
        """Keep the clean answer as the response; clear the scratchpad for the next run."""
        state = self._turn
        if state.answer is not None:
            output.response = ChatMessage(role=MessageRole.ASSISTANT, content=state.answer)
        await ctx.store.set(self.reasoning_key, [])
        return output


def _last_tool_succeeded(state: TurnState) -> bool:
    return bool(state.tool_calls) and not state.tool_calls[-1].is_error


_STOP_OF_FAULT = {
    FaultKind.AUTH: StopReason.LLM_AUTH_FAILED,
    FaultKind.CONTEXT_OVERFLOW: StopReason.CONTEXT_OVERFLOW,
    FaultKind.MODEL_ERROR: StopReason.MODEL_ERROR,
}


def merge_same_roles(messages: list[ChatMessage]) -> list[ChatMessage]:
    """Merge consecutive user messages: several chat APIs reject them."""
    merged: list[ChatMessage] = []
    for msg in messages:
        if merged and msg.role == MessageRole.USER and merged[-1].role == MessageRole.USER:
            previous = merged[-1]
            merged[-1] = ChatMessage(
                role=MessageRole.USER, content=f"{previous.content or ''}\n\n{msg.content or ''}"
            )
        else:
            merged.append(msg)
    return merged
