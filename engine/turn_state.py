"""TurnState: everything one run of the agent learns, read by the engine after the turn."""

from __future__ import annotations

from dataclasses import dataclass, field

from llama_index.core.agent.react.types import BaseReasoningStep
from llama_index.core.llms import ChatMessage
from llama_index.core.tools import ToolOutput

from engine.observations import findings_of
from engine.prompts import Language
from engine.types import LLMFault, StopReason, ToolCallRecord
from models.inprocess import GenerationUsage


@dataclass
class TurnState:
    """Everything one run of the agent learns; a new agent (and state) per turn."""

    language: Language = "fr"
    max_steps: int = 8
    max_consecutive_retries: int = 2
    llm_calls: int = 0
    consecutive_retries: int = 0
    total_retries: int = 0
    force_final: bool = False
    force_final_reason: StopReason | None = None
    force_final_attempted: bool = False
    pending_correction: list[ChatMessage] = field(default_factory=list)
    last_output: str = ""
    pending_thoughts: list[str] = field(default_factory=list)
    stop_reason: StopReason | None = None
    stop_detail: str = ""
    answer: str | None = None
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    observations: list[tuple[str, str]] = field(default_factory=list)
    # What the tool results taught, in the user's words (a fallback answer lists them).
    findings: list[str] = field(default_factory=list)
    # The provider of the model ("mistral", "openai_like", "local", ""), and the call
    # that failed when the model could not be reached.
    provider: str = ""
    fault: LLMFault | None = None
    waiting_question: str | None = None
    internal_errors: list[str] = field(default_factory=list)
    # Reasoning to start from (resuming after ask_user); consumed by the first step.
    initial_reasoning: list[BaseReasoningStep] = field(default_factory=list)
    # One entry per model call: tokens read (counted, or estimated for remote models).
    usage: list[GenerationUsage] = field(default_factory=list)
    # What the token budget had to shorten in this turn ("observations", "history"...).
    trimmed: list[str] = field(default_factory=list)
    # The question is a computation (compact profile): no Answer before a tool has run.
    # Left free, the 1.5B model answered "12.5% of 3,480" from its head (420).
    tool_required: bool = False

    def note_result(self, tool_name: str, output: ToolOutput, observation: str) -> None:
        """Record a tool's Observation, and what it taught for a fallback answer."""
        self.observations.append((tool_name, observation))
        self.findings.extend(findings_of(tool_name, output, observation, self.language))

    def request_final(self, reason: StopReason) -> None:
        if not self.force_final:
            self.force_final = True
            self.force_final_reason = reason
