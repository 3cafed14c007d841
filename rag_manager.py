"""Chatitego RAG Manager: the admin's page over ``themes/`` (run: ``streamlit run rag_manager.py``).

Glue only: it reads state, calls ``manager`` and ``themes`` (each tested directly) and
renders. Nothing but the login is shown until an admin authenticates; with no admin
configured the page says how to configure one. Document and model text is shown with
``st.text``/``st.code``/``st.dataframe`` (without control or bidi-override characters) or
escaped Markdown, never as HTML; answers go through ``render_answer`` (no image, no HTML).
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd
import streamlit as st

from config.settings import get_config
from engine.transport import redact
from manager.auth import (
    AdminSession,
    InvalidPasswordHash,
    LoginResult,
    LoginThrottle,
    oidc_user_allowed,
)
from manager.documents import chunk_by_id, chunk_page, document_rows, human_size
from manager.i18n import texts
from manager.mcp_servers import format_servers, parse_servers
from manager.operations import (
    BatchOutcome,
    clear_theme_index,
    delete_document,
    index_damage,
    ingest_batch,
    reindex_batch,
    repair_batch,
    sync_batch,
    theme_summaries,
    update_settings,
    user_message,
)
from manager.regression import (
    add_question,
    load_regression,
    record_run,
    remove_question,
    run_questions,
    set_k,
)
from manager.uploads import parse_url_lines, progress_fraction, stage_uploads, stage_urls
from themes.ingest import IngestProgress, health
from themes.readers import SUPPORTED_EXTENSIONS, RejectedFile, safe_file_name
from themes.retrieval import HybridRetriever
from themes.theme import Theme, ThemeRepository
from tracer.render import escape_markdown, render_answer, strip_control

logger = logging.getLogger("chatitego.rag_manager")
T = TypeVar("T")
Tr = Callable[..., str]

st.set_page_config(page_title="Chatitego — RAG Manager", page_icon="🗂️", layout="wide")


# ------------------------------------------------------------------------------ helpers


@st.cache_resource
def _throttle() -> LoginThrottle:
    return LoginThrottle()


def _secret(section: str, key: str | None = None) -> Any:
    """A value of ``.streamlit/secrets.toml``, or None (no file is not an error)."""
    try:
        value: Any = st.secrets.get(section)
        if key is not None:
            value = value.get(key) if hasattr(value, "get") else None
        return value
    except Exception:  # noqa: BLE001 - a missing or broken secrets file means "not set"
        return None


def _client_key() -> str:
    """Who is trying to log in, for the throttle: the connection's address (the same for
    every tab of a browser). Streamlit gives None on loopback: local users share one key."""
    try:
        address = st.context.ip_address
    except Exception:  # noqa: BLE001 - no client context: one shared key
        address = None
    return address if isinstance(address, str) and address else "local"


def _password_hash() -> str | None:
    configured = get_config().admin_password_hash
    if configured is not None and configured.get_secret_value().strip():
        return configured.get_secret_value()
    value = _secret("admin_password_hash")
    return value if isinstance(value, str) and value.strip() else None


def _act(t: Tr, lang: str, action: Callable[[], T]) -> T | None:
    """Run an admin action; an error becomes a sentence on the page (never a traceback)."""
    try:
        return action()
    except Exception as exc:  # noqa: BLE001 - every failure is shown as a sentence
        message = user_message(exc, lang)
        if message is None:
            logger.exception("RAG Manager action failed")
            message = t("unexpected")
            if get_config().mode == "development":
                message += f" ({type(exc).__name__}: {redact(str(exc), get_config().secrets())})"
        # A message may quote what the admin typed or a file name: shown as text.
        st.error(escape_markdown(message))
        return None


def _embed_model(t: Tr) -> Any:
    from models.app_settings import AppSettingsManager

    with st.spinner(t("loading_model")):
        return AppSettingsManager.load_embedding(get_config())


def _flash(kind: str, message: str) -> None:
    st.session_state.setdefault("flash", []).append((kind, message))


def _show_flash() -> None:
    # Always one slot, even empty: the elements after it keep their place, so the tabs are
    # not rebuilt (and reset to the first one) when a message comes or goes; emptied
    # explicitly, or the browser keeps the last message.
    slot = st.empty()
    messages = st.session_state.pop("flash", [])
    if not messages:
        slot.empty()
        return
    with slot.container():
        for kind, message in messages:
            getattr(st, kind)(message)


# ------------------------------------------------------------------------------ access


def _access_granted(t: Tr, lang: str) -> bool:
    """Render the login (or the configuration help) unless a live admin session exists."""
    config = get_config()
    password_hash = _password_hash()
    oidc = _secret("auth") is not None
    session: AdminSession = st.session_state.setdefault("admin", AdminSession())
    now = time.time()
    if session.is_active(now, config.admin_session_minutes):
        session.touch(now)
        return True

    st.title(t("page_title"))
    if password_hash is None and not oidc:
        st.warning(t("not_configured"))
        st.markdown(t("how_to_configure"))
        st.code(".venv/bin/python -m manager hash-password", language="bash")
        st.markdown(t("how_to_configure_after"))
        return False
    if session.expired(now, config.admin_session_minutes):
        session.close()
        st.info(t("expired", minutes=config.admin_session_minutes))

    st.subheader(t("login_title"))
    if oidc and _oidc_login(t, session, now):
        return True
    if password_hash is not None:
        with st.form("login"):
            password = st.text_input(t("password"), type="password")
            submitted = st.form_submit_button(t("login"))
        if submitted:
            try:
                outcome = _throttle().attempt(password, password_hash, client=_client_key())
            except InvalidPasswordHash as exc:
                st.error(t("bad_hash", error=exc))
                return False
            if outcome.result is LoginResult.OK:
                session.open("admin", now)
                st.rerun()
            elif outcome.result is LoginResult.THROTTLED:
                st.error(t("throttled", seconds=int(outcome.retry_after_s) + 1))
            else:
                st.error(t("wrong_password"))
                if outcome.retry_after_s:
                    st.warning(t("throttled", seconds=int(outcome.retry_after_s) + 1))
    return False


def _oidc_logged_in() -> bool:
    # st.user has no "is_logged_in" without an [auth] section (seen: logout crashed with
    # AttributeError, issue 11 finding 6): read it as a mapping key.
    return bool(st.user.get("is_logged_in", False))


def _oidc_login(t: Tr, session: AdminSession, now: float) -> bool:
    user = st.user
    if not _oidc_logged_in():
        if st.button(t("login_oidc")):
            st.login()
        return False
    email = user.get("email")
    allowed = _secret("manager", "admin_emails") or []
    if oidc_user_allowed(email if isinstance(email, str) else None, list(allowed)):
        session.open(str(email), now)
        return True
    st.error(t("oidc_refused", email=email or "?"))
    if st.button(t("logout")):
        st.logout()
    return False


# ------------------------------------------------------------------------------ sidebar

_NEXT_THEME = "theme_select_next"  # the theme to select on the next run


def _sidebar(t: Tr, lang: str, repo: ThemeRepository) -> Theme | None:
    with st.sidebar:
        summaries = {s.name: s for s in theme_summaries(repo)}
        st.header(t("themes"))
        selected: str | None = None
        # A theme created on the previous run: selected before the selectbox exists
        # (setting its key after drawing it raised StreamlitAPIException, finding 3).
        pending = st.session_state.pop(_NEXT_THEME, None)
        if pending in summaries:
            st.session_state["theme_select"] = pending
        if summaries:
            if st.session_state.get("theme_select") not in summaries:
                st.session_state["theme_select"] = next(iter(summaries))
            selected = st.selectbox(
                t("themes"),
                list(summaries),
                key="theme_select",
                label_visibility="collapsed",
                format_func=lambda n: (
                    f"{n} — {summaries[n].title}" if summaries[n].title != n else n
                ),
            )
            # Counts as text, not in the option labels: a keyed selectbox keeps old labels.
            for summary in summaries.values():
                st.caption(
                    t(
                        "theme_option",
                        name=summary.name,
                        documents=summary.documents,
                        chunks=summary.chunks,
                    )
                )
        with st.expander(t("create_theme"), expanded=not summaries), st.form("create_theme"):
            name = st.text_input(t("theme_name"), key="new_theme_name")
            title = st.text_input(t("title"), key="new_theme_title")
            language = st.selectbox(t("answer_language"), ["fr", "en"], key="new_theme_lang")
            description = st.text_area(t("description"), key="new_theme_description")
            if st.form_submit_button(t("create")):
                created = _act(
                    t,
                    lang,
                    lambda: repo.create(
                        name.strip(),
                        title=title.strip(),
                        description=description.strip(),
                        language=language,  # type: ignore[arg-type]
                    ),
                )
                if created is not None:
                    st.session_state[_NEXT_THEME] = created.name
                    _flash("success", t("created", name=created.name))
                    st.rerun()
        st.divider()
        if st.button(t("logout"), key="logout"):
            st.session_state["admin"].close()
            if _oidc_logged_in():
                st.logout()
            st.rerun()
    if selected is None:
        return None
    return _act(t, lang, lambda: repo.get(selected))


# ------------------------------------------------------------------------------ settings


def _mcp_test(t: Tr, theme: Theme) -> None:
    """List a saved MCP server's tools with their descriptions, or say why it cannot."""
    from manager.mcp_servers import check_connection

    st.markdown(f"**{t('mcp_test_title')}**")
    servers = {s.name: s for s in theme.settings.mcp_servers}
    if not servers:
        st.caption(t("mcp_test_none"))
        return
    c1, c2 = st.columns([3, 1])
    name = c1.selectbox(t("mcp_test_server"), list(servers), key=f"mcp_pick_{theme.name}")
    if not c2.button(t("mcp_test_button"), key=f"mcp_test_{theme.name}"):
        return
    with st.spinner(t("mcp_test_button")):
        report = check_connection(servers[name])
    if report.failure is not None:
        st.error(t(f"mcp_fail_{report.failure.value}", name=name, detail=report.detail))
        return
    st.success(t("mcp_test_ok", name=name, count=len(report.tools)))
    for tool in report.tools:
        status = t("mcp_tool_allowed") if tool.allowed else t("mcp_tool_not_allowed")
        if not tool.read_only:
            status = t("mcp_tool_writes")
        # The server's names and descriptions are untrusted: shown as text, never as Markdown.
        st.text(f"• {tool.name} — {status}")
        st.caption(escape_markdown(tool.description or "—"))


