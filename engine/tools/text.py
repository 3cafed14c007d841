"""Small text utilities the model is unreliable at: counting, case, numbers.

Language models count words and characters badly (they see tokens), so these
questions go to exact tools. Numbers are read the French way: a single comma
is a decimal comma, and spaces (narrow or not breaking) separate thousands.
"""

from __future__ import annotations

import re

from engine.errors import RetryException

# A word may contain inner apostrophes or hyphens: "l'homme", "peut-être" count once.
_WORD = re.compile(r"\w+(?:['’\-]\w+)*")
_SENTENCE_END = re.compile(r"[.!?…]+(?=\s|$)")
_CASES = ("upper", "lower", "title", "sentence")
_CASE_ALIASES = {"uppercase": "upper", "lowercase": "lower", "capitalize": "sentence"}
_WORD_START = re.compile(r"(^|[\s\-])(\w)")
_NUMBER = re.compile(
    r"(?<![\w.,])[-−]?(?:\d{1,3}(?:[\u00a0\u202f]\d{3})+|\d+)(?:[.,]\d+)*",
)


def _require_text(value: object, parameter: str, example: str) -> str:
    if not isinstance(value, str):
        raise RetryException(f"`{parameter}` must be a string, got {value!r}. Example: {example}")
    return value


def _plural(count: int, unit: str) -> str:
    return f"{count} {unit}" if count == 1 else f"{count} {unit}s"


def _sentence_count(text: str) -> int:
    pieces = _SENTENCE_END.split(text)
    return sum(1 for piece in pieces if _WORD.search(piece))


def word_count(text: str) -> str:
    """Count the words, characters (with and without spaces), sentences and lines of a text.

    Example: {"text": "Bonjour le monde. Comment ça va ?"}
    """
    value = _require_text(text, "text", '{"text": "Bonjour le monde."}')
    words = len(_WORD.findall(value))
    characters = len(value)
    without_spaces = sum(1 for char in value if not char.isspace())
    lines = len(value.splitlines())
    return (
        f"{_plural(words, 'word')}, {_plural(characters, 'character')} "
        f"({without_spaces} without spaces), {_plural(_sentence_count(value), 'sentence')}, "
        f"{_plural(lines, 'line')}"
    )


def _title(text: str) -> str:
    """Capitalise after spaces and hyphens only: "l'été" -> "L'été", not "L'Été"."""
    return _WORD_START.sub(lambda m: m.group(1) + m.group(2).upper(), text.lower())


def _sentence(text: str) -> str:
    lowered = text.lower()
    return re.sub(r"(^\s*|[.!?…]\s+)(\w)", lambda m: m.group(1) + m.group(2).upper(), lowered)


def change_case(text: str, case: str) -> str:
    """Rewrite a text in another case: "upper", "lower", "title" (Each Word) or "sentence".

    Example: {"text": "bonjour le monde", "case": "title"}
    """
    value = _require_text(text, "text", '{"text": "bonjour", "case": "upper"}')
    wanted = str(case).strip().lower()
    wanted = _CASE_ALIASES.get(wanted, wanted)
    if wanted == "upper":
        return value.upper()
    if wanted == "lower":
        return value.lower()
    if wanted == "title":
        return _title(value)
    if wanted == "sentence":
        return _sentence(value)
    raise RetryException(
        f"Unknown case {case!r}; use one of {', '.join(_CASES)}. "
        'Example: {"text": "bonjour le monde", "case": "upper"}'
    )


def _normalise_number(raw: str) -> str:
    """Return the number in plain notation: "1 234,5" -> "1234.5", "1.000.000" -> "1000000".

    Several separators are read as thousands groups ("1,234.56", "1.234,56"); anything
    else, like a version "2.1.3", is returned as written rather than guessed.
    """
    text = raw.replace("−", "-").replace("\u00a0", "").replace("\u202f", "")
    separators = [char for char in text if char in ".,"]
    if len(separators) <= 1:
        return text.replace(",", ".")
    groups = re.split(r"[.,]", text)
    if len(set(separators)) == 1 and all(len(group) == 3 for group in groups[1:]):
        return "".join(groups)
    thousands, decimal = separators[:-1], separators[-1]
    if decimal not in thousands and all(len(group) == 3 for group in groups[1:-1]):
        return "".join(groups[:-1]) + "." + groups[-1]
    return raw


def extract_numbers(text: str) -> str:
    """List the numbers written in a text, normalised (decimal point, no thousands separators).

    A single comma is read as a French decimal comma: "3,5" -> 3.5.
    Example: {"text": "Il a payé 12,50 € pour 3 livres."}
    """
    value = _require_text(text, "text", '{"text": "3 pommes à 1,20 €"}')
    numbers = [_normalise_number(match.group()) for match in _NUMBER.finditer(value)]
    if not numbers:
        return "No number found in the text."
    return f"{_plural(len(numbers), 'number')} found: [{', '.join(numbers)}]"
