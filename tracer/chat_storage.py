"""What the chat page keeps across runs and reloads: the encrypted cookie store, the
user's preferences and the conversation of each theme.

Tests replace the cookie by putting a ``HistoryStore`` in
``st.session_state["_history_store"]`` before the first run.
"""

from __future__ import annotations

import streamlit as st

from config.settings import AppConfig
from tracer.browser_cookies import SealedCookies, save_browser_cookies, sync_browser_cookies
from tracer.conversation import Conversation
from tracer.cookie_cipher import CookieCipher
from tracer.cookie_secret import cookie_password
from tracer.history_store import CookieHistoryStore, HistoryStore
from tracer.preferences import ChatPreferences, parse_preferences, serialize_preferences

COOKIE_PREFIX = "chatitego."


def history_store(config: AppConfig) -> HistoryStore | None:
    """The cookie-backed store; None while the browser has not sent its cookies yet."""
    state = st.session_state
    injected = state.get("_history_store")
    if injected is not None:
        return injected  # type: ignore[no-any-return]
    cookies = sync_browser_cookies(COOKIE_PREFIX)
    if cookies is None:
        return None
    state["_cookies"] = cookies
    store = CookieHistoryStore(SealedCookies(cookies, CookieCipher(cookie_password(config))))
    store.forget_legacy()
    return store


def load_preferences(store: HistoryStore, config: AppConfig) -> None:
    """Put the saved preferences in the session, once: later the widgets own them."""
    state = st.session_state
    if "lang" in state:
        return
    preferences = parse_preferences(store.get("prefs"), config.language)
    state.lang = preferences.lang
    state.display_mode = preferences.mode
    state.detail_pref = preferences.detail


def save_preferences(store: HistoryStore) -> None:
    state = st.session_state
    preferences = ChatPreferences(state.lang, state.display_mode, state.get("detail_pref"))
    store.put("prefs", serialize_preferences(preferences))


def conversation_for(theme: str, store: HistoryStore) -> Conversation:
    """This session's conversation on ``theme``, read from the store the first time."""
    conversations: dict[str, Conversation] = st.session_state.setdefault("conversations", {})
    if theme not in conversations:
        conversations[theme] = Conversation(entries=store.load(theme))
    return conversations[theme]


def persist(theme: str, conversation: Conversation, store: HistoryStore) -> None:
    """Save the conversation and the open theme in the cookie; note what did not fit."""
    state = st.session_state
    saved = store.save(theme, conversation.entries)
    state.dropped = saved.dropped
    state.themes_cut = saved.themes_cut
    store.put("theme", theme)
    cookies = state.get("_cookies")
    if cookies is not None:
        save_browser_cookies(cookies)
