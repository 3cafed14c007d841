"""Issue 11, the chat page (AppTest, ScriptedLLM, real MiniLM): untrusted input and output,
the real cookie path (the cookie component's answer is faked), secrets.

The real-browser counterparts (the flag a payload would set, a tracker's request count,
the Cookie header's size) are in tests/e2e/test_hardening_chat_browser.py.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt
from streamlit.testing.v1 import AppTest

from config.settings import get_config
from engine.tools.theme_rag import SEARCH_TOOL_NAME
from models.app_settings import AppSettingsManager
from tests.e2e.payloads import FILE_NAME_PAYLOADS, payloads
from tests.fakes import ScriptedLLM
from tests.test_chat_page import PAGE, QUESTION, SEARCH, markdown_text, open_page
from tests.test_engine_corpus import act
from tests.test_theme_rag import make_theme, minilm  # noqa: F401 - fixture
from themes.theme import ThemeRepository
from tracer.browser_cookies import BrowserCookies, SealedCookies
from tracer.cookie_cipher import CookieCipher
from tracer.history_store import CookieHistoryStore

TRACKER = "http://127.0.0.1:9"  # never contacted: these tests read the page's Markdown
ANSWER = "Thought: The policy says it.\nAnswer: Up to **two days** per week."
COOKIE_PASSWORD = "hardening-cookie-password"
API_KEY = "sk-hardening-0123456789abcdef"


@pytest.fixture
def llm(minilm: Any) -> Iterator[ScriptedLLM]:  # noqa: F811
    scripted = ScriptedLLM(chunk_size=9)
    AppSettingsManager.reset_for_tests()
    AppSettingsManager.load_models(
        llm_loader=lambda config, progress: scripted, embed_loader=lambda config: minilm
    )
    yield scripted
    AppSettingsManager.reset_for_tests()


@pytest.fixture
def theme(_isolated_data_dir: Path, minilm: Any) -> Any:  # noqa: F811
    return make_theme(_isolated_data_dir, minilm)


def live_tokens(markdown: str, *, links: bool = True) -> list[str]:
    """What a browser would fetch or run in ``markdown`` (CommonMark + GFM tables), and
    its links unless ``links`` is False (an answer may link; a javascript: link never
    becomes one for markdown-it, the browser tests check the DOM for those)."""
    found: list[str] = []
    stack = list(MarkdownIt("commonmark").enable(["table", "strikethrough"]).parse(markdown))
    while stack:
        token = stack.pop()
        if token.type in ("image", "html_inline", "html_block"):
            found.append(token.type)
        if token.type == "link_open" and links:
            found.append(f"link {token.attrGet('href')}")
        stack.extend(token.children or ())
    return found


def every_markdown(at: AppTest) -> list[str]:
    """Every piece of the page that Streamlit renders as Markdown, labels included."""
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption]
    alerts = ("error", "warning", "info", "success")
    parts += [getattr(e, "value", "") for k in alerts for e in at.get(k)]
    parts += [e.label for e in at.expander] + [t.value for t in at.title]
    return [str(p) for p in parts]


def files_under(root: Path) -> set[Path]:
    return {p for p in root.rglob("*")} if root.exists() else set()


# --- ?theme= (issue 11 finding 8, and the traversal table) ----------------------------------
THEME_VALUES = {
    **{f"payload_{k}": v for k, v in payloads(TRACKER).items()},
    "markdown_link": f"[se connecter]({TRACKER}/login)",
    "dot_dot": "../x",
    "encoded_dot_dot": "..%2F..%2Fetc",
    "absolute": "/etc/passwd",
    "windows_absolute": "C:\\Windows\\system32",
    "device_upper": "CON",
    # Windows device names are refused in any case (themes.names), so they never name a folder.
    "device_lower_nul": "nul",
    "device_lower_con": "con",
    "device_lower_aux": "aux",
    "nul_byte": "a\x00b",
    "newline": "hr\nx",
    "rtl_override": "\u202ehr",
    "three_hundred_chars": "a" * 300,
    "upper_case": "HR",
}


@pytest.mark.parametrize("value", list(THEME_VALUES.values()), ids=list(THEME_VALUES))
def test_a_theme_in_the_url_is_refused_and_shown_as_text(
    llm: ScriptedLLM, theme: Any, value: str, _isolated_data_dir: Path
) -> None:
    # Issue 11 finding 8: ?theme=![x](http://host/p.png) fetched an image, and a crafted
    # value showed a working link inside the page's own error box.
    before = files_under(_isolated_data_dir.parent)
    at = open_page({}, theme=value)
    assert not at.exception
    assert any("n'est pas un nom de thème valide" in e.value for e in at.error)
    for part in every_markdown(at):
        assert live_tokens(part) == [], part
    assert not at.chat_input  # no theme opened
    assert files_under(_isolated_data_dir.parent) == before  # nothing written anywhere


@pytest.mark.parametrize("value", ["hr-archive", "compta"])
def test_a_valid_but_unknown_theme_in_the_url_says_so(
    llm: ScriptedLLM, theme: Any, value: str, _isolated_data_dir: Path
) -> None:
    before = files_under(_isolated_data_dir.parent)
    at = open_page({}, theme=value)
    assert any("n'existe pas" in e.value for e in at.error)
    assert files_under(_isolated_data_dir.parent) == before


# --- output: documents, file names, theme titles, answers and tool results ---------------------
def payload_theme(data_dir: Path, embed: Any) -> Any:
    table = payloads(TRACKER)
    corpus = {
        f"doc-{i}": (file_name, 1, f"Remote work is two days per week. {payload}")
        for i, (file_name, payload) in enumerate(
            zip(
                list(FILE_NAME_PAYLOADS.values()) * 4,
                list(table.values()),
                strict=False,
            )
        )
    }
    theme = make_theme(data_dir, embed, corpus, name="payloads")
    theme.settings.title = " ".join(table.values())[:400]
    theme.settings.description = table["md_image"] + " " + table["script_tag"]
    theme.save_settings()
    return theme


def test_payloads_in_documents_titles_answers_and_tool_results_are_text(
    llm: ScriptedLLM,
    minilm: Any,  # noqa: F811
    _isolated_data_dir: Path,
) -> None:
    payload_theme(_isolated_data_dir, minilm)
    table = payloads(TRACKER)
    answer = "Thought: done.\nAnswer: **Réponse** " + "\n\n".join(table.values())
    llm.enqueue(act(SEARCH_TOOL_NAME, json.dumps({"query": "remote work days"})), answer)
    at = open_page({}, theme="payloads")
    at.chat_input[0].set_value("Combien de jours ? " + table["md_image"]).run()
    assert not at.exception
    rendered = every_markdown(at)
    assert any("**Réponse**" in part for part in rendered)  # formatting kept
    for part in rendered:
        assert live_tokens(part, links=False) == [], part
    # Only the answer may hold links (the images it had became links to their address).
    for part in rendered:
        if "**Réponse**" not in part:
            assert live_tokens(part) == [], part
    assert all(not m.allow_html for m in at.markdown)
    assert not any("\x1b" in part or "\u202e" in part for part in rendered)
    # The observation (tool result) in the reasoning panel holds the documents' payloads.
    assert any("Observation" in part and "pwned" in part for part in rendered)
    # The source chunks are shown with st.text (never Markdown).
    assert any("Remote work" in t.value for t in at.text)
    assert not any("\u202e" in t.value or "\x1b" in t.value for t in at.text)


def test_the_picker_shows_payload_titles_as_text(
    llm: ScriptedLLM,
    minilm: Any,  # noqa: F811
    _isolated_data_dir: Path,
) -> None:
    payload_theme(_isolated_data_dir, minilm)
    at = open_page({}, theme=None)
    assert not at.exception
    for part in every_markdown(at):
        assert live_tokens(part) == [], part


# --- the real cookie path (the component's answer faked) --------------------------------------
class FakeCookieComponent:
    """Stands for the cookie component's JavaScript: answers with ``raw`` and records the
    writes it is asked to apply, as the browser would."""

    def __init__(self, raw: str) -> None:
        self.raw = raw
        self.writes: dict[str, Any] = {}

    def __call__(self, *, queue: dict[str, Any], saveOnly: bool, key: str) -> str | None:  # noqa: N803
        self.writes.update(queue)
        return None if saveOnly else self.raw


@pytest.fixture
def cookie_page(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("COOKIE_PASSWORD", COOKIE_PASSWORD)
    get_config.cache_clear()

    def open_with(raw: str) -> tuple[AppTest, FakeCookieComponent]:
        component = FakeCookieComponent(raw)
        monkeypatch.setattr("streamlit_cookies_manager.cookie_manager._component_func", component)
        at = AppTest.from_file(PAGE, default_timeout=120)
        at.query_params["theme"] = "hr"
        return at.run(), component

    yield open_with
    get_config.cache_clear()


@pytest.mark.parametrize("iterations", ["99999999999", "-5", "400000000"])
def test_a_forged_key_parameters_cookie_costs_nothing(
    llm: ScriptedLLM, theme: Any, cookie_page: Any, iterations: str
) -> None:
    # Issue 11 finding 5: 99999999999 -> PanicException and a hung page; -5 ->
    # OverflowError on every load; 400000000 -> 90 s of one core per page load.
    forged = f"chatitego.EncryptedCookieManager.key_params=AAAAAAAAAAAAAAAAAAAAAA==:{iterations}:AA"
    started = time.perf_counter()
    at, component = cookie_page(forged)
    elapsed = time.perf_counter() - started
    assert not at.exception and not at.error
    assert at.chat_input  # the page is usable
    assert elapsed < 10, elapsed  # the page's whole first run, models already loaded
    assert component.writes["chatitego.EncryptedCookieManager.key_params"]["value"] is None


@pytest.mark.parametrize(
    "raw",
    [
        "nameless-cookie-of-another-app",
        "chatitego.h=" + "A" * 3000,
        "chatitego.h=<script>alert(1)</script>; chatitego.prefs=%FF",
        "chatitego.h=" + CookieCipher("another-installation").seal("x"),
        "chatitego.theme=" + CookieCipher(COOKIE_PASSWORD).seal("../../etc"),
    ],
    ids=["nameless", "oversized", "garbage", "foreign_key", "sealed_traversal_theme"],
)
def test_tampered_foreign_or_oversized_cookies_give_a_fresh_conversation(
    llm: ScriptedLLM, theme: Any, cookie_page: Any, raw: str
) -> None:
    at, _ = cookie_page(raw)
    assert not at.exception and not at.error
    assert at.chat_input and QUESTION not in markdown_text(at)


def test_the_conversation_cookie_is_sealed_and_comes_back(
    llm: ScriptedLLM, theme: Any, cookie_page: Any
) -> None:
    llm.enqueue(SEARCH, ANSWER)
    at, component = cookie_page("")
    at.chat_input[0].set_value(QUESTION).run()
    assert not at.exception
    written = {k: v["value"] for k, v in component.writes.items() if v["value"] is not None}
    assert set(written) >= {"chatitego.h", "chatitego.theme", "chatitego.prefs"}
    assert not any(QUESTION in v or "two days" in v for v in written.values())
    # The next visit sends them back: the conversation returns.
    raw = "; ".join(f"{k}={v}" for k, v in written.items())
    reloaded, _ = cookie_page(raw)
    assert QUESTION in markdown_text(reloaded) and "two days" in markdown_text(reloaded)


# --- secrets ---------------------------------------------------------------------------------
def test_secrets_never_reach_the_page_the_cookies_or_the_logs(
    llm: ScriptedLLM,
    theme: Any,
    cookie_page: Any,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("MISTRAL_API_KEY", API_KEY)
    caplog.set_level(logging.DEBUG)
    llm.enqueue(SEARCH, ANSWER)
    at, component = cookie_page("")
    at.chat_input[0].set_value(QUESTION).run()
    page = "\n".join(every_markdown(at) + [t.value for t in at.text])
    cookies = json.dumps(component.writes)
    for secret in (COOKIE_PASSWORD, API_KEY):
        assert secret not in page and secret not in cookies and secret not in caplog.text


def test_a_model_error_quoting_the_key_is_shown_redacted(
    theme: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("MISTRAL_API_KEY", API_KEY)
    get_config.cache_clear()
    AppSettingsManager.reset_for_tests()

    def failing(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"401 Unauthorized for key {API_KEY}")

    monkeypatch.setattr(AppSettingsManager, "load_models", staticmethod(failing))
    at = open_page({})
    assert not at.exception
    shown = "\n".join(e.value for e in at.error)
    assert "401 Unauthorized" in shown and API_KEY not in shown
    AppSettingsManager.reset_for_tests()
    get_config.cache_clear()


def test_the_store_the_page_builds_never_writes_a_plain_value() -> None:
    browser = BrowserCookies("", "chatitego.", {})
    store = CookieHistoryStore(SealedCookies(browser, CookieCipher(COOKIE_PASSWORD)))
    store.put("theme", "hr")
    assert browser["theme"] != "hr" and CookieCipher(COOKIE_PASSWORD).open(browser["theme"]) == "hr"


def test_theme_repository_unchanged_by_the_payload_table(_isolated_data_dir: Path) -> None:
    # The table above is also used as theme names: none is a valid one.
    repo = ThemeRepository(_isolated_data_dir)
    for value in THEME_VALUES.values():
        with pytest.raises(ValueError):
            repo.create(value)
    assert repo.names() == []
