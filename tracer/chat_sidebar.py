"""The chat page's sidebar (theme, language, detail, display, new conversation, export)
and the theme picker shown when no theme is open."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from functools import partial

import streamlit as st

from models.app_settings import AppSettingsManager
from themes.theme import Theme, ThemeRepository
from themes.theme_settings import DETAIL_LEVELS
from tracer.conversation import Conversation
from tracer.render import DisplayMode, escape_markdown
from tracer.ui_text import LANGUAGES, detail_label, display_label, text


def sidebar(
    repo: ThemeRepository, theme: Theme | None, conversation: Conversation | None, lang: str
) -> None:
    """The user's choices; they land in the session state the page reads."""
    state = st.session_state
    with st.sidebar:
        st.header(text(lang, "settings"))
        names = repo.names()
        if theme is not None and names:
            chosen = st.selectbox(
                text(lang, "pick_theme"),
                names,
                index=names.index(theme.name) if theme.name in names else 0,
                format_func=lambda n: repo.get(n).settings.title or n,
            )
            if chosen != theme.name:
                st.query_params["theme"] = chosen
                st.rerun()
        state.lang = st.selectbox(
            text(lang, "language"),
            list(LANGUAGES),
            index=list(LANGUAGES).index(state.lang),
            format_func=LANGUAGES.__getitem__,
        )
        if theme is None or conversation is None:
            return
        default_detail = state.get("detail_pref") or theme.settings.detail
        state.detail_pref = st.selectbox(
            text(lang, "detail"),
            DETAIL_LEVELS,
            index=DETAIL_LEVELS.index(default_detail),
            format_func=lambda d: detail_label(lang, d),
        )
        state.display_mode = st.radio(
            text(lang, "display"),
            list(DisplayMode),
            index=list(DisplayMode).index(state.display_mode),
            format_func=lambda m: display_label(lang, m),
        )
        if st.button(text(lang, "new_conversation"), icon=":material/add_comment:"):
            conversation.entries.clear()
            state.pending_reset = True
        if conversation.entries:
            export_buttons(theme, conversation, lang)
        describe = AppSettingsManager.describe()
        if describe.get("llm"):
            st.caption(text(lang, "model", model=describe["llm"]))


def export_buttons(theme: Theme, conversation: Conversation, lang: str) -> None:
    from tracer.export import conversation_markdown, conversation_pdf

    st.subheader(text(lang, "export"))
    stamp = datetime.now().strftime("%Y%m%d-%H%M")
    entries = list(conversation.entries)  # the state shown now, whatever comes later
    builders: tuple[tuple[str, Callable[..., str | bytes], str, str, str], ...] = (
        ("export_md", conversation_markdown, "md", "text/markdown", "description"),
        ("export_pdf", conversation_pdf, "pdf", "application/pdf", "picture_as_pdf"),
    )
    for column, (label, build, suffix, mime, icon) in zip(st.columns(2), builders, strict=True):
        # Deferred: the file is built when clicked, not on every rerun (a PDF costs ~0.3 s).
        column.download_button(
            text(lang, label),
            partial(build, entries, theme=theme.name, language=lang),
            file_name=f"chatitego-{theme.name}-{stamp}.{suffix}",
            mime=mime,
            icon=f":material/{icon}:",
            on_click="ignore",
        )


def theme_picker(repo: ThemeRepository, lang: str, problem: str, requested: str | None) -> None:
    """Every theme with its description and an "Open" button, after saying why."""
    st.title(text(lang, "title"))
    if problem in ("theme_missing", "theme_invalid"):
        st.error(text(lang, problem, theme=requested or ""))
    names = repo.names()
    if not names:
        st.warning(text(lang, "no_themes_at_all"))
        return
    st.info(text(lang, "no_theme"))
    for name in names:
        settings = repo.get(name).settings
        with st.container(border=True):
            st.markdown(f"**{escape_markdown(settings.title or name)}**")
            if settings.description:
                st.caption(escape_markdown(settings.description))
            if st.button(text(lang, "open_theme"), key=f"open-{name}"):
                st.query_params["theme"] = name
                st.rerun()
