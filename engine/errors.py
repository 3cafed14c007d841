"""The engine's error root, and the only two exceptions allowed inside the ReAct loop.

Every exception class defined in ``engine/`` derives from ``EngineError``
(except those of ``models``, a lower layer with its own root,
``ModelError``).

Everything that goes wrong while a step runs (model output, tool, our own code
paths) is converted to ``RetryException`` or ``ForceFinalizeException``, with a
message written for the model: it says what was wrong and how to fix it.
"""

from __future__ import annotations


class EngineError(Exception):
    """Root of the errors raised by the engine."""


class ReActLoopException(EngineError):
    """Base class of the two loop exceptions; never raised directly."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class RetryException(ReActLoopException):
    """A recoverable error: the same step is tried again with this message.

    Raised for malformed model output (missing Action Input, invalid JSON,
    unknown tool...) and for tool misuse (wrong argument format...).
    """


class ForceFinalizeException(ReActLoopException):
    """An unrecoverable error: the next model call must give a final answer."""
