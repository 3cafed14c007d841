"""The refusals of the readers: what is not ingested or fetched, and why, for the admin."""

from __future__ import annotations

import re
from typing import Any

from themes.errors import ThemesError


class RejectedFile(ThemesError):
    """A file that is not ingested; ``str(exc)`` is "<file name>: <reason>", for the admin."""

    def __init__(self, file_name: str, reason: str) -> None:
        super().__init__(f"{file_name}: {reason}")
        self.file_name = file_name
        self.reason = reason

    def __reduce__(self) -> tuple[Any, ...]:
        # The default pickling would call RejectedFile(message) and fail on the missing reason.
        return (type(self), (self.file_name, self.reason))


class RejectedURL(ThemesError):
    """A URL that is not fetched; ``str(exc)`` is "<url>: <reason>", credentials removed."""

    def __init__(self, url: str, reason: str) -> None:
        self.url = display_url(url)
        self.reason = reason
        super().__init__(f"{self.url}: {reason}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.url, self.reason))


def display_url(url: str) -> str:
    """The URL as shown in messages and logs: no ``user:password@``, at most 200 characters."""
    shown = re.sub(r"//[^/?#@]*@", "//", url, count=1)
    return shown if len(shown) <= 200 else shown[:199] + "…"
