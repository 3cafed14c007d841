"""The root of every error the themes library raises on purpose.

``except ThemesError`` catches them all; each also keeps its conventional base
(``ThemeNotFound`` is a ``LookupError``, ``IndexWriteFailed`` an ``OSError``...), so an
``except`` on that base still works. Standard library only: the PDF child process imports it.
"""

from __future__ import annotations


class ThemesError(Exception):
    """An error raised by the themes library (documents, index, stores, themes)."""
