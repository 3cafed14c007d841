"""The chat user's preferences (language, display mode, detail) and their cookie form."""

from __future__ import annotations

import json
from dataclasses import dataclass

from themes.theme_settings import DETAIL_LEVELS
from tracer.render import DisplayMode
from tracer.ui_text import LANGUAGES


@dataclass(frozen=True)
class ChatPreferences:
    """What the user chose; ``detail`` is None while the theme's default applies."""

    lang: str
    mode: DisplayMode = DisplayMode.EVERYTHING
    detail: str | None = None


def parse_preferences(raw: str | None, default_language: str) -> ChatPreferences:
    """Read the saved preferences; any unreadable or unknown value falls back on its default.

    The cookie is the browser's to keep, so it may hold an older or altered value: a bad
    field costs that field only, never the page.
    """
    try:
        saved = json.loads(raw or "{}")
    except ValueError:
        saved = {}
    if not isinstance(saved, dict):
        saved = {}
    lang = saved.get("lang")
    try:
        mode = DisplayMode(saved.get("mode", DisplayMode.EVERYTHING.value))
    except ValueError:
        mode = DisplayMode.EVERYTHING
    detail = saved.get("detail")
    return ChatPreferences(
        lang=lang if lang in LANGUAGES else default_language,
        mode=mode,
        detail=detail if detail in DETAIL_LEVELS else None,
    )


def serialize_preferences(preferences: ChatPreferences) -> str:
    """The compact JSON kept in the cookie (cookies are small: no spaces)."""
    saved = {"lang": preferences.lang, "mode": preferences.mode.value, "detail": preferences.detail}
    return json.dumps(saved, separators=(",", ":"))
