"""Tests of the general toolkit: calculator, dates, text tools, ask_user."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from engine.errors import RetryException
from engine.tools import dates
from engine.tools.calculator import calculate
from engine.tools.dates import date_add, date_diff, now, parse_date
from engine.tools.general import (
    ALWAYS_ON_GENERAL_TOOLS,
    ASK_USER_TOOL_NAME,
    GeneralToolKit,
    ask_user,
)
from engine.tools.text import change_case, extract_numbers, word_count

# --- calculator ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("2 * (3 + 4)", "14"),
        ("2 + 3 * 4", "14"),
        ("(2 + 3) * 4", "20"),
        ("10 - 4 - 3", "3"),
        ("-2 ** 2", "-4"),
        ("2 ** 3 ** 2", "512"),
        ("2 ^ 10", "1024"),
        ("2 ** -3", "0.125"),
        ("7 / 2", "3.5"),
        ("6 / 2", "3"),
        ("1 / 3", "0.333333333333"),
        ("0.1 + 0.2", "0.3"),
        ("17 // 5", "3"),
        ("17 % 5", "2"),
        ("3,5 * 2", "7"),
        ("(1,5 + 2) * 3", "10.5"),
        ("3,5 * sqrt(4)", "7"),
        ("6 × 7", "42"),
        ("8 ÷ 2", "4"),
        ("2 + 2 =", "4"),
        ("sqrt(16)", "4"),
        ("sqrt(2)", "1.41421356237"),
        ("abs(-3.5)", "3.5"),
        ("round(2.5)", "3"),
        ("round(2.675, 2)", "2.68"),
        ("round(1234, -2)", "1200"),
        ("min(4, 2, 8)", "2"),
        ("max(3,5)", "5"),
        ("max([1, 5, 2])", "5"),
        ("sum(1, 2, 3.5)", "6.5"),
        ("log(100, 10)", "2"),
        ("log10(1000)", "3"),
        ("ln(e)", "1"),
        ("exp(0)", "1"),
        ("cos(0) + sin(0)", "1"),
        ("floor(3.7) + ceil(3.2)", "7"),
        ("pi", "3.14159265359"),
        ("2 ** 100", "1267650600228229401496703205376"),
    ],
)
def test_calculate_results(expression: str, expected: str) -> None:
    assert calculate(expression) == expected


def test_calculate_keeps_big_integers_exact() -> None:
    assert calculate("10 ** 50 + 1") == "1" + "0" * 49 + "1"


@pytest.mark.parametrize(
    "expression",
    [
        "__import__('os')",
        "__import__('os').system('echo hacked')",
        "().__class__",
        "().__class__.__bases__[0].__subclasses__()",
        "(lambda: 1)()",
        "[x for x in range(3)]",
        "sum(x for x in range(10))",
        "open('/etc/passwd')",
        "x + 1",
        "eval('1')",
        "'a' * 3",
        "True + 1",
        "1 if 1 else 2",
        "1 < 2",
        "[1, 2][0]",
        "1 << 10",
    ],
)
def test_calculate_refuses_code(expression: str) -> None:
    with pytest.raises(RetryException) as caught:
        calculate(expression)
    assert "Example:" in caught.value.message


@pytest.mark.parametrize(
    "expression",
    [
        "9**9**9",
        "10**100000",
        "2 ** 5000",
        "31 ** 1000",
        "(10 ** 1000) * (10 ** 1000)",
        "1e308 * 10",
        "10 ** 1000 * 1.0",
        "exp(1000)",
        "round(2.5, 10 ** 9)",
    ],
)
def test_calculate_refuses_huge_numbers_quickly(expression: str) -> None:
    started = time.perf_counter()
    with pytest.raises(RetryException, match="too large|at most|between"):
        calculate(expression)
    assert time.perf_counter() - started < 1.0


def test_calculate_refuses_long_and_complex_input() -> None:
    with pytest.raises(RetryException, match="too long"):
        calculate("1 + " * 200 + "1")
    with pytest.raises(RetryException, match="too complex"):
        calculate("-" * 400 + "1")


@pytest.mark.parametrize(
    ("expression", "hint"),
    [
        ("1 / 0", "division by zero"),
        ("5 % 0", "division by zero"),
        ("sqrt(-1)", "not defined"),
        ("(-8) ** (1 / 3)", "not a real number"),
        ("2(3 + 4)", r"2 \* \(3 \+ 4\)"),
        ("1,000,000", "ambiguous"),
        ("3, 5", "comma"),
        ("sqrt(2,25)", "takes 1 argument"),
        ("sqrt", "call it with parentheses"),
        ("2 +", "not valid"),
        ("", "empty"),
        ("foo(2)", "unknown function 'foo'"),
    ],
)
def test_calculate_errors_teach_the_fix(expression: str, hint: str) -> None:
    with pytest.raises(RetryException, match=hint) as caught:
        calculate(expression)
    assert '{"expression": ' in caught.value.message


# --- dates --------------------------------------------------------------------------


@pytest.fixture
def fixed_clock(monkeypatch: pytest.MonkeyPatch) -> datetime:
    moment = datetime(2025, 3, 12, 9, 30, 15, 123456, tzinfo=UTC)
    monkeypatch.setattr(dates, "_clock", lambda: moment)
    return moment


def test_now_uses_the_injected_clock(fixed_clock: datetime) -> None:
    assert now() == "2025-03-12T10:30:15+01:00 (Wednesday, Europe/Paris)"
    assert now("UTC") == "2025-03-12T09:30:15+00:00 (Wednesday, UTC)"
    assert now("America/New_York") == "2025-03-12T05:30:15-04:00 (Wednesday, America/New_York)"
    assert now("tokyo").endswith("(Wednesday, Asia/Tokyo)")


def test_now_unknown_timezone_lists_examples(fixed_clock: datetime) -> None:
    with pytest.raises(RetryException, match="Europe/Paris") as caught:
        now("Mars/Olympus")
    assert "Mars/Olympus" in caught.value.message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2025-03-12", "2025-03-12"),
        ("2025-03-12T10:00", "2025-03-12T10:00:00"),
        ("2025-03-12T10:00:00+01:00", "2025-03-12T10:00:00+01:00"),
        ("12/03/2025", "2025-03-12"),
        ("12.03.2025", "2025-03-12"),
        ("12-03-2025", "2025-03-12"),
        ("12/03/25", "2025-03-12"),
        ("2025/03/12", "2025-03-12"),
        ("12/03/2025 14:30", "2025-03-12T14:30:00"),
        ("12 mars 2025", "2025-03-12"),
        ("mercredi 12 mars 2025", "2025-03-12"),
        ("1er janvier 2025 à 10h30", "2025-01-01T10:30:00"),
        ("15 août 2025", "2025-08-15"),
        ("3 févr. 2026", "2026-02-03"),
        ("March 12, 2025", "2025-03-12"),
        ("12 mars", "2025-03-12"),
        ("demain", "2025-03-13"),
        ("2025-03-12 (Wednesday)", "2025-03-12"),
    ],
)
def test_parse_date_formats(fixed_clock: datetime, text: str, expected: str) -> None:
    assert parse_date(text).split(" (")[0] == expected


def test_parse_date_gives_the_weekday_of_any_date() -> None:
    # "Quel jour de la semaine était le 14 juillet 1789 ?" is answered by this tool.
    assert parse_date("14 juillet 1789") == "1789-07-14 (Tuesday)"


@pytest.mark.parametrize("timestamp", ["1741737600", "1741737600.5", "20250312"])
def test_timestamps_are_refused_with_iso_hint(timestamp: str) -> None:
    with pytest.raises(RetryException, match="not a timestamp") as caught:
        parse_date(timestamp)
    assert "ISO 8601" in caught.value.message
    assert "YYYY-MM-DD" in caught.value.message


def test_timestamp_refused_in_every_date_tool() -> None:
    with pytest.raises(RetryException, match="ISO 8601"):
        date_add("1741737600", days=1)
    with pytest.raises(RetryException, match="`end`.*ISO 8601"):
        date_diff("2025-01-01", "1741737600")


@pytest.mark.parametrize("text", ["31/02/2025", "n'importe quoi", ""])
def test_parse_date_refuses_invalid_dates(text: str) -> None:
    with pytest.raises(RetryException, match="ISO 8601"):
        parse_date(text)


def test_date_add_month_end() -> None:
    assert date_add("2025-01-31", months=1) == "2025-02-28 (Friday)"
    assert date_add("2024-01-31", months=1) == "2024-02-29 (Thursday)"
    assert date_add("2024-02-29", years=1) == "2025-02-28 (Friday)"


def test_date_add_units_and_formats() -> None:
    assert date_add("12/03/2025", days=-12) == "2025-02-28 (Friday)"
    assert date_add("2025-03-12", weeks=2, days=1) == "2025-03-27 (Thursday)"
    assert date_add("2025-03-12T10:00", days=1) == "2025-03-13T10:00:00 (Thursday)"
    # Models often send numbers as strings.
    assert date_add("2025-01-31", months="1") == "2025-02-28 (Friday)"  # type: ignore[arg-type]


def test_date_add_refuses_bad_amounts() -> None:
    with pytest.raises(RetryException, match="whole number"):
        date_add("2025-01-01", days="beaucoup")  # type: ignore[arg-type]
    with pytest.raises(RetryException, match="out of range"):
        date_add("2025-01-01", years=9000)


def test_date_diff() -> None:
    assert date_diff("2025-01-01", "2025-03-01") == (
        "59 days (8 weeks and 3 days) from 2025-01-01 to 2025-03-01"
    )
    assert date_diff("2025-03-01", "2025-03-02") == "1 day from 2025-03-01 to 2025-03-02"
    assert date_diff("01/03/2025", "01/01/2025").startswith("-59 days (8 weeks and 3 days)")
    assert "end is before start" in date_diff("2025-03-01", "2025-01-01")
    assert date_diff("2025-03-01T10:00", "2025-03-02T12:30").startswith("1 day 2 hours 30 minutes")


# --- text ----------------------------------------------------------------------------


def test_word_count() -> None:
    result = word_count("Bonjour le monde. L'homme est peut-être là !\nFin")
    assert result == "8 words, 48 characters (40 without spaces), 3 sentences, 2 lines"
    assert word_count("") == "0 words, 0 characters (0 without spaces), 0 sentences, 0 lines"


def test_change_case() -> None:
    assert change_case("Bonjour", "upper") == "BONJOUR"
    assert change_case("Bonjour", "LOWER") == "bonjour"
    assert change_case("l'été à jean-pierre", "title") == "L'été À Jean-Pierre"
    assert change_case("BONJOUR. ça va ? oui", "sentence") == "Bonjour. Ça va ? Oui"
    with pytest.raises(RetryException, match="upper, lower, title"):
        change_case("x", "camel")


def test_extract_numbers() -> None:
    assert extract_numbers("Il a payé 12,50 € pour 3 livres.") == "2 numbers found: [12.50, 3]"
    assert extract_numbers("Il fait -3 °C, 1\u202f234,5 habitants, 1,000,000 et 1,234.56") == (
        "4 numbers found: [-3, 1234.5, 1000000, 1234.56]"
    )
    assert extract_numbers("A4 et mp3") == "No number found in the text."


# --- ask_user and the toolkit ---------------------------------------------------------


def test_ask_user_returns_the_question() -> None:
    assert ask_user("  Quelle ville ?  ") == "Quelle ville ?"
    with pytest.raises(RetryException, match="question"):
        ask_user("   ")


def test_toolkit_names_descriptions_and_return_direct() -> None:
    tools = GeneralToolKit().tools()
    names = [tool.metadata.name for tool in tools]
    assert names == [
        "calculate",
        "now",
        "date_add",
        "date_diff",
        "parse_date",
        "word_count",
        "change_case",
        "extract_numbers",
        "ask_user",
    ]
    for tool in tools:
        assert tool.metadata.description.strip()
        assert "Example: {" in tool.metadata.description
    direct = {tool.metadata.name for tool in tools if tool.metadata.return_direct}
    assert direct == {ASK_USER_TOOL_NAME}
    assert set(ALWAYS_ON_GENERAL_TOOLS) <= set(names)


def test_toolkit_tools_are_callable() -> None:
    by_name = {tool.metadata.name: tool for tool in GeneralToolKit().tools()}
    assert str(by_name["calculate"].call(expression="2 * (3 + 4)")) == "14"
    assert str(by_name["ask_user"].call(question="Which city?")) == "Which city?"
