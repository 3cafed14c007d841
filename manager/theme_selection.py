"""Which theme the admin page's sidebar selects."""

from __future__ import annotations

from collections.abc import Sequence


def selected_theme(
    names: Sequence[str], current: str | None, just_created: str | None
) -> str | None:
    """A theme created on the previous run first, else the current one while it exists,
    else the first theme; None when there is none."""
    if just_created in names:
        return just_created
    if current in names:
        return current
    return names[0] if names else None


def theme_label(name: str, title: str) -> str:
    """The sidebar's option: the name, and the title when it says something else."""
    return f"{name} — {title}" if title != name else name
