"""Régression / Regression page: questions whose expected document retrieval must find."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from admin_pages._shared import Tr, act, current_context, embed_model
from manager.regression import (
    add_question,
    load_regression,
    record_run,
    remove_question,
    run_questions,
    set_k,
)
from themes.theme import Theme


def regression_page(t: Tr, lang: str, theme: Theme) -> None:
    """The questions with their expected document, hit@k, and a run on demand."""
    st.caption(t("regression_intro"))
    data = act(t, lang, lambda: load_regression(theme))
    if data is None:
        return
    version = act(t, lang, theme.load_data)
    documents = sorted(version.vectors.ref_doc_ids()) if version is not None else []
    last = data.last_run
    ranks = {r.question_id: r.rank for r in last.results} if last else {}
    if last is not None and last.results:
        st.metric(
            t("hit_at_k", k=last.k, hits=last.hits, total=len(last.results), rate=last.hit_rate),
            f"{last.hit_rate:.0%}",
        )
    if not data.questions:
        st.info(t("no_questions"))
    else:
        st.dataframe(
            pd.DataFrame(
                [
                    {
                        t("question"): q.question,
                        t("expected_document"): q.expected_document,
                        t("last_rank"): ("" if q.id not in ranks else (ranks[q.id] or t("missed"))),
                    }
                    for q in data.questions
                ]
            ),
            hide_index=True,
            width="stretch",
        )
        c1, c2 = st.columns([3, 1])
        by_id = {q.id: q.question for q in data.questions}
        chosen = c1.selectbox(t("question"), list(by_id), format_func=lambda i: by_id[i])
        if c2.button(t("delete_question")):
            act(t, lang, lambda: remove_question(theme, chosen))
            st.rerun()
    with st.form(f"regression_{theme.name}"):
        question = st.text_input(t("question"), key="regression_question")
        expected = st.selectbox(t("expected_document"), documents, key="regression_document")
        if st.form_submit_button(t("add_question")):
            added = act(t, lang, lambda: add_question(theme, question, expected or ""))
            if added is not None:
                st.rerun()
    c1, c2 = st.columns([1, 3])
    k = c1.number_input(t("k"), 1, 50, data.k)
    if int(k) != data.k:
        act(t, lang, lambda: set_k(theme, int(k)))
    if data.questions and version is not None and c2.button(t("run_now"), type="primary"):
        embed = embed_model(t)
        run = act(
            t,
            lang,
            lambda: run_questions(
                version, embed, theme.settings.retrieval, data.questions, int(k), label="manual"
            ),
        )
        if run is not None:
            record_run(theme, run)
            st.rerun()
    if len(data.runs) > 1:
        with st.expander(t("runs_history")):
            st.dataframe(
                pd.DataFrame(
                    [
                        {
                            "date": r.ran_at,
                            t("version"): r.version,
                            "": r.label,
                            "hit@k": f"{r.hits}/{len(r.results)}",
                        }
                        for r in reversed(data.runs)
                    ]
                ),
                hide_index=True,
            )


_context = current_context()
regression_page(_context.t, _context.lang, _context.theme)
