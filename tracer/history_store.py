"""Where the chat page keeps conversations across reloads: one bounded, compressed cookie.

Every cookie of a host goes back to it in one ``Cookie`` header, and Streamlit
answers a header line over 8 KB with 431: the page then stays on its skeleton
(issue 11 finding 2: one 2.8 KB cookie per theme passed it with 3 themes). So
all themes share one cookie, ``h``, and one budget, ``COOKIE_VALUE_BUDGET``
characters before encryption (a sealed value is a third larger, and a browser
keeps about 4 KB per cookie). The chat page's cookies then stay near 4.3 KB in
all, whatever the number of themes, leaving room for the RAG Manager's and
Streamlit's own on the same host.

The conversation being saved comes first (its newest messages; the newest one
cut if even it alone is too large), then the other themes, the most recently
used first, each whole or its newest messages; the least recently used ones are
dropped first. A conversation is written compact (role, text, stop reason,
sources without their snippets; no reasoning) and compressed.
``SavedHistory`` tells the page what will not survive a reload (the session
itself keeps everything).

``CookieHistoryStore`` works over any ``MutableMapping[str, str]``: the page
gives it ``SealedCookies`` (``tracer.browser_cookies``), tests a dict. Cookie
names: ``h`` (conversations), ``theme``, ``prefs``.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import zlib
from collections.abc import MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from tracer.conversation import ChatEntry, SourceRef

logger = logging.getLogger(__name__)

COOKIE_VALUE_BUDGET = 2800  # characters of the packed value, all themes together
HISTORY_COOKIE = "h"
LEGACY_COOKIES = ("EncryptedCookieManager.key_params", "h.")  # written by earlier versions
_FORMAT = 2  # bumped when the compact form changes; other formats are ignored
_MAX_SOURCES = 5
_MAX_UNPACKED = 256 * 1024  # a packed value never inflates beyond this (zip bomb guard)

Items = list[list[Any]]


@dataclass(frozen=True)
class SavedHistory:
    """What a save kept of the theme saved: its newest ``kept`` messages; ``dropped``
    older ones are not kept; ``themes_cut``: the other themes not kept whole."""

    kept: int
    dropped: int
    truncated: bool = False  # the newest message itself was cut to fit
    themes_cut: tuple[str, ...] = field(default=())


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


def _pack(themes: Sequence[tuple[str, Items]]) -> str:
    body = [[name, items] for name, items in themes]
    raw = json.dumps([_FORMAT, body], ensure_ascii=False, separators=(",", ":"))
    return base64.urlsafe_b64encode(zlib.compress(raw.encode("utf-8"), 9)).decode("ascii")


def _unpack(value: str | None) -> list[tuple[str, Items]]:
    """The themes of a packed value, most recently used first; unreadable: none."""
    if not value:
        return []
    try:
        inflater = zlib.decompressobj()
        raw = inflater.decompress(base64.urlsafe_b64decode(value.encode("ascii")), _MAX_UNPACKED)
        if inflater.unconsumed_tail:
            raise ValueError("inflates beyond the limit")
        version, body = json.loads(raw.decode("utf-8"))
        if version != _FORMAT:
            return []
        return [(str(name), list(items)) for name, items in body if isinstance(items, list)]
    except (binascii.Error, zlib.error, UnicodeError, ValueError, TypeError):
        logger.warning("stored conversations unreadable; starting new ones")
        return []


def _largest_suffix(
    kept: list[tuple[str, Items]], theme: str, items: Items, budget: int
) -> tuple[str | None, int]:
    """The packed value with ``kept`` plus the newest messages of ``items`` that fit, and
    where that suffix starts (``len(items)`` when not even the newest one fits)."""
    value = _pack([*kept, (theme, items)])
    if len(value) <= budget:
        return value, 0
    best: str | None = None
    best_start = len(items)
    low, high = 1, len(items) - 1  # the suffix starting at ``start`` is the candidate
    while low <= high:
        start = (low + high) // 2
        candidate = _pack([*kept, (theme, items[start:])])
        if len(candidate) <= budget:
            best, best_start, high = candidate, start, start - 1
        else:
            low = start + 1
    return best, best_start


def _cut_newest(theme: str, item: list[Any], budget: int) -> str:
    """One message alone too large: its beginning, as much as fits."""
    text = str(item[1])
    fitted = _pack([(theme, [[item[0], "", *item[2:]]])])
    low, high = 0, len(text)
    while low <= high:
        size = (low + high) // 2
        candidate = _pack([(theme, [[item[0], text[:size] + "…", *item[2:]]])])
        if len(candidate) <= budget:
            fitted, low = candidate, size + 1
        else:
            high = size - 1
    return fitted


def encode_conversations(
    theme: str,
    entries: Sequence[ChatEntry],
    others: Sequence[tuple[str, Items]] = (),
    budget: int = COOKIE_VALUE_BUDGET,
) -> tuple[str, SavedHistory]:
    """``theme``'s newest messages, then ``others`` (most recent first) while they fit."""
    items = [_compact(e) for e in entries]
    value, start = _largest_suffix([], theme, items, budget)
    if value is None:
        value = _cut_newest(theme, items[-1], budget)
        saved = SavedHistory(1, len(items) - 1, truncated=True)
    else:
        saved = SavedHistory(len(items) - start, start)
    kept = [(theme, items[start:])]
    whole: set[str] = set()
    for name, other in others:
        if name == theme or not other or saved.truncated:
            continue
        candidate, other_start = _largest_suffix(kept, name, other, budget)
        if candidate is None:
            break  # the least recently used themes go first: the older ones neither
        value = candidate
        kept.append((name, other[other_start:]))
        if other_start:
            break  # the budget is spent
        whole.add(name)
    not_whole = tuple(n for n, other in others if other and n != theme and n not in whole)
    return value, SavedHistory(saved.kept, saved.dropped, saved.truncated, not_whole)


