"""Santé / Health page: does the index match the documents, and the repairs."""

from __future__ import annotations

from typing import Any

import streamlit as st

from admin_pages._batch import run_batch
from admin_pages._shared import Tr, act, current_context, flash
from manager.operations import (
    clear_theme_index,
    index_damage,
    repair_batch,
    sync_batch,
    user_message,
)
from themes.ingest import health
from themes.theme import Theme


def health_page(t: Tr, lang: str, theme: Theme) -> None:
    """The index's health, with sync, repair and clear (also for a damaged index)."""
    damage = index_damage(theme)
    report = None
    if damage is not None:
        # Issue 11, finding 1: the page promised « Réparer » / « Vider l'index » for a damaged
        # index, and its tab (now this page) stopped at the error instead of offering them.
        st.error(user_message(damage, lang))
    else:
        report = act(t, lang, lambda: health(theme))
        if report is None:
            return
        _health_summary(t, report)
    c1, c2 = st.columns(2)
    if c1.button(t("sync"), key="health_sync", help=t("sync_help"), disabled=damage is not None):
        run_batch(t, lang, theme, lambda e, p: sync_batch(theme, e, progress=p))
    needs_repair = damage is not None or (report is not None and report.orphan_count > 0)
    if c2.button(t("repair"), key="repair", disabled=not needs_repair):
        run_batch(t, lang, theme, lambda e, p: repair_batch(theme, e, progress=p))
    confirm = st.checkbox(t("confirm_clear"), key=f"confirm_clear_{theme.name}")
    if st.button(t("clear_index"), disabled=not confirm, key="clear_index"):
        version = act(t, lang, lambda: clear_theme_index(theme))
        if version is not None:
            flash("success", t("cleared", version=version))
            st.rerun()


def _health_summary(t: Tr, report: Any) -> None:
    c1, c2, c3, c4 = st.columns(4)
    c1.metric(t("documents"), len(report.files))
    c2.metric(t("chunks"), report.vector_chunks)
    c3.metric(t("orphans"), report.orphan_count)
    c4.metric(t("version"), report.version or "—")
    if report.ok:
        st.success(t("health_ok"))
    if report.stale_files:
        st.warning(t("stale_files", files=", ".join(report.stale_files)))
    if report.unindexed_files:
        st.warning(t("unindexed_files", files=", ".join(report.unindexed_files)))
    if report.orphan_chunks:
        shown = ", ".join(f"{n or '?'} ({c})" for n, c in report.orphan_chunks.items())
        st.warning(t("orphan_docs", files=shown))


_context = current_context()
health_page(_context.t, _context.lang, _context.theme)
