"""The only two exceptions allowed inside the ReAct loop.

Everything that goes wrong while a step runs (model output, tool, our own code
paths) is converted to one of them, with a message written for the model: it
says what was wrong and how to fix it. See seeds 000/004, "traitement des
erreurs".
"""

from __future__ import annotations


class ReActLoopException(Exception):
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
