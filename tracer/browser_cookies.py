"""The chat page's cookies in the browser: read, queued writes, sealed values.

The cookie component of streamlit-cookies-manager-v2 (its JavaScript) does the
browser side: rendered with a queue of writes, it applies them to
``document.cookie`` and sends the whole cookie string back. Everything else is
here, because the library's Python side fell short: it parsed the cookie
string with ``name, value = part.split("=", 1)`` (a nameless cookie set by any
other page of the host broke the page for good), compared prefixed names with
unprefixed ones (a deletion was never sent), and took its key derivation
parameters from a cookie (issue 11 finding 5, see ``tracer.cookie_cipher``).

``BrowserCookies`` is a plain mapping over one cookie string and a queue (tests
build it directly); ``sync_browser_cookies`` renders the component for a page
run. ``SealedCookies`` encrypts the values with ``CookieCipher``.
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import unquote

from tracer.cookie_cipher import CookieCipher

COOKIE_DAYS = 365
_QUEUE_KEY = "_cookie_queue"  # session state: writes not yet seen back from the browser
_SYNC_KEY = "CookieManager.sync_cookies"
_SAVE_KEY = "CookieManager.sync_cookies.save"

CookieWrite = dict[str, Any]  # what the component's JavaScript reads: value, expires_at, path


def parse_cookie_header(raw: str) -> dict[str, str]:
    """``document.cookie`` as a mapping; a pair it cannot read is skipped, never fatal."""
    cookies: dict[str, str] = {}
    for part in raw.split(";"):
        name, sep, value = part.strip().partition("=")
        if not sep or not name:
            continue  # a nameless cookie ("=x" or "x"), set by some other page of the host
        try:
            cookies[unquote(name, errors="strict")] = unquote(value, errors="strict")
        except UnicodeDecodeError:
            continue
    return cookies


class BrowserCookies(MutableMapping[str, str]):
    """The cookies named ``prefix + name`` of one cookie string, with queued writes."""

    def __init__(self, raw: str, prefix: str, queue: dict[str, CookieWrite]) -> None:
        self._prefix = prefix
        self._queue = queue
        sent = parse_cookie_header(raw)
        self._cookies = {k[len(prefix) :]: v for k, v in sent.items() if k.startswith(prefix)}
        for name, write in list(queue.items()):  # writes the browser has applied
            if self._cookies.get(name) == write["value"]:
                del queue[name]

    def pending(self) -> dict[str, CookieWrite]:
        """The queued writes, under their full cookie names (what the component applies)."""
        return {self._prefix + name: write for name, write in self._queue.items()}

    def _current(self) -> dict[str, str]:
        current = dict(self._cookies)
        for name, write in self._queue.items():
            if write["value"] is None:
                current.pop(name, None)
            else:
                current[name] = write["value"]
        return current

    def __getitem__(self, name: str) -> str:
        return self._current()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._current())

    def __len__(self) -> int:
        return len(self._current())

    def __setitem__(self, name: str, value: str) -> None:
        expires = datetime.now() + timedelta(days=COOKIE_DAYS)
        self._queue[name] = {"value": value, "expires_at": expires.isoformat(), "path": "/"}

    def __delitem__(self, name: str) -> None:
        if name not in self._current():
            raise KeyError(name)
        self._queue[name] = {"value": None, "path": "/"}


class SealedCookies(MutableMapping[str, str]):
    """Values sealed with ``cipher``; a value that does not open reads as absent."""

    def __init__(self, cookies: MutableMapping[str, str], cipher: CookieCipher) -> None:
        self.cookies = cookies
        self._cipher = cipher

    def __getitem__(self, name: str) -> str:
        value = self._cipher.open(self.cookies[name])
        if value is None:
            raise KeyError(name)
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self.cookies)

    def __len__(self) -> int:
        return len(self.cookies)

    def __setitem__(self, name: str, value: str) -> None:
        self.cookies[name] = self._cipher.seal(value)

    def __delitem__(self, name: str) -> None:
        del self.cookies[name]


def sync_browser_cookies(prefix: str) -> BrowserCookies | None:
    """This run's cookies (rendering the component); None until the browser has answered."""
    import streamlit as st
    from streamlit_cookies_manager.cookie_manager import _component_func

    queue: dict[str, CookieWrite] = st.session_state.setdefault(_QUEUE_KEY, {})
    waiting = {prefix + name: write for name, write in queue.items()}
    raw = _component_func(queue=waiting, saveOnly=False, key=_SYNC_KEY)
    if not isinstance(raw, str):
        return None
    return BrowserCookies(raw, prefix, queue)


def save_browser_cookies(cookies: BrowserCookies) -> None:
    """Send the queued writes to the browser (a second, write-only component)."""
    from streamlit_cookies_manager.cookie_manager import _component_func

    pending = cookies.pending()
    if pending:
        _component_func(queue=pending, saveOnly=True, key=_SAVE_KEY)
