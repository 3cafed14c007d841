"""Workflow events the agent writes for the orchestrator (the ReActEngine)."""

from __future__ import annotations

from llama_index.core.workflow import Event


class StepBoundary(Event):
    """A new model call is about to start; the orchestrator acknowledges it.

    The acknowledgement guarantees that the Finalizer has seen every block of
    the previous step before the next prompt is built, so an injected Thought
    is never late by one step.
    """

    step: int


class CorrectionEvent(Event):
    """The agent sent feedback to the model (format error, forced final answer)."""

    kind: str  # "retry" | "force_final" | "llm_retry"
    message: str
