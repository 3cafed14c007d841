"""Documents page: add documents (files or URLs), list them, delete, re-index, sync."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from admin_pages._batch import run_batch, show_batch
from admin_pages._shared import Tr, act, current_context, flash
from config.settings import get_config
from manager.documents import document_rows, human_size
from manager.operations import delete_document, reindex_batch, sync_batch
from manager.upload_ingest import ingest_uploads, renamed_uploads
from manager.uploads import parse_url_lines
from themes.ingest import health
from themes.readers import SUPPORTED_EXTENSIONS
from themes.theme import Theme
from tracer.render import escape_markdown


def documents_page(t: Tr, lang: str, theme: Theme) -> None:
    """The last batch's statuses, the upload form, the documents table and its actions."""
    config = get_config()
    show_batch(t, theme)
    st.subheader(t("add_documents"))
    types = [ext.lstrip(".") for ext in SUPPORTED_EXTENSIONS]
    uploads = st.file_uploader(
        t("files", types=", ".join(types), mb=config.max_upload_mb),
        type=types,
        accept_multiple_files=True,
        key=f"uploads_{theme.name}_{st.session_state.get('upload_round', 0)}",
    )
    urls = st.text_area(t("urls"), key=f"urls_{theme.name}", height=68)
    if st.button(t("ingest"), type="primary", key="ingest"):
        url_list = parse_url_lines(urls)
        if not uploads and not url_list:
            st.warning(t("nothing_to_ingest"))
        else:
            max_bytes = config.max_upload_mb * 2**20
            files = list(uploads or [])
            for original, stored in renamed_uploads(f.name for f in files):
                flash("info", t("renamed", original=original[:80], name=stored))
            st.session_state["upload_round"] = st.session_state.get("upload_round", 0) + 1
            run_batch(
                t,
                lang,
                theme,
                lambda embed, progress: ingest_uploads(
                    theme, files, url_list, embed, max_bytes=max_bytes, progress=progress
                ),
            )

    st.subheader(t("doc_table"))
    version = act(t, lang, theme.load_data)
    report = act(t, lang, lambda: health(theme))
    if version is None or report is None:
        return
    rows = document_rows(theme, version, report)
    if not rows:
        st.info(t("no_documents"))
    else:
        st.dataframe(
            pd.DataFrame(
                [
                    {
                        t("name"): r.name,
                        t("size"): human_size(r.size_bytes),
                        t("pages"): r.pages,
                        t("chunks"): r.chunks,
                        t("hash"): r.short_hash,
                        t("ingested_at"): r.ingested_at or "",
                        t("status"): t(f"ds_{r.status}"),
                    }
                    for r in rows
                ]
            ),
            hide_index=True,
            width="stretch",
        )
        c1, c2 = st.columns([2, 3])
        name = c1.selectbox(t("document"), [r.name for r in rows], key=f"doc_{theme.name}")
        confirm = c2.checkbox(
            t("confirm_delete_doc"),
            key=f"confirm_doc_{theme.name}_{st.session_state.get('delete_round', 0)}",
        )
        c1, c2, c3, c4 = st.columns(4)
        if c1.button(t("delete_doc"), disabled=not confirm, key="delete_doc"):
            result = act(t, lang, lambda: delete_document(theme, name))
            if result is not None:
                if result.status == "removed":
                    flash("success", t("doc_deleted", name=name, chunks=result.removed_chunks))
                else:
                    flash("warning", escape_markdown(f"{name} : {result.reason}"))
                st.session_state.pop("batch", None)
                # A new key unticks the confirmation (deleting a widget's state does not).
                st.session_state["delete_round"] = st.session_state.get("delete_round", 0) + 1
                st.rerun()
        if c2.button(t("reindex_one"), key="reindex_one"):
            run_batch(t, lang, theme, lambda e, p: reindex_batch(theme, e, [name], progress=p))
        if c3.button(t("reindex_all"), key="reindex_all"):
            run_batch(t, lang, theme, lambda e, p: reindex_batch(theme, e, progress=p))
        if c4.button(t("sync"), key="sync_docs", help=t("sync_help")):
            run_batch(t, lang, theme, lambda e, p: sync_batch(theme, e, progress=p))
    if not rows and st.button(t("sync"), key="sync_empty", help=t("sync_help")):
        run_batch(t, lang, theme, lambda e, p: sync_batch(theme, e, progress=p))


_context = current_context()
documents_page(_context.t, _context.lang, _context.theme)
