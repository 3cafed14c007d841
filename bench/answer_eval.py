"""Scoring for the answer benchmark: the eval set, fact matching and citation checks.

The eval set (``eval/questions.jsonl``) lists questions with the facts a right
answer must state and the files a right answer may cite. Matching is lenient on
form only: case, accents, kinds of spaces, thousands separators, decimal comma
and curly quotes are normalised away; words and numbers must match whole
(``"60"`` matches neither ``"600"`` nor ``"160"``).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, cast, get_args

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_EVAL_SET = REPO_ROOT / "eval" / "questions.jsonl"
# Where each theme's documents live; the demo theme is the product's own.
THEME_CORPORA: dict[str, Path] = {
    "demo": REPO_ROOT / "themes" / "demo",
    "conception": REPO_ROOT / "eval" / "corpus" / "conception",
}

Lang = Literal["fr", "en"]
Kind = Literal["document", "calculator", "date", "general"]
Fact = tuple[str, ...]

LANGS: tuple[str, ...] = get_args(Lang)
KINDS: tuple[str, ...] = get_args(Kind)
KEYS = ("id", "theme", "lang", "kind", "question", "facts", "cite")


@dataclass(frozen=True)
class EvalQuestion:
    """One benchmark question; each fact lists its acceptable spellings."""

    id: str
    theme: str | None
    lang: Lang
    kind: Kind
    question: str
    facts: tuple[Fact, ...]
    cite: tuple[str, ...] | None


# --- Loading ---------------------------------------------------------------


def load_eval_set(path: Path = DEFAULT_EVAL_SET) -> list[EvalQuestion]:
    """Read and validate a JSONL eval set; raise ValueError naming the bad line."""
    questions: list[EvalQuestion] = []
    first_line_of: dict[str, int] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            question = _parse_line(line)
        except ValueError as error:
            raise ValueError(f"{path.name} line {number}: {error}") from None
        if question.id in first_line_of:
            raise ValueError(
                f"{path.name} line {number}: duplicate id {question.id!r} "
                f"(first used on line {first_line_of[question.id]}); ids must be unique"
            )
        first_line_of[question.id] = number
        questions.append(question)
    if not questions:
        raise ValueError(f"{path.name}: no questions (one JSON object per line expected)")
    return questions


def _parse_line(line: str) -> EvalQuestion:
    try:
        raw = json.loads(line)
    except json.JSONDecodeError as error:
        raise ValueError(f"invalid JSON ({error.msg} at column {error.colno})") from None
    if not isinstance(raw, dict):
        raise ValueError('expected a JSON object, e.g. {"id": "...", ...}')
    unknown = sorted(set(raw) - set(KEYS))
    if unknown:
        raise ValueError(f"unknown key(s) {unknown}; allowed keys: {list(KEYS)}")
    missing = [key for key in KEYS if key not in raw]
    if missing:
        raise ValueError(f"missing key(s) {missing}; every line needs {list(KEYS)}")
    kind = raw["kind"]
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {list(KINDS)}, not {kind!r}")
    if raw["lang"] not in LANGS:
        raise ValueError(f"lang must be one of {list(LANGS)}, not {raw['lang']!r}")
    theme = raw["theme"]
    if kind == "document" and theme not in THEME_CORPORA:
        raise ValueError(f"a document question needs theme in {list(THEME_CORPORA)}, not {theme!r}")
    if kind != "document" and theme is not None:
        raise ValueError(f"theme must be null for a {kind} question, not {theme!r}")
    cite = raw["cite"]
    if kind == "document" and cite is None:
        raise ValueError("a document question needs cite: a list of file names")
    if kind != "document" and cite is not None:
        raise ValueError(f"cite must be null for a {kind} question")
    return EvalQuestion(
        id=_text(raw["id"], "id"),
        theme=theme,
        lang=cast(Lang, raw["lang"]),
        kind=cast(Kind, kind),
        question=_text(raw["question"], "question"),
        facts=_facts(raw["facts"]),
        cite=None if cite is None else _strings(cite, "cite"),
    )


def _text(value: object, key: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{key} must be a non-empty string, not {value!r}")
    return value


def _strings(value: object, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        raise ValueError(f"{key} must be a non-empty list of strings, not {value!r}")
    return tuple(_text(item, key) for item in value)


def _facts(value: object) -> tuple[Fact, ...]:
    if not isinstance(value, list) or not value:
        raise ValueError('facts must be a non-empty list of facts, e.g. [["351"], ["PDF"]]')
    facts = tuple(_strings(fact, "each fact") for fact in value)
    for fact in facts:
        if any(not normalise(alternative) for alternative in fact):
            raise ValueError(f"fact {list(fact)} has an alternative that normalises to nothing")
    return facts


# --- Matching --------------------------------------------------------------

_QUOTES = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201a": "'",
        "\u201b": "'",
        "\u2032": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u201e": '"',
        "\u201f": '"',
        "\u00ab": '"',
        "\u00bb": '"',
        # Hyphens: the seed documents write "USB\u2011C" and "front\u2011end".
        "\u2010": "-",
        "\u2011": "-",
        "\u2012": "-",
        "\u2212": "-",
        # Zero-width characters would split a word in two.
        "\u200b": None,
        "\u2060": None,
        "\ufeff": None,
    }
)
_SPACES = re.compile(r"\s+")
# A thousands grouping: 1-3 leading digits (not a lone 0, so "0.823" stays a
# decimal), then groups of exactly three digits, all with the same separator.
_THOUSANDS = re.compile(r"(?<![\d.,])([1-9]\d{0,2})([ ,.'])(\d{3}(?:\2\d{3})*)(?!\d)")
_DECIMAL_COMMA = re.compile(r"(?<=\d),(?=\d)")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def normalise(text: str) -> str:
    """Fold case, accents, spaces, quotes, thousands separators and decimal commas."""
    text = unicodedata.normalize("NFKD", text.casefold())
    text = "".join(char for char in text if not unicodedata.combining(char))
    text = _SPACES.sub(" ", text.translate(_QUOTES))
    text = _THOUSANDS.sub(lambda match: match.group(0).replace(match.group(2), ""), text)
    text = _DECIMAL_COMMA.sub(".", text)
    return text.strip()


def _pattern(alternative: str) -> re.Pattern[str] | None:
    wanted = normalise(alternative)
    if not wanted:
        return None
    if _NUMBER.fullmatch(wanted):
        # "351" also matches "351.00"; "0.5" also matches "0.50"; never "351.5" nor "1351".
        zeros = r"0*" if "." in wanted else r"(?:\.0+)?"
        return re.compile(rf"(?<!\w)(?<!\d\.){re.escape(wanted)}{zeros}(?!\w)(?!\.\d)")
    start = r"(?<!\w)" if re.match(r"\w", wanted) else ""
    end = r"(?!\w)" if re.search(r"\w$", wanted) else ""
    if re.fullmatch(r"[a-z]+", alternative):
        # A common noun also counts in the plural: "les fichiers, pages et scores" states
        # "fichier", "page" and "score". Names and acronyms ("PDF", "take_step") do not.
        end = r"(?:s|x)?" + end
    return re.compile(start + re.escape(wanted) + end)


def fact_present(answer: str, alternatives: Sequence[str]) -> bool:
    """True if any alternative occurs in the answer as whole words, after normalising both."""
    text = normalise(answer)
    for alternative in alternatives:
        pattern = _pattern(alternative)
        if pattern is not None and pattern.search(text):
            return True
    return False


def missing_facts(answer: str, question: EvalQuestion) -> list[Fact]:
    """The question's facts that the answer does not state."""
    return [fact for fact in question.facts if not fact_present(answer, fact)]


def facts_score(answer: str, question: EvalQuestion) -> float:
    """Share of the question's facts present in the answer, from 0.0 to 1.0."""
    return 1.0 - len(missing_facts(answer, question)) / len(question.facts)


def is_correct(answer: str, question: EvalQuestion) -> bool:
    """True if the answer states every fact of the question."""
    return not missing_facts(answer, question)


def cites_expected(cited_files: Sequence[str], question: EvalQuestion) -> bool:
    """True if any cited file's base name is one the question accepts (case-insensitive)."""
    if question.cite is None:
        return False
    expected = {name.casefold() for name in question.cite}
    return any(re.split(r"[\\/]", cited)[-1].casefold() in expected for cited in cited_files)
