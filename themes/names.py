"""Theme names: the one rule every caller checks before a name touches the file system.

Theme names arrive from URLs, HTML forms and even model output, and each one
becomes a folder name. Only a short lowercase slug is accepted, so a name can
never climb out of the themes folder (``..``, ``/``), hide as a dot-file, clash
on case-insensitive file systems or smuggle control characters; Windows device
names (``con``, ``nul``, ``com1``...) are refused too, since such a folder cannot
be opened, copied or backed up on Windows.
"""

from __future__ import annotations

import re

from themes.errors import ThemesError

THEME_NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,63}$"

# fullmatch, not match: with "$" alone, re.match accepts a trailing "\n".
_THEME_NAME_RE = re.compile(THEME_NAME_PATTERN)

_RULE = (
    "1 to 64 characters: lowercase letters a-z, digits 0-9, '-' and '_', "
    "starting with a letter or a digit"
)


_WINDOWS_DEVICE_NAMES = frozenset(
    {"con", "prn", "aux", "nul"} | {f"com{i}" for i in range(10)} | {f"lpt{i}" for i in range(10)}
)


class InvalidThemeName(ThemesError, ValueError):
    """A theme name that does not follow ``THEME_NAME_PATTERN`` (or is a device name)."""

    def __init__(self, name: object, rule: str = f"a theme name must be {_RULE}") -> None:
        shown = repr(name)
        if len(shown) > 80:
            shown = shown[:77] + "..."
        super().__init__(f"invalid theme name {shown}: {rule}")
        self.name = name


def validate_theme_name(name: object) -> str:
    """Return ``name`` unchanged if it is a valid theme name, else raise ``InvalidThemeName``.

    Nothing is normalised (no lowercasing, no stripping): silently turning
    "Sales " into "sales" would let two spellings address one theme.
    """
    if not isinstance(name, str) or _THEME_NAME_RE.fullmatch(name) is None:
        raise InvalidThemeName(name)
    if name in _WINDOWS_DEVICE_NAMES:
        raise InvalidThemeName(
            name, "a Windows device name (CON, PRN, AUX, NUL, COM0-9, LPT0-9) cannot be a theme"
        )
    return name