def _settings_tab(t: Tr, lang: str, theme: Theme, repo: ThemeRepository) -> None:
    from engine.tools.general import GeneralToolKit

    s = theme.settings
    tool_names = ["*", *sorted(tool.metadata.get_name() for tool in GeneralToolKit().tools())]
    with st.form(f"settings_{theme.name}"):
        title = st.text_input(t("title"), s.title)
        description = st.text_area(t("description"), s.description, height=80)
        c1, c2, c3 = st.columns(3)
        language = c1.selectbox(
            t("answer_language"), ["fr", "en"], index=["fr", "en"].index(s.language)
        )
        details = ["concise", "standard", "detailed"]
        detail = c2.selectbox(t("detail"), details, index=details.index(s.detail))
        engine_mode = c3.selectbox(
            t("engine_mode"), ["react", "chat"], index=["react", "chat"].index(s.engine_mode)
        )
        tools = st.multiselect(
            t("enabled_tools"), tool_names, default=[n for n in s.enabled_tools if n in tool_names]
        )
        mcp = st.text_area(
            t("mcp_servers"), format_servers(s.mcp_servers), height=90, help=t("mcp_help")
        )
        st.markdown(f"**{t('retrieval')}**")
        r = s.retrieval
        c1, c2, c3, c4 = st.columns(4)
        wide_k = c1.number_input(t("wide_k"), 1, 200, r.wide_k)
        top_k = c2.number_input(t("top_k"), 1, 50, r.top_k)
        chunk_tokens = c3.number_input(t("chunk_tokens"), 0, 2048, r.chunk_tokens or 0)
        overlap = c4.number_input(t("chunk_overlap"), 0, 512, r.chunk_overlap)
        c1, c2, c3, c4 = st.columns(4)
        compression = c1.toggle(t("compression"), r.compression)
        threshold = c2.number_input(
            t("compression_threshold"), -1.0, 1.0, r.compression_threshold, 0.05
        )
        llm_extraction = c3.toggle(t("llm_extraction"), r.llm_extraction)
        translate = c4.toggle(t("translate_queries"), r.translate_queries)
        search_first = st.toggle(t("search_first"), r.search_first)
        prompt = st.text_area(t("system_prompt"), theme.system_prompt, height=220)
        history = len(theme.prompt_history())
        if history:
            st.caption(t("prompt_history", count=history))
        submitted = st.form_submit_button(t("save"), type="primary")
    with st.expander(t("preview")):
        st.markdown(render_answer(theme.system_prompt))
    _mcp_test(t, theme)
    if submitted:
        tokens = int(chunk_tokens) or None
        changes = {
            "title": title.strip(),
            "description": description.strip(),
            "language": language,
            "detail": detail,
            "engine_mode": engine_mode,
            "enabled_tools": tools or ["*"],
            "retrieval": {
                "wide_k": int(wide_k),
                "top_k": int(top_k),
                "chunk_tokens": tokens,
                "chunk_overlap": int(overlap),
                "compression": compression,
                "compression_threshold": float(threshold),
                "llm_extraction": llm_extraction,
                "translate_queries": translate,
                "search_first": search_first,
            },
        }
        chunking_changed = (tokens, int(overlap)) != (r.chunk_tokens, r.chunk_overlap)
        save = lambda: update_settings(  # noqa: E731 - one call, as the other actions
            theme, {**changes, "mcp_servers": parse_servers(mcp)}, prompt
        )
        if _act(t, lang, save) is not None:
            _flash("success", t("saved"))
            if chunking_changed:
                _flash("info", t("reindex_hint"))
            st.rerun()

    with st.expander(t("danger")):
        confirm = st.text_input(t("confirm_name", name=theme.name), key=f"confirm_{theme.name}")
        if st.button(t("delete_theme"), disabled=confirm != theme.name, type="primary"):
            deleted = _act(t, lang, lambda: _delete_theme(repo, theme.name))
            if deleted:
                _flash("success", t("theme_deleted", name=theme.name))
                st.session_state.pop("theme_select", None)
                st.rerun()


