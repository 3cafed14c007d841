"""Chatitego's ReAct engine: llama-index's ReActAgent, streamed, typed and never silent."""

from engine.engine import ReActEngine
from engine.errors import EngineError, ForceFinalizeException, RetryException
from engine.finalizer import ReActFinalizer
from engine.stream_parser import ReActStreamParser
from engine.types import ReActBlock, ReActType, StopReason, ToolCallRecord, TurnOutcome

__all__ = [
    "EngineError",
    "ForceFinalizeException",
    "ReActBlock",
    "ReActEngine",
    "ReActFinalizer",
    "ReActStreamParser",
    "ReActType",
    "RetryException",
    "StopReason",
    "ToolCallRecord",
    "TurnOutcome",
]
