"""How the chat page shows one conversation entry: the reasoning, the answer, why the turn
stopped (with its follow-up buttons), the sources and the thumbs vote."""

from __future__ import annotations

import streamlit as st

from engine.types import StopReason
from themes.feedback import record_feedback
from themes.index_storage import IndexVersion
from themes.theme import Theme
from tracer.conversation import ChatEntry, Conversation, follow_ups
from tracer.feedback_entry import feedback_entry, rating_from_vote, vote_from_rating
from tracer.render import escape_markdown, render_answer, strip_control
from tracer.streamlit_tracer import StreamlitChatTracer
from tracer.ui_text import follow_up_label, stop_text, text


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
    """Why the turn stopped, unless it answered; the last one offers its follow-ups."""
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
            on_click=lambda a=action: st.session_state.update(pending_action=a),
        )


def record_vote(theme: Theme, conversation: Conversation, entry_id: str, lang: str) -> None:
    entry = conversation.find(entry_id)
    vote = st.session_state.get(f"fb-{entry_id}")
    if entry is None or vote is None:
        return
    rating = rating_from_vote(vote)
    entry.rating = rating
    record_feedback(theme.directory, feedback_entry(conversation, entry, rating))
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
    state = st.session_state
    with st.chat_message(entry.role):
        if entry.role == "user":
            st.markdown(escape_markdown(entry.content))
            return
        StreamlitChatTracer.replay(
            st, [r.as_block() for r in entry.reasoning], mode=state.display_mode, language=lang
        )
        st.markdown(render_answer(entry.content))
        show_stop(entry, lang, is_last)
        show_sources(entry, index, lang)
        if entry.stop is not StopReason.WAITING_FOR_USER:
            if f"fb-{entry.id}" not in state and entry.rating is not None:
                state[f"fb-{entry.id}"] = vote_from_rating(entry.rating)
            st.feedback(
                "thumbs",
                key=f"fb-{entry.id}",
                on_change=record_vote,
                args=(theme, conversation, entry.id, lang),
            )
