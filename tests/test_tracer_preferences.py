"""The chat preferences cookie: round trip, and every damaged field falls back alone."""

from __future__ import annotations

import pytest

from tracer.preferences import ChatPreferences, parse_preferences, serialize_preferences
from tracer.render import DisplayMode


def test_round_trip() -> None:
    prefs = ChatPreferences("en", DisplayMode(list(DisplayMode)[-1].value), "detailed")
    assert parse_preferences(serialize_preferences(prefs), "fr") == prefs


def test_nothing_saved_gives_the_defaults() -> None:
    assert parse_preferences(None, "fr") == ChatPreferences("fr", DisplayMode.EVERYTHING, None)


@pytest.mark.parametrize("raw", ["not json", "[1, 2]", '"text"', "null"])
def test_unreadable_cookie_gives_the_defaults(raw: str) -> None:
    assert parse_preferences(raw, "en") == ChatPreferences("en")


def test_a_bad_field_costs_that_field_only() -> None:
    prefs = parse_preferences('{"lang": "de", "mode": "nope", "detail": "detailed"}', "fr")
    assert prefs == ChatPreferences("fr", DisplayMode.EVERYTHING, "detailed")
    prefs = parse_preferences('{"lang": "en", "detail": "huge"}', "fr")
    assert prefs == ChatPreferences("en", DisplayMode.EVERYTHING, None)


def test_serialized_form_is_compact() -> None:
    assert " " not in serialize_preferences(ChatPreferences("fr"))
