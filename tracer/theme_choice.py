"""Which theme the chat page opens: ``?theme=`` first, then the cookie, else a picker."""

from __future__ import annotations

from dataclasses import dataclass

from themes.names import InvalidThemeName, validate_theme_name
from themes.theme import ThemeRepository


@dataclass(frozen=True)
class ThemeChoice:
    """The theme to open (``name``), or why the picker is shown (``problem``)."""

    name: str | None
    problem: str | None = None  # "theme_missing" | "theme_invalid" | "no_theme" | ...
    requested: str | None = None  # the rejected value, to quote in the message


def choose_theme(
    requested: str | None, remembered: str | None, repo: ThemeRepository
) -> ThemeChoice:
    """Validate the URL's theme, else fall back on the remembered one."""
    if requested:
        try:
            name = validate_theme_name(requested)
        except InvalidThemeName:
            return ThemeChoice(None, "theme_invalid", requested)
        if repo.exists(name):
            return ThemeChoice(name)
        return ThemeChoice(None, "theme_missing", requested)
    if remembered:
        try:
            name = validate_theme_name(remembered)
        except InvalidThemeName:
            name = ""
        if name and repo.exists(name):
            return ThemeChoice(name)
    if not repo.names():
        return ThemeChoice(None, "no_themes_at_all")
    return ThemeChoice(None, "no_theme")