def encode_history(
    entries: Sequence[ChatEntry], budget: int = COOKIE_VALUE_BUDGET
) -> tuple[str, SavedHistory]:
    """One conversation alone (the theme name is not part of the result's use)."""
    return encode_conversations("", entries, (), budget)


def decode_conversations(value: str | None) -> dict[str, list[ChatEntry]]:
    """Each theme's entries from a stored value; anything unreadable gives no conversation."""
    return {
        name: [e for e in (_expand(i) for i in items) if e is not None]
        for name, items in _unpack(value)
    }


def decode_history(value: str | None) -> list[ChatEntry]:
    """The entries of a value made by ``encode_history``."""
    return decode_conversations(value).get("", [])


class CookieHistoryStore:
    """``HistoryStore`` over a cookie mapping (encrypted by the mapping itself)."""

    def __init__(self, cookies: MutableMapping[str, str], budget: int = COOKIE_VALUE_BUDGET):
        self.cookies = cookies
        self.budget = budget

    def _themes(self) -> list[tuple[str, Items]]:
        return _unpack(self.get(HISTORY_COOKIE))

    def load(self, theme: str) -> list[ChatEntry]:
        return decode_conversations(self.get(HISTORY_COOKIE)).get(theme, [])

    def save(self, theme: str, entries: Sequence[ChatEntry]) -> SavedHistory:
        value, saved = encode_conversations(theme, entries, self._themes(), self.budget)
        self.put(HISTORY_COOKIE, value)
        return saved

    def clear(self, theme: str) -> None:
        themes = self._themes()
        if any(name == theme for name, _ in themes):
            self.put(HISTORY_COOKIE, _pack([(n, i) for n, i in themes if n != theme]))

    def forget_legacy(self) -> None:
        """Delete the cookies of earlier versions (one per theme, key parameters): they
        can no longer be read, and they count in the header that Streamlit limits."""
        for name in [n for n in self.cookies if n.startswith(LEGACY_COOKIES)]:
            del self.cookies[name]

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