def _delete_theme(repo: ThemeRepository, name: str) -> bool:
    repo.delete(name)
    return True


# ------------------------------------------------------------------------------ documents

_STATUS_KEYS = {
    "ingested": "st_ingested",
    "updated": "st_updated",
    "unchanged": "st_unchanged",
    "rejected": "st_rejected",
    "removed": "st_removed",
}


def _progress(t: Tr) -> Callable[[IngestProgress], None]:
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


def _run_batch(t: Tr, lang: str, theme: Theme, work: Callable[[Any, Any], BatchOutcome]) -> None:
    """Load the model, run ``work(embed_model, progress)``, keep its outcome for the rerun."""
    embed = _embed_model(t)
    outcome = _act(t, lang, lambda: work(embed, _progress(t)))
    if outcome is not None:
        st.session_state["batch"] = (theme.name, outcome)
        st.rerun()


def _show_batch(t: Tr, theme: Theme) -> None:
    stored = st.session_state.get("batch")
    if not stored or stored[0] != theme.name:
        return
    outcome: BatchOutcome = stored[1]
    st.progress(1.0, text="100 %")
    counts = {k: outcome.count(k) for k in _STATUS_KEYS}
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
                        t("status"): t(_STATUS_KEYS[f.status]),
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
        _show_comparison(t, outcome.regression)


