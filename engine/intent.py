"""What a question needs before the first step, for small in-process models.

A large model reads the tool list and picks; the embedded 1.5B model does
not (measured: shown document passages and tools together, it called the
calculator for documentation questions and answered "15 % de 2 340 €" from
a passage). So the compact profile asks the model one narrow question first,
in its side context with a one-word grammar: is this a calculation, a date
computation, or anything else? Its answer picks the step's tools.

One guard keeps the model honest: a calculation or a date computation works
on numbers the question gives, so a question without a digit (or a relative
day such as "demain") is never one, whatever the model said. Seen on the eval
set: "Combien de chunks ... renvoie-t-il ?" classified as a calculation.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from enum import Enum
from typing import Any

from llama_index.core.llms import ChatMessage, MessageRole

logger = logging.getLogger(__name__)


class Intent(str, Enum):
    CALCULATION = "calculation"
    DATE = "date"
    LIVE = "live"
    OTHER = "other"


INTENT_SYSTEM = """\
Classify the user's request. Reply with one word:
calculation - the user asks to compute something from numbers given in the question \
(arithmetic, percentage, price with tax);
date - the user asks to compute with dates given in the question (weekday of a date, \
days between dates, a date plus days), or asks today's date;
other - anything else (a question about documents, procedures, software, people, places, \
definitions)."""

# Worked examples: with them the 1.5B model classified 54 of the 56 benchmark questions
# right; the guard below fixes the two misses (no number in the question).
INTENT_EXAMPLES: tuple[tuple[str, Intent], ...] = (
    ("Combien font 12 % de 250 € ?", Intent.CALCULATION),
    ("Quelle est la procédure pour ajouter un utilisateur ?", Intent.OTHER),
    ("How many days from 2023-05-01 to 2023-06-15?", Intent.DATE),
    ("Which format does the export use?", Intent.OTHER),
    ("Qui a peint la Joconde ?", Intent.OTHER),
    ("Quel jour de la semaine tombe le 3 mars 2027 ?", Intent.DATE),
)
INTENT_GRAMMAR = 'root ::= "calculation" | "date" | "other"\n'
# A theme with MCP tools adds a fourth class, described by those tools' own summaries,
# after the fixed part (the fixed part stays the same KV-cache prefix).
LIVE_RULE = """
live - the user asks for current or real-time data that one of these tools reads:
{tools}"""
LIVE_EXAMPLE = ("Quel est l'état actuel de la machine 3 ?", Intent.LIVE)
LIVE_GRAMMAR = 'root ::= "calculation" | "date" | "live" | "other"\n'

_RELATIVE_DAY = re.compile(
    r"\b(aujourd'hui|aujourd’hui|demain|hier|today|tomorrow|yesterday)\b", re.IGNORECASE
)


def intent_messages(question: str, live_tools: Sequence[str] = ()) -> list[ChatMessage]:
    """The classification prompt; everything before the question is the same every time.

    ``live_tools`` are one-line summaries of the theme's live-data (MCP) tools.
    """
    system = INTENT_SYSTEM
    examples = INTENT_EXAMPLES
    if live_tools:
        system += LIVE_RULE.format(tools="\n".join(f"- {line}" for line in live_tools))
        examples = (*INTENT_EXAMPLES, LIVE_EXAMPLE)
    return few_shot_messages(system, [(q, i.value) for q, i in examples], question)


def few_shot_messages(
    system: str, examples: Sequence[tuple[str, str]], question: str
) -> list[ChatMessage]:
    """A one-word side question: instruction, worked examples, then the question."""
    messages = [ChatMessage(role=MessageRole.SYSTEM, content=system)]
    for example, reply in examples:
        messages.append(ChatMessage(role=MessageRole.USER, content=example))
        messages.append(ChatMessage(role=MessageRole.ASSISTANT, content=reply))
    messages.append(ChatMessage(role=MessageRole.USER, content=" ".join(question.split())))
    return messages


def plausible(intent: Intent, question: str, live: bool = False) -> Intent:
    """The model's intent, unless the question gives nothing to compute with."""
    if intent is Intent.LIVE and not live:
        return Intent.OTHER
    has_digit = any(c.isdigit() for c in question)
    if intent is Intent.CALCULATION and not has_digit:
        return Intent.OTHER
    if intent is Intent.DATE and not (has_digit or _RELATIVE_DAY.search(question)):
        return Intent.OTHER
    return intent


def classify_intent(model: Any, question: str, live_tools: Sequence[str] = ()) -> Intent:
    """The question's intent by the model's side context; ``OTHER`` when anything fails."""
    grammar = LIVE_GRAMMAR if live_tools else INTENT_GRAMMAR
    try:
        word = model.side_complete(
            intent_messages(question, live_tools), max_tokens=4, grammar=grammar
        )
        intent = Intent(str(word).strip())
    except Exception as exc:  # noqa: BLE001 - a failed guess falls back to the documents path
        logger.warning("intent classification failed: %s: %s", type(exc).__name__, exc)
        return Intent.OTHER
    return plausible(intent, question, live=bool(live_tools))


# --- which date tool -----------------------------------------------------------------------------

DATE_TOOL_SYSTEM = """\
Pick the one date tool that answers the request. Reply with its name:
parse_date - the weekday of a given date;
date_add - a date plus or minus days, weeks, months or years;
date_diff - the number of days between two dates;
now - today's date or the current time."""

# Shown all four tools in its ReAct step, the 1.5B model took the first listed:
# "How many days between 2024-01-01 and 2024-03-01?" got parse_date, then an
# invented "20 days". One narrow choice, with examples, it makes well.
DATE_TOOL_EXAMPLES: tuple[tuple[str, str], ...] = (
    ("Quel jour de la semaine tombe le 3 mars 2027 ?", "parse_date"),
    ("How many days from 2023-05-01 to 2023-06-15?", "date_diff"),
    ("Quelle date serons-nous 10 jours après le 2024-02-25 ?", "date_add"),
    ("Quelle est la date d'aujourd'hui ?", "now"),
    ("What day of the week was 4 July 1776?", "parse_date"),
    ("Combien de jours entre le 1er mai et le 14 juillet 2025 ?", "date_diff"),
)
DATE_TOOLS = ("parse_date", "date_add", "date_diff", "now")
DATE_TOOL_GRAMMAR = "root ::= " + " | ".join(f'"{name}"' for name in DATE_TOOLS) + "\n"


def date_tool_messages(question: str) -> list[ChatMessage]:
    return few_shot_messages(DATE_TOOL_SYSTEM, DATE_TOOL_EXAMPLES, question)


def choose_date_tool(model: Any, question: str) -> str | None:
    """The date tool the question needs; ``None`` (offer them all) when the choice fails."""
    try:
        name = str(
            model.side_complete(
                date_tool_messages(question), max_tokens=6, grammar=DATE_TOOL_GRAMMAR
            )
        ).strip()
    except Exception as exc:  # noqa: BLE001 - without a choice the step offers every date tool
        logger.warning("date tool choice failed: %s: %s", type(exc).__name__, exc)
        return None
    return name if name in DATE_TOOLS else None
