"""The RAG Manager's sidebar: the theme being managed, a new theme, the logout."""

from __future__ import annotations

import streamlit as st

from admin_pages._login import oidc_logged_in
from admin_pages._shared import Tr, act, flash
from manager.operations import theme_summaries
from manager.theme_selection import selected_theme, theme_label
from themes.theme import Theme, ThemeRepository

_NEXT_THEME = "theme_select_next"  # the theme to select on the next run


def sidebar(t: Tr, lang: str, repo: ThemeRepository) -> Theme | None:
    """Draw the sidebar; the theme the admin manages, or None when there is none."""
    with st.sidebar:
        summaries = {s.name: s for s in theme_summaries(repo)}
        st.header(t("themes"))
        # Chosen before the selectbox exists: setting a widget's key after drawing it
        # raises StreamlitAPIException (seen when a theme was created, finding 3).
        selected = selected_theme(
            list(summaries),
            st.session_state.get("theme_select"),
            st.session_state.pop(_NEXT_THEME, None),
        )
        if selected is not None:
            st.session_state["theme_select"] = selected
            selected = st.selectbox(
                t("themes"),
                list(summaries),
                key="theme_select",
                label_visibility="collapsed",
                format_func=lambda n: theme_label(n, summaries[n].title),
            )
            # Counts as text, not in the option labels: a keyed selectbox keeps old labels.
            for summary in summaries.values():
                st.caption(
                    t(
                        "theme_option",
                        name=summary.name,
                        documents=summary.documents,
                        chunks=summary.chunks,
                    )
                )
        _create_theme_form(t, lang, repo, expanded=not summaries)
        st.divider()
        if st.button(t("logout"), key="logout"):
            st.session_state["admin"].close()
            if oidc_logged_in():
                st.logout()
            st.rerun()
    if selected is None:
        return None
    name = selected
    return act(t, lang, lambda: repo.get(name))


def _create_theme_form(t: Tr, lang: str, repo: ThemeRepository, *, expanded: bool) -> None:
    with st.expander(t("create_theme"), expanded=expanded), st.form("create_theme"):
        name = st.text_input(t("theme_name"), key="new_theme_name")
        title = st.text_input(t("title"), key="new_theme_title")
        language = st.selectbox(t("answer_language"), ["fr", "en"], key="new_theme_lang")
        description = st.text_area(t("description"), key="new_theme_description")
        if st.form_submit_button(t("create")):
            created = act(
                t,
                lang,
                lambda: repo.create(
                    name.strip(),
                    title=title.strip(),
                    description=description.strip(),
                    language=language,  # type: ignore[arg-type]
                ),
            )
            if created is not None:
                st.session_state[_NEXT_THEME] = created.name
                flash("success", t("created", name=created.name))
                st.rerun()
