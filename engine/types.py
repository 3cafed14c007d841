"""Typed values shared by the engine and its callers: blocks, stop reasons, outcomes."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class ReActType(str, Enum):
    """The kind of a ReAct block. ``str`` so that ``block.type == "thought"``."""

    THOUGHT = "thought"
    ACTION = "action"
    ACTION_INPUT = "action_input"
    OBSERVATION = "observation"
    FINAL_ANSWER = "final_answer"
    ANSWER = "answer"
    RESPONSE = "response"
    CONCLUSION = "conclusion"
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"
    UNKNOWN = "unknown"

    @property
    def is_closing(self) -> bool:
        """True for the types that end the reasoning (the Finalizer stops on them)."""
        return self in CLOSING_TYPES


CLOSING_TYPES = frozenset(
    {ReActType.FINAL_ANSWER, ReActType.ANSWER, ReActType.RESPONSE, ReActType.CONCLUSION}
)


@dataclass(frozen=True)
class ReActBlock:
    """One typed segment of the raw ReAct stream (``Thought: ...``, ``Action: ...``)."""

    type: ReActType
    content: str


class StopReason(str, Enum):
    """Why a turn ended. Callers branch on this, never on the answer's wording."""

    ANSWERED = "answered"
    FORCED_FINAL = "forced_final"
    MAX_STEPS = "max_steps"
    LLM_UNAVAILABLE = "llm_unavailable"
    LLM_AUTH_FAILED = "llm_auth_failed"
    # The prompt does not fit in the model's window, even trimmed: not an outage.
    CONTEXT_OVERFLOW = "context_overflow"
    # The model could not be loaded or run (a bad GGUF, out of memory, not configured).
    MODEL_ERROR = "model_error"
    WAITING_FOR_USER = "waiting_for_user"
    CANCELLED = "cancelled"
    INTERNAL_ERROR = "internal_error"


@dataclass(frozen=True)
class ToolCallRecord:
    """A tool the agent really ran during a turn."""

    name: str
    kwargs: dict[str, Any]
    output: str
    is_error: bool


@dataclass(frozen=True)
class Source:
    """A document passage the answer relies on (filled by the theme RAG tool)."""

    file: str
    page: int | None
    chunk_id: str
    score: float
    snippet: str


@dataclass(frozen=True)
class TurnUsage:
    """What a turn cost the model: tokens read (of which from the KV cache) and written.

    Counted with the model's tokenizer for an in-process model; for a remote one
    ``prompt_tokens`` is an estimate and the other counts are 0.
    """

    model_calls: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0


@dataclass(frozen=True)
class LLMFault:
    """The model call that ended a turn: which provider, how many attempts, how long.

    ``provider`` is "mistral", "openai_like", "local", or "" for a model of unknown
    kind (an injected one); messages name it ("Mistral ne répond pas").
    """

    provider: str
    attempts: int
    elapsed_s: float


@dataclass
class TurnOutcome:
    """What a finished turn produced; ``ReActEngine.last_outcome`` after each run."""

    stop_reason: StopReason
    answer: str
    blocks: list[ReActBlock] = field(default_factory=list)
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    steps: int = 0
    sources: list[Source] = field(default_factory=list)
    detail: str = ""
    usage: TurnUsage = field(default_factory=TurnUsage)
    # How the turn was led: "react" (the model picks among the tools), or for the compact
    # profile the question's intent ("documents", "calculation", "date", "direct").
    route: str = "react"
    # Set when the model could not be reached or refused the key (llm_unavailable,
    # llm_auth_failed): the provider, attempts and time spent.
    fault: LLMFault | None = None

    @property
    def answered(self) -> bool:
        return self.stop_reason is StopReason.ANSWERED
