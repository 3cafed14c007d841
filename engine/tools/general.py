"""The general toolkit: tools useful whatever the theme of the conversation.

``ask_user`` is special: it is ``return_direct``, so calling it ends the turn
and its output (the question) is shown to the user; the conversation resumes
with the user's answer. ``ALWAYS_ON_GENERAL_TOOLS`` names the tools the router
must offer on every turn, whatever it selected.
"""

from __future__ import annotations

from llama_index.core.tools import FunctionTool

from engine.errors import RetryException
from engine.tools.calculator import calculate
from engine.tools.dates import date_add, date_diff, now, parse_date
from engine.tools.registry import tool_from_function
from engine.tools.text import change_case, extract_numbers, word_count

ASK_USER_TOOL_NAME = "ask_user"
ALWAYS_ON_GENERAL_TOOLS: tuple[str, ...] = (ASK_USER_TOOL_NAME, "calculate")


def ask_user(question: str) -> str:
    """Ask the user a clarifying question when information needed to answer is missing.

    The turn pauses until the user answers; ask one short, precise question.
    Returns the question itself.
    Example: {"question": "Which city do you mean: Paris, France or Paris, Texas?"}
    """
    text = question.strip() if isinstance(question, str) else ""
    if not text:
        raise RetryException(
            "ask_user needs a non-empty `question` to show the user. "
            'Example: {"question": "Which date do you mean?"}'
        )
    return text


class GeneralToolKit:
    """Builds the general tools; a new list each call, so callers may mutate it."""

    def tools(self) -> list[FunctionTool]:
        return [
            tool_from_function(calculate),
            tool_from_function(now),
            tool_from_function(date_add),
            tool_from_function(date_diff),
            tool_from_function(parse_date),
            tool_from_function(word_count),
            tool_from_function(change_case),
            tool_from_function(extract_numbers),
            tool_from_function(ask_user, name=ASK_USER_TOOL_NAME, return_direct=True),
        ]
