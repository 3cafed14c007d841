"""Theme names: the slug rule that keeps URL, form and model input out of the file system."""

from __future__ import annotations

import re

import pytest

from themes.names import THEME_NAME_PATTERN, InvalidThemeName, validate_theme_name


@pytest.mark.parametrize(
    "name",
    ["a", "0", "sales", "rh-2024", "it_support", "9lives", "a" * 64, "x-_-y", "a-"],
)
def test_valid_names_are_returned_unchanged(name: str) -> None:
    assert validate_theme_name(name) is name


@pytest.mark.parametrize(
    "name",
    [
        "",
        "Sales",
        "sales ",
        " sales",
        "sales\n",
        "-sales",
        "_sales",
        ".hidden",
        "..",
        ".",
        "a/b",
        "a\\b",
        "../etc",
        "café",
        "a b",
        "a.b",
        "a" * 65,
        "sales\x00",
        "ｓａｌｅｓ",  # fullwidth letters: \w would accept them, a-z does not
    ],
)
def test_invalid_strings_are_rejected(name: str) -> None:
    with pytest.raises(InvalidThemeName):
        validate_theme_name(name)


@pytest.mark.parametrize("value", [None, 3, b"sales", ["sales"], object()])
def test_non_strings_are_rejected(value: object) -> None:
    with pytest.raises(InvalidThemeName):
        validate_theme_name(value)


def test_error_is_a_value_error_that_says_what_is_allowed() -> None:
    with pytest.raises(ValueError) as caught:
        validate_theme_name("Bad Name")
    message = str(caught.value)
    assert "'Bad Name'" in message
    for rule in ("64", "a-z", "0-9", "'-'", "'_'"):
        assert rule in message
    assert caught.value.name == "Bad Name"  # type: ignore[attr-defined]


def test_error_message_stays_short_for_huge_input() -> None:
    with pytest.raises(InvalidThemeName) as caught:
        validate_theme_name("x" * 10_000)
    assert len(str(caught.value)) < 300


def test_pattern_constant_matches_the_validator() -> None:
    assert THEME_NAME_PATTERN == r"^[a-z0-9][a-z0-9_-]{0,63}$"
    for name in ("ok", "a" * 64, "a" * 65, "-no"):
        accepted = re.fullmatch(THEME_NAME_PATTERN, name) is not None
        try:
            validate_theme_name(name)
            validated = True
        except InvalidThemeName:
            validated = False
        assert accepted == validated
