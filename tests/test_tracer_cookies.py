"""The chat page's cookies: one budget for every theme, server-side keys, hostile values."""

from __future__ import annotations

import base64
import os
import time
import zlib

import pytest

from tracer.browser_cookies import BrowserCookies, SealedCookies, parse_cookie_header
from tracer.conversation import Conversation
from tracer.cookie_cipher import CookieCipher
from tracer.history_store import (
    COOKIE_VALUE_BUDGET,
    CookieHistoryStore,
    decode_conversations,
)

PREFIX = "chatitego."
PASSWORD = "test-cookie-password"
HEADER_LINE_LIMIT = 8192  # websockets (under Streamlit's server) answers 431 beyond this
CHROMIUM_COOKIE_LIMIT = 4096  # name + value, per cookie


def conversation(turns: int, size: int = 200) -> Conversation:
    c = Conversation()
    for i in range(turns):
        # Random text: real conversations compress far less than repeated letters.
        c.add_user(f"question {i} " + os.urandom(size // 2).hex())
        c.add_assistant(None, f"réponse {i} " + os.urandom(size // 2).hex(), [])
    return c


def cookie_header(cookies: BrowserCookies) -> str:
    """The Cookie header the browser would send once the queued writes are applied."""
    return "; ".join(f"{PREFIX}{name}={value}" for name, value in cookies.items())


def page_store(
    raw: str = "", queue: dict | None = None
) -> tuple[CookieHistoryStore, BrowserCookies]:  # type: ignore[type-arg]
    """The store exactly as chatitego.py builds it, over a browser cookie string."""
    browser = BrowserCookies(raw, PREFIX, {} if queue is None else queue)
    store = CookieHistoryStore(SealedCookies(browser, CookieCipher(PASSWORD)))
    store.forget_legacy()
    return store, browser


# --- finding 2: one budget across themes ---------------------------------------------------
@pytest.mark.parametrize("themes", [1, 3, 10])
def test_the_cookie_header_stays_bounded_whatever_the_number_of_themes(themes: int) -> None:
    # Issue 11 finding 2: one 2.8 KB cookie per theme; 3 themes passed 8 KB and Streamlit
    # answered the page's stream with 431 (the page stayed on its skeleton).
    store, browser = page_store()
    store.put("theme", "theme-0")
    store.put("prefs", '{"lang":"fr","mode":"everything","detail":"standard"}')
    for i in range(themes):
        store.save(f"theme-{i}", conversation(40).entries)  # each far over the budget
    header = cookie_header(browser)
    assert len(header) <= 4500, len(header)
    assert all(len(PREFIX + n) + len(v) <= CHROMIUM_COOKIE_LIMIT for n, v in browser.items())
    # What is left on the host's 8 KB line for the RAG Manager's and Streamlit's cookies.
    assert HEADER_LINE_LIMIT - len("Cookie: ") - len(header) >= 3500


def test_the_theme_being_saved_comes_first_and_the_oldest_theme_goes_first() -> None:
    store = CookieHistoryStore({})
    old, recent, current = conversation(3), conversation(3), conversation(4)
    store.save("old", old.entries)
    store.save("recent", recent.entries)
    saved = store.save("current", current.entries)  # with "recent": most of the budget
    assert (saved.kept, saved.dropped, saved.themes_cut) == (8, 0, ("old",))
    kept = decode_conversations(store.get("h"))
    assert list(kept)[:2] == ["current", "recent"]
    assert [e.content for e in kept["recent"]] == [e.content for e in recent.entries]
    # "old" keeps at most its newest messages, never its oldest ones.
    old_kept = [e.content for e in kept.get("old", [])]
    assert old_kept == [e.content for e in old.entries][len(old.entries) - len(old_kept) :]
    assert len(old_kept) < len(old.entries)


def test_small_conversations_of_several_themes_all_come_back() -> None:
    store = CookieHistoryStore({})
    conversations = {name: conversation(2, size=40) for name in ("hr", "it", "legal")}
    for name, c in conversations.items():
        assert store.save(name, c.entries).themes_cut == ()
    for name, c in conversations.items():
        assert [e.content for e in store.load(name)] == [e.content for e in c.entries]


def test_a_huge_current_message_is_cut_and_the_other_themes_make_room() -> None:
    store = CookieHistoryStore({})
    store.save("hr", conversation(2).entries)
    huge = Conversation()
    huge.add_user(os.urandom(6000).hex())
    saved = store.save("it", huge.entries)
    assert saved.truncated and saved.themes_cut == ("hr",)
    assert len(store.get("h") or "") <= COOKIE_VALUE_BUDGET


def test_clearing_a_theme_keeps_the_others() -> None:
    store = CookieHistoryStore({})
    store.save("hr", conversation(1).entries)
    store.save("it", conversation(2).entries)
    store.clear("hr")
    assert store.load("hr") == [] and len(store.load("it")) == 4


def test_cookies_of_earlier_versions_are_deleted() -> None:
    raw = (
        "chatitego.EncryptedCookieManager.key_params=AAAA:390000:AAAA; "
        "chatitego.h.hr=" + "x" * 3800 + "; chatitego.h.it=" + "y" * 3800 + "; other=1"
    )
    store, browser = page_store(raw)
    assert store.load("hr") == []
    pending = browser.pending()
    assert {n for n, w in pending.items() if w["value"] is None} == {
        "chatitego.EncryptedCookieManager.key_params",
        "chatitego.h.hr",
        "chatitego.h.it",
    }
    assert "other" not in pending  # another application's cookie is left alone


# --- finding 5: key derivation parameters never come from the browser ----------------------
@pytest.mark.parametrize("iterations", ["99999999999", "-5", "400000000", "2147483648", "x"])
def test_forged_key_parameters_are_never_read(iterations: str) -> None:
    # Issue 11 finding 5: the old library derived its key with the salt and iteration count
    # of this cookie: 99999999999 -> PanicException (hang), -5 -> OverflowError on every
    # load, 400000000 -> 90 s of CPU per page load.
    CookieCipher(PASSWORD)  # the one derivation of this process, from server parameters
    forged = f"chatitego.EncryptedCookieManager.key_params=AAAAAAAAAAAAAAAAAAAAAA==:{iterations}:AA"
    started = time.perf_counter()
    store, browser = page_store(forged)
    store.save("hr", conversation(1).entries)
    assert len(store.load("hr")) == 2
    assert time.perf_counter() - started < 1.0
    assert browser.pending()["chatitego.EncryptedCookieManager.key_params"]["value"] is None


def test_the_key_comes_from_the_password_alone() -> None:
    sealed = CookieCipher(PASSWORD).seal("bonjour")
    assert CookieCipher(PASSWORD).open(sealed) == "bonjour"
    assert CookieCipher("another-installation").open(sealed) is None
    with pytest.raises(ValueError):
        CookieCipher("")


# --- secrets: tampered, foreign, oversized values -------------------------------------------
def _bomb() -> str:
    raw = b'[2,[["hr",[["u","' + b"a" * 5_000_000 + b'","",[],"x"]]]]]'
    return base64.urlsafe_b64encode(zlib.compress(raw, 9)).decode("ascii")


def _hostile_values() -> dict[str, str]:
    sealed = CookieCipher(PASSWORD).seal("irrelevant")
    return {
        "foreign_key": CookieCipher("another-installation").seal("x"),
        "tampered": sealed[:-6] + ("AAAAAA" if not sealed.endswith("AAAAAA") else "BBBBBB"),
        "oversized": "A" * 10_000,
        "not_a_token": "<script>alert(1)</script>",
        "non_ascii": "é" * 50,
        "zip_bomb": CookieCipher(PASSWORD).seal(_bomb()),
        "wrong_json": CookieCipher(PASSWORD).seal(
            base64.urlsafe_b64encode(zlib.compress(b'{"a": 1}')).decode()
        ),
    }


@pytest.mark.parametrize("kind", list(_hostile_values()))
def test_a_hostile_history_cookie_gives_a_fresh_conversation(kind: str) -> None:
    value = _hostile_values()[kind]
    store, _ = page_store(f"chatitego.h={value}")
    assert store.load("hr") == []
    saved = store.save("hr", conversation(1).entries)  # and the next save replaces it
    assert saved.kept == 2 and len(store.load("hr")) == 2


@pytest.mark.parametrize(
    "raw",
    [
        "nameless",  # document.cookie = "nameless" on any page of the host
        "=value",
        "a=%E0%A4%A",  # broken percent-encoding
        "a=%FF",  # not UTF-8
        ";;; ; =;",
        "x" * 20_000,
    ],
)
def test_a_foreign_cookie_string_never_breaks_the_page(raw: str) -> None:
    # The library split every pair with `name, value = part.split("=", 1)`: a nameless
    # cookie of another application raised ValueError on every load.
    store, _ = page_store(raw + "; chatitego.theme=x")
    assert store.load("hr") == [] and store.get("theme") is None


def test_parse_cookie_header_reads_what_it_can() -> None:
    parsed = parse_cookie_header("a=1; nameless; b=x%3Dy; =z; c=%FF; d=")
    assert parsed == {"a": "1", "b": "x=y", "d": ""}


def test_deleting_a_prefixed_cookie_is_sent_to_the_browser() -> None:
    # The library compared "h.hr" with "chatitego.h.hr": its deletions never left.
    browser = BrowserCookies("chatitego.theme=abc; other=1", PREFIX, {})
    del browser["theme"]
    assert browser.pending() == {"chatitego.theme": {"value": None, "path": "/"}}
    assert "theme" not in browser
    with pytest.raises(KeyError):
        del browser["other"]


def test_writes_seen_back_from_the_browser_leave_the_queue() -> None:
    queue: dict = {}  # type: ignore[type-arg]
    BrowserCookies("", PREFIX, queue)["theme"] = "hr"
    assert list(queue) == ["theme"]
    BrowserCookies("chatitego.theme=hr", PREFIX, queue)
    assert queue == {}
