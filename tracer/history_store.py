"""Where the chat page keeps a conversation across reloads: a bounded, compressed cookie.

A browser keeps about 4 KB per cookie, and the encrypted form of a value is a
third larger than the value, so a stored value holds at most
``COOKIE_VALUE_BUDGET`` characters. The conversation is written compact
(role, text, stop reason, sources without their snippets; no reasoning),
compressed, and bounded: the latest messages are kept first, and
``SavedHistory.dropped`` tells the page how many older ones will not survive
a reload (the session itself keeps them all).

``CookieHistoryStore`` works over any ``MutableMapping[str, str]``: the page
gives it ``EncryptedCookieManager`` (streamlit-cookies-manager-v2), tests a
dict. Cookie names: ``h.<theme>`` (one conversation per theme), ``theme``,
``prefs``.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import zlib
from collections.abc import MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from tracer.conversation import ChatEntry, SourceRef

logger = logging.getLogger(__name__)

COOKIE_VALUE_BUDGET = 2800
_FORMAT = 1  # bumped when the compact form changes; other formats are ignored
_MAX_SOURCES = 5


@dataclass(frozen=True)
class SavedHistory:
    """What a save kept: the newest ``kept`` messages; ``dropped`` older ones are not."""

    kept: int
    dropped: int
    truncated: bool = False  # the newest message itself was cut to fit


class HistoryStore(Protocol):
    """Conversation and preferences persisted for the browser."""

    def load(self, theme: str) -> list[ChatEntry]: ...

    def save(self, theme: str, entries: Sequence[ChatEntry]) -> SavedHistory: ...

    def clear(self, theme: str) -> None: ...

    def get(self, name: str) -> str | None: ...

    def put(self, name: str, value: str) -> None: ...


def _compact(entry: ChatEntry) -> list[Any]:
    sources = [
        [s.file, s.page, round(s.score, 3), s.chunk_id] for s in entry.sources[:_MAX_SOURCES]
    ]
    return [entry.role[0], entry.content, entry.stop_reason or "", sources, entry.id]


def _expand(item: Any) -> ChatEntry | None:
    try:
        role, content, stop, sources, entry_id = item
        return ChatEntry(
            id=str(entry_id),
            role="user" if role == "u" else "assistant",
            content=str(content),
            stop_reason=str(stop) or None,
            sources=[
                SourceRef(file=str(f), page=p, score=float(sc), chunk_id=str(c))
                for f, p, sc, c in sources
            ],
        )
    except (TypeError, ValueError):
        return None


def _pack(items: list[list[Any]]) -> str:
    raw = json.dumps([_FORMAT, items], ensure_ascii=False, separators=(",", ":"))
    return base64.urlsafe_b64encode(zlib.compress(raw.encode("utf-8"), 9)).decode("ascii")


def encode_history(
    entries: Sequence[ChatEntry], budget: int = COOKIE_VALUE_BUDGET
) -> tuple[str, SavedHistory]:
    """The newest messages that fit in ``budget`` characters, and what was kept."""
    items = [_compact(e) for e in entries]
    if not items:
        return _pack([]), SavedHistory(0, 0)
    # Most messages fit: try everything first, then search the largest newest suffix.
    value = _pack(items)
    if len(value) <= budget:
        return value, SavedHistory(len(items), 0)
    low, high = 0, len(items) - 1  # the suffix starting at ``high`` is the candidate
    best: str | None = None
    best_start = len(items)
    while low <= high:
        start = (low + high) // 2
        candidate = _pack(items[start:])
        if len(candidate) <= budget:
            best, best_start, high = candidate, start, start - 1
        else:
            low = start + 1
    if best is not None:
        return best, SavedHistory(len(items) - best_start, best_start)
    # Even the newest message alone is too large: keep its beginning.
    last = list(items[-1])
    text = str(last[1])
    low, high, fitted = 0, len(text), _pack([[*last[:1], "", *last[2:]]])
    while low <= high:
        size = (low + high) // 2
        candidate = _pack([[last[0], text[:size] + "…", *last[2:]]])
        if len(candidate) <= budget:
            fitted, low = candidate, size + 1
        else:
            high = size - 1
    return fitted, SavedHistory(1, len(items) - 1, truncated=True)


def decode_history(value: str | None) -> list[ChatEntry]:
    """Entries from a stored value; anything unreadable gives an empty conversation."""
    if not value:
        return []
    try:
        raw = zlib.decompress(base64.urlsafe_b64decode(value.encode("ascii")))
        version, items = json.loads(raw.decode("utf-8"))
    except (binascii.Error, zlib.error, UnicodeError, ValueError, TypeError):
        logger.warning("stored conversation unreadable; starting a new one")
        return []
    if version != _FORMAT or not isinstance(items, list):
        return []
    return [e for e in (_expand(i) for i in items) if e is not None]


class CookieHistoryStore:
    """``HistoryStore`` over a cookie mapping (encrypted by the mapping itself)."""

    def __init__(self, cookies: MutableMapping[str, str], budget: int = COOKIE_VALUE_BUDGET):
        self.cookies = cookies
        self.budget = budget

    @staticmethod
    def _key(theme: str) -> str:
        return f"h.{theme}"

    def load(self, theme: str) -> list[ChatEntry]:
        return decode_history(self.get(self._key(theme)))

    def save(self, theme: str, entries: Sequence[ChatEntry]) -> SavedHistory:
        value, saved = encode_history(entries, self.budget)
        self.put(self._key(theme), value)
        return saved

    def clear(self, theme: str) -> None:
        if self._key(theme) in self.cookies:
            del self.cookies[self._key(theme)]

    def get(self, name: str) -> str | None:
        try:
            value = self.cookies.get(name)
        except Exception:  # noqa: BLE001 - a broken cookie must not break the page
            logger.warning("cookie %s unreadable", name)
            return None
        return value if isinstance(value, str) else None

    def put(self, name: str, value: str) -> None:
        if self.get(name) != value:
            self.cookies[name] = value
