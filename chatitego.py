"""Chatitego chat page (Streamlit): ask a theme's documents, watch the reasoning, get sources.

Glue only: the page reads the session, calls ``tracer/`` (what is kept across runs,
opening a theme, rendering, the turn state machine) and ``engine/``, each tested there.
"""

from __future__ import annotations

import logging
import time

import streamlit as st
from streamlit.runtime.scriptrunner_utils.exceptions import RerunException

from config.settings import get_config
from engine.engine import ReActEngine
from engine.types import StopReason
from themes.theme import ThemeRepository
from tracer.chat_sidebar import sidebar, theme_picker
from tracer.chat_storage import (
    conversation_for,
    history_store,
    load_preferences,
    persist,
    save_preferences,
)
from tracer.chat_view import show_entry
from tracer.conversation import Conversation
from tracer.render import escape_markdown
from tracer.streamlit_tracer import StreamlitChatTracer, TracedTurn
from tracer.theme_choice import choose_theme
from tracer.theme_session import ensure_models, open_theme
from tracer.turn_flow import (
    MAX_TURN_RESUMES,
    AskTurn,
    Idle,
    RecordUnanswered,
    interrupted,
    next_step,
    typed_question,
)
from tracer.ui_text import text

logger = logging.getLogger("chatitego.page")
S = st.session_state

st.set_page_config(page_title="Chatitego", page_icon="💬", layout="centered")


def stream_turn(tracer: StreamlitChatTracer, engine: ReActEngine, prompt: str) -> TracedTurn:
    """Stream one turn of the engine into the tracer (the only call that runs the engine)."""
    return tracer.trace_events(engine.stream_events(prompt))


def run_turn(turn: AskTurn, engine: ReActEngine, conversation: Conversation, lang: str) -> None:
    """Send the turn's prompt; the conversation records what the user should see."""
    engine.set_history(conversation.engine_history())
    question = turn.shown or turn.prompt
    conversation.add_user(question)
    with st.chat_message("user"):
        st.markdown(escape_markdown(question))
    S.in_flight = True  # a stop from the user ends the script here; the next run notes it
    try:
        with st.chat_message("assistant"):
            tracer = StreamlitChatTracer(st.container(), mode=S.display_mode, language=lang)
            traced = stream_turn(tracer, engine, turn.prompt)
    except RerunException:
        logger.info("a rerun interrupted a turn; it will be asked again")
        # Not the user's stop: a rerun came in mid-turn. The stream is closed; the next
        # run asks again (see tracer.turn_flow) rather than lose the question.
        conversation.take_back_last_turn()
        S.in_flight = False
        S.pending_turn = interrupted(S.get("pending_turn"), turn)
        raise
    conversation.add_assistant(engine.last_outcome, traced.answer, traced.blocks)
    S.in_flight = False
    S.pop("pending_turn", None)


def note_interrupted_turn(engine: ReActEngine | None, conversation: Conversation) -> None:
    """A turn the user stopped left a question without an answer: record why."""
    if not S.get("in_flight"):
        return
    S.in_flight = False
    logger.warning("the last run ended inside a turn (a stop, not a rerun): recorded as such")
    if conversation.entries and conversation.entries[-1].role == "user":
        outcome = engine.last_outcome if engine is not None else None
        if outcome is not None and outcome.stop_reason is not StopReason.CANCELLED:
            outcome = None
        conversation.add_assistant(outcome, outcome.answer if outcome else "", [])


CHAT_BOX = "chat_box"


def _keep_typed_question() -> None:
    S.pending_turn = typed_question(S.get(CHAT_BOX)) or S.get("pending_turn")


def main() -> None:
    config = get_config()
    store = history_store(config)
    if store is None:
        st.caption(text(config.language, "loading_cookies"))
        st.stop()
    load_preferences(store, config)
    repo = ThemeRepository(config.data_dir)
    choice = choose_theme(st.query_params.get("theme"), store.get("theme"), repo)
    if choice.name is None:
        sidebar(repo, None, None, S.lang)
        theme_picker(repo, S.lang, choice.problem or "no_theme", choice.requested)
        save_preferences(store)
        return
    if st.query_params.get("theme") != choice.name:
        st.query_params["theme"] = choice.name
    theme = repo.get(choice.name)
    conversation = conversation_for(theme.name, store)
    sidebar(repo, theme, conversation, S.lang)
    lang = S.lang
    save_preferences(store)
    if S.pop("pending_reset", False):
        store.clear(theme.name)
        S.dropped = 0

    st.title(escape_markdown(theme.settings.title or theme.name))
    if theme.settings.description:
        st.caption(escape_markdown(theme.settings.description))
    if not ensure_models(config, lang):
        return
    opened = open_theme(config, theme, lang, S.detail_pref or theme.settings.detail)
    if opened is None:
        return
    index, engine = opened
    note_interrupted_turn(engine, conversation)

    for i, entry in enumerate(conversation.entries):
        is_last = i == len(conversation.entries) - 1
        show_entry(
            entry, theme=theme, conversation=conversation, index=index, lang=lang, is_last=is_last
        )
    if S.get("dropped"):
        st.caption(text(lang, "older_not_kept", n=S.dropped))
    if S.get("themes_cut"):
        st.caption(text(lang, "other_themes_not_kept", themes=", ".join(S.themes_cut)))

    placeholder = "reply_placeholder" if conversation.waiting_for_user else "chat_placeholder"
    prompt = st.chat_input(text(lang, placeholder), key=CHAT_BOX, on_submit=_keep_typed_question)
    pending, step = next_step(S.get("pending_turn"), prompt, S.pop("pending_action", None), lang)
    S.pending_turn = pending
    if isinstance(step, AskTurn):
        run_turn(step, engine, conversation, lang)
    elif isinstance(step, RecordUnanswered):  # interrupted again and again: offer a retry
        logger.warning("turn given up after %d interruptions by reruns", MAX_TURN_RESUMES + 1)
        conversation.add_user(step.question)
        conversation.add_assistant(None, "", [])
    elif not isinstance(step, Idle):  # retry: the last question, asked again
        question = conversation.take_back_last_turn()
        if question:
            run_turn(AskTurn(question), engine, conversation, lang)
    persist(theme.name, conversation, store)
    if not isinstance(step, Idle):
        st.rerun()


try:
    main()
except Exception:  # noqa: BLE001 - never a traceback in the page; Streamlit's own stop/rerun pass
    logger.exception("chat page failed")
    st.error(text(S.get("lang", "fr"), "unexpected", time=time.strftime("%H:%M:%S")))
