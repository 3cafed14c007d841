"""The errors of model loading and running; ``ModelError`` is their root.

Callers branch on these types, never on message text: a context overflow is
not an outage, and neither is a GGUF file that cannot be loaded.

``ModelError`` stands alone rather than deriving from ``engine.errors.EngineError``:
models are a lower layer than the engine (themes use them to ingest), and
their errors must not depend on the layer above them.
"""

from __future__ import annotations


class ModelError(Exception):
    """Root of the errors raised by ``models``."""


class LocalModelError(ModelError):
    """The local model cannot be found, assembled, loaded or run; the message says what to do."""


class ContextOverflowError(ModelError):
    """A prompt does not fit in the model's context window, even after trimming."""

    def __init__(self, prompt_tokens: int, window: int, reserved_output: int = 0) -> None:
        self.prompt_tokens = prompt_tokens
        self.window = window
        self.reserved_output = reserved_output
        super().__init__(
            f"the prompt needs {prompt_tokens} tokens (+{reserved_output} for the answer) "
            f"but the model's context window holds {window}"
        )
