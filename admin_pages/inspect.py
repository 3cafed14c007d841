"""Inspecter / Inspect page: what retrieval finds for a question, and the indexed chunks."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from admin_pages._shared import Tr, act, current_context, embed_model
from manager.documents import chunk_page
from themes.retrieval import HybridRetriever
from themes.theme import Theme
from tracer.render import escape_markdown, strip_control


def inspect_page(t: Tr, lang: str, theme: Theme) -> None:
    """A retrieval test without the language model, and the chunks of each document."""
    version = act(t, lang, theme.load_data)
    if version is None:
        return
    st.subheader(t("retrieval_test"))
    st.caption(t("no_llm_note"))
    with st.form(f"retrieval_{theme.name}"):
        question = st.text_input(t("question"), key="retrieval_question")
        c1, c2 = st.columns(2)
        top_k = c1.number_input(t("top_k"), 1, 50, theme.settings.retrieval.top_k)
        compression = c2.toggle(t("compression"), theme.settings.retrieval.compression)
        asked = st.form_submit_button(t("search"))
    if asked and question.strip():
        settings = theme.settings.retrieval.model_copy(
            update={
                "top_k": int(top_k),
                "compression": compression,
                "translate_queries": False,
                "llm_extraction": False,
            }
        )
        embed = embed_model(t)
        result = act(
            t, lang, lambda: HybridRetriever(version, embed, settings).retrieve(question.strip())
        )
        if result is not None:
            st.session_state["retrieval"] = (theme.name, version.name, result)
    stored = st.session_state.get("retrieval")
    # A result of an older index version would show chunks that may be gone: ask again.
    if stored and stored[:2] == (theme.name, version.name):
        _show_retrieval(t, stored[2])

    st.subheader(t("chunk_viewer"))
    names = sorted(version.vectors.ref_doc_ids())
    if not names:
        st.info(t("no_documents"))
        return
    c1, c2 = st.columns([3, 1])
    name = c1.selectbox(t("document"), names, key=f"chunks_doc_{theme.name}")
    page_no = c2.number_input(t("page"), 1, 100_000, 1, key=f"chunks_page_{theme.name}")
    view = chunk_page(version, name, int(page_no))
    st.caption(f"{t('page')} {view.page}/{view.pages} — {view.total} {t('chunks').lower()}")
    for chunk in view.items:
        header = t("chunk_header", position=chunk.position, total=view.total)
        if chunk.page is not None:
            header += " — " + t("chunk_page_info", page=chunk.page)
        with st.expander(header):
            st.text(strip_control(chunk.text))
            # A node id starts with the document's file name: text, not Markdown.
            st.caption(f"{t('metadata')} — {escape_markdown(chunk.node_id)}")
            st.json(dict(chunk.metadata), expanded=False)


def _show_retrieval(t: Tr, result: Any) -> None:
    if not result.items:
        st.info(t("no_result"))
        return
    st.dataframe(
        pd.DataFrame(
            [
                {
                    t("rank"): item.rank,
                    t("document"): item.file_name or "",
                    t("page"): "" if item.page is None else str(item.page),
                    t("vector"): round(item.vector_score, 4),
                    t("keyword"): round(item.keyword_score, 4),
                    t("fused"): round(item.fused_score, 4),
                    t("rerank"): round(item.rerank_score, 4),
                    t("cited_as"): f"[Source {item.rank}: {item.label}]",
                }
                for item in result.items
            ]
        ),
        hide_index=True,
        width="stretch",
    )
    for item in result.items:
        with st.expander(f"{item.rank}\\. {escape_markdown(item.label)}"):
            st.caption(t("kept_text"))
            st.text(strip_control(item.compressed_text))
            st.caption(t("full_text"))
            st.text(strip_control(item.text))
    with st.expander(t("context")):
        st.code(strip_control(result.context_text()), language=None)
    timings = ", ".join(f"{k} {v:.0f}" for k, v in result.timings_ms.items())
    st.caption(t("timings", timings=timings))


_context = current_context()
inspect_page(_context.t, _context.lang, _context.theme)
