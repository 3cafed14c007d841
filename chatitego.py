"""Chatitego chat page (Streamlit): ask a theme's documents, watch the reasoning, get sources.

Glue only (the logic lives in ``tracer/`` and ``engine/``, tested there). The
engine is stateless: this page keeps the theme's index (loaded once per
process and version), the conversation (session, plus an encrypted cookie
across reloads) and the user's choices, and hands them to ``ReActEngine``
before every prompt (``start``, ``set_history``, ``stream``).

Tests replace the cookie by putting a ``HistoryStore`` in
``st.session_state["_history_store"]`` before the first run.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from datetime import datetime
from functools import partial

import streamlit as st
from streamlit.runtime.scriptrunner_utils.exceptions import RerunException

from config.settings import AppConfig, get_config
from engine.engine import ReActEngine
from engine.transport import redact
from engine.types import StopReason
from models.app_settings import AppSettingsManager, get_app_settings
from themes.feedback import FeedbackEntry, FeedbackStep, record_feedback
from themes.index_storage import IndexCorrupted, IndexVersion, VersionGone
from themes.theme import Theme, ThemeRepository
from tracer.browser_cookies import SealedCookies, save_browser_cookies, sync_browser_cookies
from tracer.conversation import ChatEntry, Conversation, FollowUp, follow_up_prompt, follow_ups
from tracer.cookie_cipher import CookieCipher
from tracer.cookie_secret import cookie_password
from tracer.history_store import CookieHistoryStore, HistoryStore
from tracer.render import DisplayMode, escape_markdown, render_answer, strip_control
from tracer.streamlit_tracer import StreamlitChatTracer
from tracer.theme_choice import choose_theme
from tracer.ui_text import (
    LANGUAGES,
    detail_label,
    display_label,
    follow_up_label,
    stop_text,
    text,
)

logger = logging.getLogger("chatitego.page")
S = st.session_state
DETAILS = ("concise", "standard", "detailed")
COOKIE_PREFIX = "chatitego."
MAX_TURN_RESUMES = 3  # a turn interrupted by more reruns than this ends as cancelled

st.set_page_config(page_title="Chatitego", page_icon="💬", layout="centered")


# --- state kept across runs ----------------------------------------------------------------
def history_store(config: AppConfig) -> HistoryStore | None:
    """The cookie-backed store; None while the browser has not sent its cookies yet."""
    injected = S.get("_history_store")
    if injected is not None:
        return injected  # type: ignore[no-any-return]
    cookies = sync_browser_cookies(COOKIE_PREFIX)
    if cookies is None:
        return None
    S["_cookies"] = cookies
    store = CookieHistoryStore(SealedCookies(cookies, CookieCipher(cookie_password(config))))
    store.forget_legacy()
    return store


def save_cookies() -> None:
    cookies = S.get("_cookies")
    if cookies is not None:
        save_browser_cookies(cookies)


def load_prefs(store: HistoryStore, config: AppConfig) -> None:
    if "lang" in S:
        return
    try:
        prefs = json.loads(store.get("prefs") or "{}")
    except ValueError:
        prefs = {}
    S.lang = prefs.get("lang") if prefs.get("lang") in LANGUAGES else config.language
    try:
        S.display_mode = DisplayMode(prefs.get("mode", "everything"))
    except ValueError:
        S.display_mode = DisplayMode.EVERYTHING
    S.detail_pref = prefs.get("detail") if prefs.get("detail") in DETAILS else None


def save_prefs(store: HistoryStore) -> None:
    prefs = {"lang": S.lang, "mode": S.display_mode.value, "detail": S.get("detail_pref")}
    store.put("prefs", json.dumps(prefs, separators=(",", ":")))


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
    engine = S.get("engine")
    if engine is None:
        engine = S.engine = ReActEngine()
    key = (theme.name, index.name, lang, detail)
    if S.get("engine_key") != key:
        engine.start(theme=theme, index=index, language=lang, detail=detail)
        S.engine_key = key
    return engine  # type: ignore[no-any-return]


def open_theme(
    config: AppConfig, theme: Theme, lang: str
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
        return index, engine_for(theme, index, lang, S.detail_pref or theme.settings.detail)
    except IndexCorrupted as exc:
        logger.warning("index of %s is damaged: %s", theme.name, exc)
        st.error(text(lang, "index_damaged", theme=theme.name, detail=exc.detail))
    except Exception as exc:  # noqa: BLE001 - shown as a sentence, logged in full
        logger.exception("index of %s failed to load", theme.name)
        error = redact(str(exc), config.secrets())
        st.error(text(lang, "index_failed", theme=theme.name, error=error))
    return None


def conversation_for(theme: str, store: HistoryStore) -> Conversation:
    conversations: dict[str, Conversation] = S.setdefault("conversations", {})
    if theme not in conversations:
        conversations[theme] = Conversation(entries=store.load(theme))
    return conversations[theme]


def persist(theme: str, conversation: Conversation, store: HistoryStore) -> None:
    saved = store.save(theme, conversation.entries)
    S.dropped = saved.dropped
    S.themes_cut = saved.themes_cut
    store.put("theme", theme)
    save_cookies()


# --- rendering --------------------------------------------------------------------------
def show_sources(entry: ChatEntry, index: IndexVersion, lang: str) -> None:
    if not entry.sources:
        return
    st.caption(f"**{text(lang, 'sources')}**")
    for s in entry.sources:
        page = f" · {text(lang, 'page')} {s.page}" if s.page is not None else ""
        label = f"{escape_markdown(s.file)}{page} · {text(lang, 'score')} {s.score:.2f}"
        with st.expander(label, icon=":material/description:"):
            node = index.vectors.get(s.chunk_id) if s.chunk_id else None
            # Shown as text; control and bidi-override characters would disguise it.
            st.text(strip_control(node.get_content() if node is not None else s.snippet))


def show_stop(entry: ChatEntry, lang: str, is_last: bool) -> None:
    stop = entry.stop
    if stop is StopReason.WAITING_FOR_USER:
        if is_last:
            st.info(text(lang, "ask_user"), icon="❓")
        return
    if stop is None or stop is StopReason.ANSWERED:
        return
    st.warning(stop_text(lang, stop, entry.provider), icon="⚠️")
    if not is_last:
        return
    actions = follow_ups(stop)
    columns = st.columns(len(actions)) if actions else []
    for column, action in zip(columns, actions, strict=True):
        column.button(
            follow_up_label(lang, action),
            key=f"follow-{action.value}-{entry.id}",
            on_click=lambda a=action: S.update(pending_action=a),
        )


def record_vote(theme: Theme, conversation: Conversation, entry_id: str, lang: str) -> None:
    entry = conversation.find(entry_id)
    value = S.get(f"fb-{entry_id}")
    if entry is None or value is None:
        return
    entry.rating = 1 if value == 1 else -1
    record_feedback(
        theme.directory,
        FeedbackEntry(
            id=entry.id,
            rating=entry.rating,  # type: ignore[arg-type]
            question=conversation.question_before(entry.id),
            answer=entry.content,
            stop_reason=entry.stop_reason or "",
            sources=list(entry.sources),
            reasoning=[FeedbackStep(type=r.type, content=r.content) for r in entry.reasoning],
        ),
    )
    st.toast(text(lang, "thanks"), icon="🙏")


def show_entry(
    entry: ChatEntry,
    *,
    theme: Theme,
    conversation: Conversation,
    index: IndexVersion,
    lang: str,
    is_last: bool,
) -> None:
    with st.chat_message(entry.role):
        if entry.role == "user":
            st.markdown(escape_markdown(entry.content))
            return
        StreamlitChatTracer.replay(
            st, [r.as_block() for r in entry.reasoning], mode=S.display_mode, language=lang
        )
        st.markdown(render_answer(entry.content))
        show_stop(entry, lang, is_last)
        show_sources(entry, index, lang)
        if entry.stop is not StopReason.WAITING_FOR_USER:
            if f"fb-{entry.id}" not in S and entry.rating is not None:
                S[f"fb-{entry.id}"] = 1 if entry.rating == 1 else 0
            st.feedback(
                "thumbs",
                key=f"fb-{entry.id}",
                on_change=record_vote,
                args=(theme, conversation, entry.id, lang),
            )


def run_turn(
    prompt: str,
    *,
    shown: str | None,
    engine: ReActEngine,
    conversation: Conversation,
    lang: str,
) -> None:
    """Send ``prompt`` (``shown`` is what the conversation records, when different)."""
    engine.set_history(conversation.engine_history())
    conversation.add_user(shown or prompt)
    with st.chat_message("user"):
        st.markdown(escape_markdown(shown or prompt))
    S.in_flight = True  # a stop from the user ends the script here; the next run notes it
    try:
        with st.chat_message("assistant"):
            tracer = StreamlitChatTracer(st.container(), mode=S.display_mode, language=lang)
            turn = tracer.trace_events(engine.stream_events(prompt))
    except RerunException:
        # Not the user's stop: a rerun came in mid-turn (seen: the cookie component
        # reporting a write just after page load). The stream is closed; ask again on
        # the next run rather than lose the question (bounded, see main()).
        conversation.take_back_last_turn()
        S.in_flight = False
        S.resume_turn = (prompt, shown, S.get("resume_turn", (None, None, 0))[2] + 1)
        raise
    conversation.add_assistant(engine.last_outcome, turn.answer, turn.blocks)
    S.in_flight = False
    S.pop("resume_turn", None)


def note_interrupted_turn(engine: ReActEngine | None, conversation: Conversation) -> None:
    """A turn the user stopped left a question without an answer: record why."""
    if not S.get("in_flight"):
        return
    S.in_flight = False
    if conversation.entries and conversation.entries[-1].role == "user":
        outcome = engine.last_outcome if engine is not None else None
        if outcome is not None and outcome.stop_reason is not StopReason.CANCELLED:
            outcome = None
        conversation.add_assistant(outcome, outcome.answer if outcome else "", [])


# --- sidebar -----------------------------------------------------------------------------
def sidebar(
    repo: ThemeRepository, theme: Theme | None, conversation: Conversation | None, lang: str
) -> None:
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
        S.lang = st.selectbox(
            text(lang, "language"),
            list(LANGUAGES),
            index=list(LANGUAGES).index(S.lang),
            format_func=LANGUAGES.__getitem__,
        )
        if theme is None or conversation is None:
            return
        default_detail = S.get("detail_pref") or theme.settings.detail
        S.detail_pref = st.selectbox(
            text(lang, "detail"),
            DETAILS,
            index=DETAILS.index(default_detail),
            format_func=lambda d: detail_label(lang, d),
        )
        S.display_mode = st.radio(
            text(lang, "display"),
            list(DisplayMode),
            index=list(DisplayMode).index(S.display_mode),
            format_func=lambda m: display_label(lang, m),
        )
        if st.button(text(lang, "new_conversation"), icon=":material/add_comment:"):
            conversation.entries.clear()
            S.pending_reset = True
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


# --- the page ----------------------------------------------------------------------------
def main() -> None:
    config = get_config()
    store = history_store(config)
    if store is None:
        st.caption(text(config.language, "loading_cookies"))
        st.stop()
    load_prefs(store, config)
    repo = ThemeRepository(config.data_dir)
    choice = choose_theme(st.query_params.get("theme"), store.get("theme"), repo)
    if choice.name is None:
        sidebar(repo, None, None, S.lang)
        theme_picker(repo, S.lang, choice.problem or "no_theme", choice.requested)
        save_prefs(store)
        return
    if st.query_params.get("theme") != choice.name:
        st.query_params["theme"] = choice.name
    theme = repo.get(choice.name)
    conversation = conversation_for(theme.name, store)
    sidebar(repo, theme, conversation, S.lang)
    lang = S.lang
    save_prefs(store)
    if S.pop("pending_reset", False):
        store.clear(theme.name)
        S.dropped = 0

    st.title(escape_markdown(theme.settings.title or theme.name))
    if theme.settings.description:
        st.caption(escape_markdown(theme.settings.description))
    if not ensure_models(config, lang):
        return
    opened = open_theme(config, theme, lang)
    if opened is None:
        return
    index, engine = opened
    note_interrupted_turn(engine, conversation)

    for i, entry in enumerate(conversation.entries):
        show_entry(
            entry,
            theme=theme,
            conversation=conversation,
            index=index,
            lang=lang,
            is_last=i == len(conversation.entries) - 1,
        )
    if S.get("dropped"):
        st.caption(text(lang, "older_not_kept", n=S.dropped))
    if S.get("themes_cut"):
        st.caption(text(lang, "other_themes_not_kept", themes=", ".join(S.themes_cut)))

    placeholder = text(
        lang, "reply_placeholder" if conversation.waiting_for_user else "chat_placeholder"
    )
    prompt = st.chat_input(placeholder)
    action: FollowUp | None = S.pop("pending_action", None)
    resume = S.get("resume_turn")
    if prompt and prompt.strip():
        S.pop("resume_turn", None)
        run_turn(prompt.strip(), shown=None, engine=engine, conversation=conversation, lang=lang)
    elif resume is not None and resume[2] <= MAX_TURN_RESUMES:
        run_turn(resume[0], shown=resume[1], engine=engine, conversation=conversation, lang=lang)
    elif resume is not None:  # interrupted again and again: say so, offer to retry
        S.pop("resume_turn", None)
        conversation.add_user(resume[1] or resume[0])
        conversation.add_assistant(None, "", [])
    elif action is FollowUp.RETRY:
        question = conversation.take_back_last_turn()
        if question:
            run_turn(question, shown=None, engine=engine, conversation=conversation, lang=lang)
    elif action is not None:
        instruction = follow_up_prompt(action, lang)
        run_turn(instruction, shown=None, engine=engine, conversation=conversation, lang=lang)
    else:
        persist(theme.name, conversation, store)
        return
    persist(theme.name, conversation, store)
    st.rerun()


try:
    main()
except Exception:  # noqa: BLE001 - never a traceback in the page; Streamlit's own stop/rerun pass
    logger.exception("chat page failed")
    st.error(text(S.get("lang", "fr"), "unexpected", time=time.strftime("%H:%M:%S")))
