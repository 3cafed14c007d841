"""Chatitego RAG Manager, the admin's pages over ``themes/``: ``streamlit run rag_manager.py``.

The entry of a multipage app: it does the login, the sidebar (the theme being managed)
and the navigation; each page is a file of ``admin_pages/``. Glue only: the pages read
state, call ``manager`` and ``themes`` (each tested directly) and render. Nothing but the
login is shown until an admin authenticates; with no admin configured the page says how
to configure one. Document and model text is shown with ``st.text``/``st.code``/
``st.dataframe`` (without control or bidi-override characters) or escaped Markdown, never
as HTML; answers go through ``render_answer`` (no image, no HTML).
"""

from __future__ import annotations

import streamlit as st

from admin_pages._login import access_granted
from admin_pages._shared import AdminContext, act, share_context, show_flash
from admin_pages._sidebar import sidebar
from config.settings import get_config
from manager.i18n import texts
from themes.theme import ThemeRepository
from tracer.render import escape_markdown

st.set_page_config(page_title="Chatitego — RAG Manager", page_icon="🗂️", layout="wide")

# (file, title key): the pages in the order of the navigation, Documents opening first.
PAGES = (
    ("admin_pages/documents.py", "tab_documents"),
    ("admin_pages/settings.py", "tab_settings"),
    ("admin_pages/inspect.py", "tab_inspect"),
    ("admin_pages/health.py", "tab_health"),
    ("admin_pages/regression.py", "tab_regression"),
    ("admin_pages/review.py", "tab_review"),
)


def main() -> None:
    lang = st.sidebar.selectbox(
        "Langue / Language",
        ["fr", "en"],
        key="lang",
        format_func=lambda code: {"fr": "Français", "en": "English"}[code],
    )
    t = texts(lang)
    # No navigation before the login: the pages are not even listed.
    if not access_granted(t):
        return
    repo = ThemeRepository(get_config().data_dir)
    theme = sidebar(t, lang, repo)
    st.title(t("page_title"))
    show_flash()
    if theme is None:
        st.info(t("no_theme"))
        return
    version_name = act(t, lang, theme.storage.current_version_name)
    st.caption(
        f"**{escape_markdown(theme.settings.title or theme.name)}** — "
        + t("index_version", version=version_name or "—")
    )
    share_context(AdminContext(t=t, lang=lang, repo=repo, theme=theme))
    pages = [st.Page(path, title=t(title)) for path, title in PAGES]
    st.navigation(pages).run()


main()
