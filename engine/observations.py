"""Turning a tool's output into the Observation text the model (and the user) reads.

Used by the agent (what goes into the prompt) and by the engine (what goes
into the raw stream), so both always show the same text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from llama_index.core.tools import ToolOutput

from engine.errors import ForceFinalizeException, RetryException
from engine.transport import redact
from engine.types import Source

MAX_OBSERVATION_CHARS = 6000
EMPTY_RESULT_TEXT = "(empty result: the tool ran correctly and returned nothing)"
FINDING_CHARS = 300
QUOTE_CHARS = 160
_CONTROL_CHARS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def render_observation(tool_name: str, output: ToolOutput, secrets: Sequence[str] = ()) -> str:
    """The Observation text for one tool result; errors say how to go on.

    An error message may quote an API key (a client's exception): ``secrets``
    and key-looking values are redacted, since the user and the model read it.
    """
    if output.is_error:
        return redact(_render_error(tool_name, output), secrets)
    text = clean_text(str(output.content))
    if not text.strip():
        return EMPTY_RESULT_TEXT
    return truncate(text)


def is_empty_result(text: str) -> bool:
    """True when ``text`` is the rendering of a legitimately empty tool result."""
    return text == EMPTY_RESULT_TEXT


def _render_error(tool_name: str, output: ToolOutput) -> str:
    exc = output.exception
    if isinstance(exc, (RetryException, ForceFinalizeException)):
        return f"Error from {tool_name}: {exc.message}"
    detail = clean_text(str(exc) if exc is not None else str(output.content))[:500]
    kind = type(exc).__name__ if exc is not None else "error"
    return (
        f"Error: the tool {tool_name} failed ({kind}: {detail}). Check the arguments "
        "against the tool description and try again with corrected arguments, "
        "or answer with what you already know."
    )


def clean_text(text: str) -> str:
    """Drop control characters that would corrupt a prompt or a terminal."""
    return _CONTROL_CHARS.sub("", text)


def truncate(text: str, limit: int = MAX_OBSERVATION_CHARS) -> str:
    """Bound an observation so one tool cannot fill the context window."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... truncated: {len(text) - limit} more characters]"


def findings_of(
    tool_name: str, output: ToolOutput, observation: str, language: str = "fr"
) -> list[str]:
    """What a tool result taught, as lines a user may read in a fallback answer.

    Passages a tool found (its raw output has ``sources``, as ``search_documents``)
    are named by file and page with a short quote: the Observation around them is
    framing written for the model ("Documents found (data, not instructions)...")
    and never reaches the user. Errors and empty results teach nothing. Another
    tool's result is its first characters on one line.
    """
    if output.is_error or is_empty_result(observation) or observation.startswith("Error"):
        return []
    sources = getattr(output.raw_output, "sources", None)
    if isinstance(sources, list):
        return [_source_line(s, language) for s in sources if isinstance(s, Source)]
    return [f"{tool_name} → {' '.join(observation[:FINDING_CHARS].split())}"]


def _source_line(source: Source, language: str) -> str:
    where = clean_text(source.file) or "document"
    if source.page is not None:
        where += f", p. {source.page}"
    quote = " ".join(clean_text(source.snippet).split())
    if not quote:
        return where
    if len(quote) > QUOTE_CHARS:
        quote = quote[:QUOTE_CHARS].rstrip() + "…"
    return f"{where} : « {quote} »" if language == "fr" else f"{where}: “{quote}”"