def _renamed_uploads(uploads: list[Any]) -> list[tuple[str, str]]:
    """(uploaded name, stored name) of each upload stored under another name: a path,
    control characters or a reserved name were taken out (unusable names are refused
    with their reason in the statuses table)."""
    renamed = []
    for upload in uploads:
        try:
            stored = safe_file_name(upload.name)
        except RejectedFile:
            continue
        if stored != upload.name:
            renamed.append((upload.name, stored))
    return renamed


def _documents_tab(t: Tr, lang: str, theme: Theme) -> None:
    config = get_config()
    _show_batch(t, theme)
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

            def work(embed: Any, progress: Callable[[IngestProgress], None]) -> BatchOutcome:
                with tempfile.TemporaryDirectory(prefix="chatitego-upload-") as tmp:
                    staged = stage_uploads(uploads or [], Path(tmp) / "files", max_bytes=max_bytes)
                    fetched = stage_urls(url_list, Path(tmp) / "urls", max_bytes=max_bytes)
                    return ingest_batch(
                        theme,
                        staged.paths + fetched.paths,
                        embed,
                        rejected=staged.rejected + fetched.rejected,
                        progress=progress,
                    )

            for original, stored in _renamed_uploads(uploads or []):
                _flash("info", t("renamed", original=original[:80], name=stored))
            st.session_state["upload_round"] = st.session_state.get("upload_round", 0) + 1
            _run_batch(t, lang, theme, work)

    st.subheader(t("doc_table"))
    version = _act(t, lang, theme.load_data)
    report = _act(t, lang, lambda: health(theme))
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
            result = _act(t, lang, lambda: delete_document(theme, name))
            if result is not None:
                if result.status == "removed":
                    _flash("success", t("doc_deleted", name=name, chunks=result.removed_chunks))
                else:
                    _flash("warning", escape_markdown(f"{name} : {result.reason}"))
                st.session_state.pop("batch", None)
                # A new key unticks the confirmation (deleting a widget's state does not).
                st.session_state["delete_round"] = st.session_state.get("delete_round", 0) + 1
                st.rerun()
        if c2.button(t("reindex_one"), key="reindex_one"):
            _run_batch(t, lang, theme, lambda e, p: reindex_batch(theme, e, [name], progress=p))
        if c3.button(t("reindex_all"), key="reindex_all"):
            _run_batch(t, lang, theme, lambda e, p: reindex_batch(theme, e, progress=p))
        if c4.button(t("sync"), key="sync_docs", help=t("sync_help")):
            _run_batch(t, lang, theme, lambda e, p: sync_batch(theme, e, progress=p))
    if not rows and st.button(t("sync"), key="sync_empty", help=t("sync_help")):
        _run_batch(t, lang, theme, lambda e, p: sync_batch(theme, e, progress=p))


