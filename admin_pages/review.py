"""Avis / Reviews page: what chat users voted on, to see what the theme answers badly."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from admin_pages._shared import Tr, act, current_context
from manager.documents import chunk_by_id
from themes.theme import Theme
from tracer.render import escape_markdown, render_answer, strip_control


def review_page(t: Tr, lang: str, theme: Theme) -> None:
    """The chat users' votes, newest first, with the answer, sources and reasoning."""
    from themes.feedback import list_feedback

    choice = st.radio(
        t("filter"),
        [0, 1, -1],
        horizontal=True,
        format_func=lambda r: {0: t("all"), 1: "👍", -1: "👎"}[r],
    )
    entries = act(t, lang, lambda: list_feedback(theme.directory, rating=choice or None))
    if not entries:
        st.info(t("no_feedback"))
        return
    version = act(t, lang, theme.load_data)
    for entry in entries[:100]:
        icon = "👍" if entry.is_positive else "👎"
        # The question is the chat user's text: a label renders Markdown (images too).
        label = escape_markdown(f"{entry.created_at} — {entry.question[:90]}")
        with st.expander(f"{icon} {label}"):
            st.markdown(f"**{t('question')}**")
            st.text(strip_control(entry.question))
            st.markdown(f"**{t('answer')}**")
            st.markdown(render_answer(entry.answer))
            if entry.sources:
                st.markdown(f"**{t('sources')}**")
                st.dataframe(
                    pd.DataFrame(
                        [
                            {
                                t("document"): s.file,
                                t("page"): s.page,
                                "score": round(s.score, 4),
                                "chunk": s.chunk_id,
                            }
                            for s in entry.sources
                        ]
                    ),
                    hide_index=True,
                )
            if entry.reasoning:
                st.markdown(f"**{t('reasoning')}**")
                for step in entry.reasoning:
                    st.markdown(f"*{escape_markdown(step.type)}* — {escape_markdown(step.content)}")
            if (
                entry.sources
                and version is not None
                and st.toggle(t("open_chunks"), key=f"open_{entry.id}")
            ):
                for source in entry.sources:
                    chunk = chunk_by_id(version, source.chunk_id) if source.chunk_id else None
                    if chunk is None:
                        st.caption(t("chunk_gone", chunk=source.chunk_id or source.file))
                    else:
                        st.caption(escape_markdown(chunk.node_id))
                        st.text(strip_control(chunk.text))


_context = current_context()
review_page(_context.t, _context.lang, _context.theme)
