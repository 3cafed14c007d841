"""What a chat engine was started on, so the page starts it again only when that changes."""

from __future__ import annotations

from typing import NamedTuple


class EngineContext(NamedTuple):
    """The engine's context; a new published index version (``index_version``) is a new context."""

    theme: str
    index_version: str | None
    language: str
    detail: str


def needs_restart(previous: EngineContext | None, wanted: EngineContext) -> bool:
    """True when the engine must be started on ``wanted`` (first turn or changed context)."""
    return previous != wanted
