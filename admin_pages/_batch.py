"""Batches of documents on the RAG Manager: a progress bar while one runs, its statuses
table (and the regression check's before/after) on the run after."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd
import streamlit as st

from admin_pages._shared import Tr, act, embed_model
from manager.operations import BatchOutcome
from manager.uploads import progress_fraction
from themes.ingest import IngestProgress
from themes.theme import Theme

STATUS_KEYS = {
    "ingested": "st_ingested",
    "updated": "st_updated",
    "unchanged": "st_unchanged",
    "rejected": "st_rejected",
    "removed": "st_removed",
}


def progress_bar(t: Tr) -> Callable[[IngestProgress], None]:
    bar = st.progress(0.0, text="…")

    def on_progress(event: IngestProgress) -> None:
        if event.stage == "reading":
            label = t("stage_reading", file=event.file_name or "")
        elif event.stage == "chunking":
            label = t("stage_chunking")
        elif event.stage == "embedding":
            label = t("stage_embedding", done=event.chunks_done, total=event.chunks_total)
        else:
            label = t("stage_writing")
        bar.progress(
            progress_fraction(event), text=f"{label} — {event.files_done}/{event.files_total}"
        )

    return on_progress


def run_batch(t: Tr, lang: str, theme: Theme, work: Callable[[Any, Any], BatchOutcome]) -> None:
    """Load the model, run ``work(embed_model, progress)``, keep its outcome for the rerun."""
    embed = embed_model(t)
    outcome = act(t, lang, lambda: work(embed, progress_bar(t)))
    if outcome is not None:
        st.session_state["batch"] = (theme.name, outcome)
        st.rerun()


def show_batch(t: Tr, theme: Theme) -> None:
    stored = st.session_state.get("batch")
    if not stored or stored[0] != theme.name:
        return
    outcome: BatchOutcome = stored[1]
    st.progress(1.0, text="100 %")
    counts = {k: outcome.count(k) for k in STATUS_KEYS}
    (st.warning if counts["rejected"] else st.success)(t("batch_done", **counts))
    # A file indexed with a warning (not valid UTF-8, renamed to a safe name) is the
    # admin's to check: its note shares the column of a refused file's reason.
    noted = sum(1 for f in outcome.files if f.warning and not f.reason)
    if noted:
        st.info(t("batch_warnings", count=noted))
    if outcome.files:
        st.dataframe(
            pd.DataFrame(
                [
                    {
                        t("file"): f.file_name,
                        t("status"): t(STATUS_KEYS[f.status]),
                        t("chunks"): f.chunks,
                        t("reason"): f.reason or f.warning or "",
                    }
                    for f in outcome.files
                ]
            ),
            hide_index=True,
            width="stretch",
        )
    if outcome.regression is not None:
        show_comparison(t, outcome.regression)


def show_comparison(t: Tr, comparison: Any) -> None:
    total = len(comparison.after.results)
    st.info(
        t(
            "regression_before_after",
            k=comparison.after.k,
            before=comparison.before.hits,
            after=comparison.after.hits,
            total=total,
        )
    )
    if comparison.worse:
        st.warning(t("regression_worse", count=len(comparison.regressions)))
        st.dataframe(
            pd.DataFrame(
                [
                    {
                        t("question"): c.question,
                        t("expected_document"): c.expected_document,
                        t("before"): c.before if c.before is not None else t("missed"),
                        t("after"): c.after if c.after is not None else t("missed"),
                    }
                    for c in comparison.regressions
                ]
            ),
            hide_index=True,
        )
