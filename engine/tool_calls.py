"""Checking a tool call the model wrote: the tool's name and its arguments.

What is unambiguous is normalised (a renamed only argument, a tool name in
another case); anything else is a ``RetryException`` that tells the model how
to write the call.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from llama_index.core.agent.react.types import ActionReasoningStep
from llama_index.core.tools import AsyncBaseTool
from pydantic import ValidationError

from engine.errors import RetryException
from engine.output_parser import FORMAT_REMINDER, RAW_INPUT_KEY


def resolve_tool_call(
    action: ActionReasoningStep, tools: Sequence[AsyncBaseTool], user_message: str = ""
) -> tuple[str, dict[str, Any]]:
    """Check the tool name and arguments; normalise what is unambiguous, else RetryException.

    ``user_message``: the turn's question, to leave out the numbers the model invented
    (``drop_invented_numbers``).
    """
    by_name = {t.metadata.get_name(): t for t in tools}
    name = action.action
    if name not in by_name:
        wanted = _normalise_name(name)
        matches = [n for n in by_name if _normalise_name(n) == wanted]
        if len(matches) != 1:
            available = ", ".join(sorted(by_name)) or "(none)"
            raise RetryException(
                f"There is no tool named '{name}'. Available tools: {available}. "
                "Use one of them exactly as written, or give your Answer."
            )
        name = matches[0]
    tool = by_name[name]
    kwargs = _normalise_kwargs(name, dict(action.action_input), tool)
    return name, drop_invented_numbers(kwargs, tool, user_message)


def check_not_echo(question: str, user_message: str) -> None:
    """Refuse an ask_user that sends the user's own question back (seen with the 1.5B model)."""

    def words(text: str) -> set[str]:
        return {w for w in re.findall(r"\w+", text.lower()) if len(w) > 2}

    asked, original = words(question), words(user_message)
    if asked and original and len(asked & original) / len(asked | original) >= 0.8:
        raise RetryException(
            "Do not ask the user their own question back. Answer it, directly or with a "
            "tool, or ask only for a specific missing detail."
        )


# Number words a question may use instead of digits ("dans deux semaines").
_NUMBER_WORDS = {
    word: value
    for value, words in enumerate(
        [
            "zero zéro",
            "one un une",
            "two deux",
            "three trois",
            "four quatre",
            "five cinq",
            "six",
            "seven sept",
            "eight huit",
            "nine neuf",
            "ten dix",
            "eleven onze",
            "twelve douze",
        ]
    )
    for word in words.split()
}


def drop_invented_numbers(
    kwargs: dict[str, Any], tool: AsyncBaseTool, user_message: str
) -> dict[str, Any]:
    """Drop the optional number arguments the model added on its own.

    Asked "45 jours après le 2025-01-20", the 1.5B model wrote
    ``{"date": "2025-01-20", "days": 45, "months": 3}``. When at least one
    optional number argument is a number of the user's message, the others that
    are not were invented: they are left out (the trace shows the call as run).
    When none is written there (« dans deux semaines » sent as 14 days), the
    model converted units, and nothing is dropped.
    """
    schema_cls = tool.metadata.fn_schema
    if schema_cls is None:
        return kwargs
    optional_numbers = [
        name
        for name, info in schema_cls.model_fields.items()
        if not info.is_required()
        and info.annotation in (int, float)
        and name in kwargs
        and isinstance(kwargs[name], int | float)
        and kwargs[name] != info.default
    ]
    written = _numbers_in(user_message)
    grounded = [n for n in optional_numbers if abs(kwargs[n]) in written]
    if not grounded:
        return kwargs
    return {k: v for k, v in kwargs.items() if k not in optional_numbers or k in grounded}


def _numbers_in(text: str) -> set[float]:
    lowered = text.lower()
    numbers = {float(n.replace(",", ".")) for n in re.findall(r"\d+(?:[.,]\d+)?", lowered)}
    numbers |= {float(_NUMBER_WORDS[w]) for w in re.findall(r"\w+", lowered) if w in _NUMBER_WORDS}
    return numbers


def _normalise_name(name: str) -> str:
    return name.lower().replace("-", "_").replace(" ", "_").split(".")[-1]


def _normalise_kwargs(name: str, kwargs: dict[str, Any], tool: AsyncBaseTool) -> dict[str, Any]:
    schema_cls = tool.metadata.fn_schema
    if schema_cls is None:
        return kwargs
    fields = schema_cls.model_fields
    required = [f for f, info in fields.items() if info.is_required()]
    example = _example_args(fields, required)
    if RAW_INPUT_KEY in kwargs:
        raw = kwargs.pop(RAW_INPUT_KEY)
        if len(required) == 1 and not kwargs:
            kwargs = {required[0]: raw}
        else:
            raise RetryException(
                f"The Action Input of {name} must be a JSON object, e.g. {example}."
            )
    unknown = [k for k in kwargs if k not in fields]
    if unknown and len(required) == 1 and len(kwargs) == 1 and required[0] not in kwargs:
        # Small models rename the only argument ("input", "query"): map it back.
        kwargs = {required[0]: next(iter(kwargs.values()))}
        unknown = []
    if unknown:
        raise RetryException(
            f"{name} has no argument {', '.join(repr(u) for u in unknown)}. "
            f"Its arguments are: {', '.join(fields) or 'none'}. Example: {example}."
        )
    try:
        schema_cls.model_validate(kwargs)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'input'}: {err['msg']}"
            for err in exc.errors()
        )
        raise RetryException(
            f"Invalid arguments for {name}: {problems}. Example: {example}. " + FORMAT_REMINDER
        ) from None
    return kwargs


def _example_args(fields: dict[str, Any], required: list[str]) -> str:
    names = required or list(fields)[:1]
    inner = ", ".join(f'"{n}": "..."' for n in names)
    return "{" + inner + "}"
