"""What every RAG Manager page shares: the admin's context, actions whose failure becomes a
sentence, and flash messages that survive the rerun after an action."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import streamlit as st

from config.settings import get_config
from engine.transport import redact
from manager.operations import user_message
from themes.theme import Theme, ThemeRepository
from tracer.render import escape_markdown

logger = logging.getLogger("chatitego.rag_manager")
T = TypeVar("T")
Tr = Callable[..., str]

_CONTEXT_KEY = "_admin_page_context"


@dataclass(frozen=True)
class AdminContext:
    """What the entry script (``rag_manager.py``) settled before running a page."""

    t: Tr
    lang: str
    repo: ThemeRepository
    theme: Theme


def share_context(context: AdminContext) -> None:
    """Hand the context to the page ``st.navigation`` runs next, in this session only."""
    st.session_state[_CONTEXT_KEY] = context


def current_context() -> AdminContext:
    """The context the entry script shared on this run (pages run only after it)."""
    return st.session_state[_CONTEXT_KEY]  # type: ignore[no-any-return]


def act(t: Tr, lang: str, action: Callable[[], T]) -> T | None:
    """Run an admin action; an error becomes a sentence on the page (never a traceback)."""
    try:
        return action()
    except Exception as exc:  # noqa: BLE001 - every failure is shown as a sentence
        message = user_message(exc, lang)
        if message is None:
            logger.exception("RAG Manager action failed")
            message = t("unexpected")
            if get_config().mode == "development":
                message += f" ({type(exc).__name__}: {redact(str(exc), get_config().secrets())})"
        # A message may quote what the admin typed or a file name: shown as text.
        st.error(escape_markdown(message))
        return None


def embed_model(t: Tr) -> Any:
    from models.app_settings import AppSettingsManager

    with st.spinner(t("loading_model")):
        return AppSettingsManager.load_embedding(get_config())


def flash(kind: str, message: str) -> None:
    st.session_state.setdefault("flash", []).append((kind, message))


def show_flash() -> None:
    # Always one slot, even empty: the elements after it keep their place, so the page's
    # widgets are not rebuilt (and reset) when a message comes or goes; emptied
    # explicitly, or the browser keeps the last message.
    slot = st.empty()
    messages = st.session_state.pop("flash", [])
    if not messages:
        slot.empty()
        return
    with slot.container():
        for kind, message in messages:
            getattr(st, kind)(message)