# ------------------------------------------------------------------------------ inspect


def _inspect_tab(t: Tr, lang: str, theme: Theme) -> None:
    version = _act(t, lang, theme.load_data)
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
        embed = _embed_model(t)
        result = _act(
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


# ------------------------------------------------------------------------------ health


def _health_tab(t: Tr, lang: str, theme: Theme) -> None:
    damage = index_damage(theme)
    report = None
    if damage is not None:
        # Issue 11, finding 1: the page promised « Réparer » / « Vider l'index » for a damaged
        # index, and the tab stopped at the error instead of offering them.
        st.error(user_message(damage, lang))
    else:
        report = _act(t, lang, lambda: health(theme))
        if report is None:
            return
        _health_summary(t, report)
    c1, c2 = st.columns(2)
    if c1.button(t("sync"), key="health_sync", help=t("sync_help"), disabled=damage is not None):
        _run_batch(t, lang, theme, lambda e, p: sync_batch(theme, e, progress=p))
    needs_repair = damage is not None or (report is not None and report.orphan_count > 0)
    if c2.button(t("repair"), key="repair", disabled=not needs_repair):
        _run_batch(t, lang, theme, lambda e, p: repair_batch(theme, e, progress=p))
    confirm = st.checkbox(t("confirm_clear"), key=f"confirm_clear_{theme.name}")
    if st.button(t("clear_index"), disabled=not confirm, key="clear_index"):
        version = _act(t, lang, lambda: clear_theme_index(theme))
        if version is not None:
            _flash("success", t("cleared", version=version))
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


# ------------------------------------------------------------------------------ regression


def _show_comparison(t: Tr, comparison: Any) -> None:
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


def _regression_tab(t: Tr, lang: str, theme: Theme) -> None:
    st.caption(t("regression_intro"))
    data = _act(t, lang, lambda: load_regression(theme))
    if data is None:
        return
    version = _act(t, lang, theme.load_data)
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
            _act(t, lang, lambda: remove_question(theme, chosen))
            st.rerun()
    with st.form(f"regression_{theme.name}"):
        question = st.text_input(t("question"), key="regression_question")
        expected = st.selectbox(t("expected_document"), documents, key="regression_document")
        if st.form_submit_button(t("add_question")):
            added = _act(t, lang, lambda: add_question(theme, question, expected or ""))
            if added is not None:
                st.rerun()
    c1, c2 = st.columns([1, 3])
    k = c1.number_input(t("k"), 1, 50, data.k)
    if int(k) != data.k:
        _act(t, lang, lambda: set_k(theme, int(k)))
    if data.questions and version is not None and c2.button(t("run_now"), type="primary"):
        embed = _embed_model(t)
        run = _act(
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


# ------------------------------------------------------------------------------ review


def _review_tab(t: Tr, lang: str, theme: Theme) -> None:
    from themes.feedback import list_feedback

    choice = st.radio(
        t("filter"),
        [0, 1, -1],
        horizontal=True,
        format_func=lambda r: {0: t("all"), 1: "👍", -1: "👎"}[r],
    )
    entries = _act(t, lang, lambda: list_feedback(theme.directory, rating=choice or None))
    if not entries:
        st.info(t("no_feedback"))
        return
    version = _act(t, lang, theme.load_data)
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


# ------------------------------------------------------------------------------ page


def main() -> None:
    lang = st.sidebar.selectbox(
        "Langue / Language",
        ["fr", "en"],
        key="lang",
        format_func=lambda code: {"fr": "Français", "en": "English"}[code],
    )
    t = texts(lang)
    if not _access_granted(t, lang):
        return
    repo = ThemeRepository(get_config().data_dir)
    theme = _sidebar(t, lang, repo)
    st.title(t("page_title"))
    _show_flash()
    if theme is None:
        st.info(t("no_theme"))
        return
    version_name = _act(t, lang, theme.storage.current_version_name)
    st.caption(
        f"**{escape_markdown(theme.settings.title or theme.name)}** — "
        + t("index_version", version=version_name or "—")
    )
    tabs = st.tabs(
        [
            t("tab_documents"),
            t("tab_settings"),
            t("tab_inspect"),
            t("tab_health"),
            t("tab_regression"),
            t("tab_review"),
        ]
    )
    with tabs[0]:
        _documents_tab(t, lang, theme)
    with tabs[1]:
        _settings_tab(t, lang, theme, repo)
    with tabs[2]:
        _inspect_tab(t, lang, theme)
    with tabs[3]:
        _health_tab(t, lang, theme)
    with tabs[4]:
        _regression_tab(t, lang, theme)
    with tabs[5]:
        _review_tab(t, lang, theme)


main()
