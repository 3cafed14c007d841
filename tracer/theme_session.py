"""Opening a theme on the chat page: the models, the published index, this session's engine.

The engine is stateless: the index is loaded once per process and published version and
handed to ``ReActEngine.start`` whenever this session's context changes.
"""

from __future__ import annotations

import logging

import streamlit as st

from config.settings import AppConfig
from engine.engine import ReActEngine
from engine.transport import redact
from models.app_settings import AppSettingsManager, get_app_settings
from themes.index_storage import IndexCorrupted, IndexVersion, VersionGone
from themes.theme import Theme, ThemeRepository
from tracer.engine_context import EngineContext, needs_restart
from tracer.ui_text import text

logger = logging.getLogger("chatitego.page")


@st.cache_resource(max_entries=16, show_spinner=False)
def load_theme_index(data_dir: str, theme_name: str, version: str | None) -> IndexVersion:
    """One read-only copy per process and published version (a new version: a new entry)."""
    storage = ThemeRepository(data_dir).get(theme_name).storage
    return storage.load_version(version) if version else storage.load_current()


def current_theme_index(data_dir: str, theme: Theme) -> IndexVersion:
    """The published version; asked again when another process publishes meanwhile."""
    for _ in range(3):
        version = theme.storage.current_version_name()
        try:
            return load_theme_index(data_dir, theme.name, version)
        except VersionGone:  # the database keeps the published version only
            continue
    return theme.storage.load_current()


def ensure_models(config: AppConfig, lang: str) -> bool:
    """Load the models once per process; False (after saying why) when they cannot load."""
    if get_app_settings().locked:
        return True
    with st.status(text(lang, "loading_models"), expanded=False) as status:
        try:
            AppSettingsManager.load_models(
                config, progress=lambda what, done, total: status.update(label=f"{what}…")
            )
        except Exception as exc:  # noqa: BLE001 - shown to the user as a sentence
            logger.exception("model loading failed")
            status.update(state="error")
            st.error(text(lang, "model_failed", error=redact(str(exc), config.secrets())))
            st.info(text(lang, "model_failed_hint"))
            return False
        status.update(state="complete")
    return True


def engine_for(theme: Theme, index: IndexVersion, lang: str, detail: str) -> ReActEngine:
    """This session's engine, started again only when its context changed."""
    state = st.session_state
    engine = state.get("engine")
    if engine is None:
        engine = state.engine = ReActEngine()
    context = EngineContext(theme.name, index.name, lang, detail)
    if needs_restart(state.get("engine_key"), context):
        engine.start(theme=theme, index=index, language=lang, detail=detail)
        state.engine_key = context
    return engine  # type: ignore[no-any-return]


def open_theme(
    config: AppConfig, theme: Theme, lang: str, detail: str
) -> tuple[IndexVersion, ReActEngine] | None:
    """The theme's published index and this session's engine on it; None after saying why.

    A damaged index (a truncated or altered file, a garbled ``CURRENT``) is the admin's
    to repair: the page names the file and the repair, never shows a traceback, and
    offers no chat box until it is repaired.
    """
    try:
        with st.spinner(text(lang, "loading_index", theme=theme.name)):
            index = current_theme_index(str(config.data_dir), theme)
        if index.name is None:
            st.info(text(lang, "empty_index"))
        return index, engine_for(theme, index, lang, detail)
    except IndexCorrupted as exc:
        logger.warning("index of %s is damaged: %s", theme.name, exc)
        st.error(text(lang, "index_damaged", theme=theme.name, detail=exc.detail))
    except Exception as exc:  # noqa: BLE001 - shown as a sentence, logged in full
        logger.exception("index of %s failed to load", theme.name)
        error = redact(str(exc), config.secrets())
        st.error(text(lang, "index_failed", theme=theme.name, error=error))
    return None
