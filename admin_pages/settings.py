"""Réglages / Settings page: what a theme answers with and how it retrieves."""

from __future__ import annotations

import streamlit as st

from admin_pages._shared import Tr, act, current_context, flash
from manager.mcp_servers import format_servers, parse_servers
from manager.operations import update_settings
from manager.settings_form import SettingsForm, settings_changes
from themes.theme import Theme, ThemeRepository
from themes.theme_settings import DETAIL_LEVELS
from tracer.render import escape_markdown, render_answer


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


def settings_page(t: Tr, lang: str, theme: Theme, repo: ThemeRepository) -> None:
    """The theme's settings form, its system prompt, an MCP connection test, deletion."""
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
        details = list(DETAIL_LEVELS)
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
        form = SettingsForm(
            title=title,
            description=description,
            language=language,
            detail=detail,
            engine_mode=engine_mode,
            enabled_tools=tools,
            wide_k=wide_k,
            top_k=top_k,
            chunk_tokens=chunk_tokens,
            chunk_overlap=overlap,
            compression=compression,
            compression_threshold=threshold,
            llm_extraction=llm_extraction,
            translate_queries=translate,
            search_first=search_first,
        )
        changes = settings_changes(form, r.chunk_tokens, r.chunk_overlap)
        save = lambda: update_settings(  # noqa: E731 - one call, as the other actions
            theme, {**changes.values, "mcp_servers": parse_servers(mcp)}, prompt
        )
        if act(t, lang, save) is not None:
            flash("success", t("saved"))
            if changes.chunking_changed:
                flash("info", t("reindex_hint"))
            st.rerun()

    with st.expander(t("danger")):
        confirm = st.text_input(t("confirm_name", name=theme.name), key=f"confirm_{theme.name}")
        if st.button(t("delete_theme"), disabled=confirm != theme.name, type="primary"):
            deleted = act(t, lang, lambda: _delete_theme(repo, theme.name))
            if deleted:
                flash("success", t("theme_deleted", name=theme.name))
                st.session_state.pop("theme_select", None)
                st.rerun()


def _delete_theme(repo: ThemeRepository, name: str) -> bool:
    repo.delete(name)
    return True


_context = current_context()
settings_page(_context.t, _context.lang, _context.theme, _context.repo)
