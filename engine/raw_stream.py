"""The raw ReAct text of a turn, written from the agent's events and judged as it grows.

The agent's events become stream events (``engine.stream_events``): the raw
text as ``RawText``, a tool's call and result also as typed events. The engine
parses its own text again (``ReActStreamParser``) so that the Finalizer sees
the same blocks a client will, and its verdicts (an injected Thought, a forced
final answer) act on the agent before its next step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.agent.workflow.workflow_events import AgentStream, ToolCallResult

from engine.agent import ASK_USER_TOOL, ChatitegoReActAgent
from engine.events import CorrectionEvent, StepBoundary
from engine.fallback_answer import final_answer
from engine.finalizer import ReActFinalizer, Verdict
from engine.markers import is_fence, match_marker
from engine.observations import render_observation
from engine.prompts import Language
from engine.step_gate import StepGate
from engine.stream_events import Observation, RawText, Sources, StreamEvent, ToolCall
from engine.stream_parser import ReActStreamParser
from engine.turn_state import TurnState
from engine.types import ReActBlock, ReActType, Source, StopReason, TurnOutcome, TurnUsage


class RawStream:
    """The raw text of a turn, the engine's parser over it, and the Finalizer's verdicts."""

    def __init__(self, language: Language, max_steps: int, secrets: Sequence[str] = ()) -> None:
        self.secrets = tuple(secrets)
        self.parser = ReActStreamParser()
        self.finalizer = ReActFinalizer(language=language, max_steps=max_steps)
        self.sources: list[Source] = []
        self.text = ""
        self._at_line_start = True

    def handle(self, event: Any, agent: ChatitegoReActAgent, gate: StepGate) -> list[StreamEvent]:
        """The stream events one agent event makes (often none)."""
        if isinstance(event, AgentStream):
            return self._emit(event.delta, agent)
        if isinstance(event, ToolCallResult):
            output = event.tool_output
            observation = render_observation(event.tool_name, output, self.secrets)
            events: list[StreamEvent] = [ToolCall(event.tool_name, dict(event.tool_kwargs))]
            events += self.add_sources(sources_of_output(output))
            if event.tool_name == ASK_USER_TOOL and not output.is_error:
                return events  # the question is the turn's answer, emitted at the end
            events += self.observation(event.tool_name, observation, bool(output.is_error), agent)
            events += self._judge_observation(observation, agent)
            return events
        if isinstance(event, CorrectionEvent):
            if event.kind == "llm_retry":
                return self.line("", agent) if not self._at_line_start else []
            return self.line(f"Observation: Error: {inert(event.message)}", agent)
        if isinstance(event, StepBoundary):
            gate.ack(event.step)
        return []

    def add_sources(self, sources: Sequence[Source]) -> list[StreamEvent]:
        """Note a tool's sources; the event of those new to this turn, if any."""
        # One passage found by two searches is one source.
        known = {s.chunk_id for s in self.sources}
        new = [s for s in sources if s.chunk_id not in known]
        self.sources.extend(new)
        return [Sources(tuple(new))] if new else []

    def observation(
        self, tool: str, observation: str, is_error: bool, agent: ChatitegoReActAgent
    ) -> list[StreamEvent]:
        """A tool's result: typed, then as the Observation line of the raw text."""
        return [
            Observation(tool, observation, is_error),
            *self.line(f"Observation: {inert(observation)}", agent),
        ]

    def line(self, text: str, agent: ChatitegoReActAgent) -> list[StreamEvent]:
        """``text`` as a line of its own (a newline first if the last one is open)."""
        prefix = "" if self._at_line_start else "\n"
        return self._emit(f"{prefix}{text}\n", agent)

    def _emit(self, text: str, agent: ChatitegoReActAgent) -> list[StreamEvent]:
        if not text:
            return []
        self._at_line_start = text.endswith("\n")
        self.text += text
        extra: list[StreamEvent] = []
        for block in self.parser.feed(text):
            if block.type is not ReActType.OBSERVATION:
                extra += self._apply(self.finalizer.observe(block), agent)
        return [RawText(text), *extra]

    def _judge_observation(self, observation: str, agent: ChatitegoReActAgent) -> list[StreamEvent]:
        return self._apply(
            self.finalizer.observe(ReActBlock(ReActType.OBSERVATION, observation)), agent
        )

    def _apply(self, decision: Any, agent: ChatitegoReActAgent) -> list[StreamEvent]:
        if decision.verdict is Verdict.INJECT and decision.thought:
            agent.inject_thought(decision.thought)
            return self.line(f"Thought: {decision.thought}", agent)
        if decision.verdict is Verdict.FORCE_FINAL:
            agent.turn.request_final(StopReason.FORCED_FINAL)
        return []

    def closing_text(self, state: TurnState, language: Language) -> str:
        """The Answer line to add when the stream does not end with the turn's answer."""
        answer = final_answer(state, language)
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
            answer=final_answer(state, language),
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


def inert(text: str) -> str:
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


def sources_of_output(output: Any) -> list[Source]:
    """The sources a tool output carries (the theme search's passages), else none."""
    raw = output.raw_output
    sources = getattr(raw, "sources", None)
    if isinstance(sources, list):
        return [s for s in sources if isinstance(s, Source)]
    return []
