"""Issue 11 in a real browser, the chat page: payloads stay inert, the Cookie header stays
bounded across themes and beside the RAG Manager, forged key parameters cost nothing.

A payload that fired would set ``window.__pwned`` or make the browser request the
tracker (a loopback HTTP server of the test). Figures are printed as ``FIGURE ...``
lines (run with -s to see them). Screenshots: test-output/screenshots/hardening-chat-*.png.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from engine.tools.theme_rag import SEARCH_TOOL_NAME
from engine.types import StopReason, TurnOutcome
from tests.e2e.payloads import (
    FILE_NAME_PAYLOADS,
    FLAG_IN_ALL_FRAMES,
    LIVE_ELEMENTS,
    click_every_link,
    payloads,
    tracker,
)
from tests.e2e.support import screenshot_path, streamlit_server
from tests.e2e.test_chat_browser import CHAT_INPUT, _wait_ready
from tests.test_engine_corpus import act
from tests.test_theme_rag import make_theme, minilm  # noqa: F401 - fixture
from themes.theme import ThemeRepository
from tracer.browser_cookies import SealedCookies
from tracer.conversation import Conversation
from tracer.cookie_cipher import CookieCipher
from tracer.history_store import CookieHistoryStore

COOKIE_PASSWORD = "e2e-hardening-cookie-key"
HEADER_LINE_LIMIT = 8192  # websockets' default: Streamlit answers 431 beyond it


def _shot(page: Any, name: str) -> None:
    page.screenshot(path=screenshot_path(f"hardening-chat-{name}"), full_page=True)


def _assert_inert(page: Any, seen: Any) -> None:
    page.wait_for_timeout(1500)  # time for a live payload's request to arrive
    assert page.evaluate(FLAG_IN_ALL_FRAMES) == []
    assert page.evaluate(LIVE_ELEMENTS, seen.url) == []
    assert click_every_link(page) == 0
    page.wait_for_timeout(300)
    assert page.evaluate(FLAG_IN_ALL_FRAMES) == []
    assert seen.hits == [], seen.hits


def test_payloads_stay_inert_in_the_chat_page(page: Any, tmp_path: Path, minilm: Any) -> None:  # noqa: F811
    with tracker() as seen:
        table = payloads(seen.url)
        data = tmp_path / "data"
        names = list(FILE_NAME_PAYLOADS.values())
        corpus = {
            f"doc-{i}": (names[i % len(names)], 1, f"Remote work: two days per week. {payload}")
            for i, payload in enumerate(table.values())
        }
        theme = make_theme(data, minilm, corpus, name="payloads", translate_queries=False)
        theme.settings.title = table["md_image"] + " " + table["img_onerror"]
        theme.settings.description = table["script_tag"] + " " + table["md_image_reference"]
        theme.save_settings()
        answer = "Thought: done.\nAnswer: **Réponse**\n\n" + "\n\n".join(table.values())
        script = tmp_path / "script.json"
        script.write_text(
            json.dumps([act(SEARCH_TOOL_NAME, json.dumps({"query": "remote work"})), answer]),
            encoding="utf-8",
        )
        env = {"CHATITEGO_DATA_DIR": str(data), "COOKIE_PASSWORD": COOKIE_PASSWORD}
        log = tmp_path / "server.log"
        with streamlit_server("chatitego.py", env, script=script, log_path=log) as url:
            page.goto(f"{url}/?theme=payloads")
            _wait_ready(page)
            page.fill(CHAT_INPUT, "Combien de jours ? " + table["md_image_nested_alt"])
            page.press(CHAT_INPUT, "Enter")
            page.get_by_text("Réponse", exact=True).last.wait_for(timeout=60_000)
            page.wait_for_function(
                "document.querySelector('[data-testid=\"stStatusWidget\"]') === null"
            )
            # Open the reasoning panel (the tool results) and every source (the chunks).
            for summary in page.locator("[data-testid='stExpander'] summary").all():
                summary.click()
                page.wait_for_timeout(200)
            page.get_by_text("Observation", exact=False).first.wait_for()
            _shot(page, "1-payloads")
            _assert_inert(page, seen)

            # Issue 11 finding 8: ?theme= values were rendered as Markdown in the notice.
            for name in ("md_image", "md_image_entity_scheme", "img_onerror", "js_link_markdown"):
                page.goto(f"{url}/?theme={_quote(table[name])}")
                page.get_by_text("n'est pas un nom de thème valide", exact=False).first.wait_for()
                assert page.locator("[data-testid='stAlert'] a").count() == 0
                _assert_inert(page, seen)
            page.goto(f"{url}/?theme={_quote(f'[se connecter]({seen.url}/login)')}")
            page.get_by_text("n'est pas un nom de thème valide", exact=False).first.wait_for()
            assert page.locator("[data-testid='stAlert'] a").count() == 0
            _shot(page, "2-theme-in-url")
        server_log = log.read_text(encoding="utf-8")
        assert "Traceback" not in server_log, server_log[-3000:]
        print(f"FIGURE chat payloads={len(table)} tracker_requests={len(seen.hits)}")


def _quote(value: str) -> str:
    from urllib.parse import quote

    return quote(value, safe="")


def _full_conversation(turns: int) -> Conversation:
    c = Conversation()
    for i in range(turns):
        c.add_user(f"Question ancienne {i} " + os.urandom(60).hex())
        answer = f"Réponse ancienne {i} " + os.urandom(60).hex()
        c.add_assistant(TurnOutcome(stop_reason=StopReason.ANSWERED, answer=answer), answer, [])
    return c


def _seeded_history(themes: list[str]) -> tuple[str, str]:
    """The conversations cookie as this version writes it, full, for ``themes``; and the
    newest question of the first theme (the most recently used)."""
    jar: dict[str, str] = {}
    store = CookieHistoryStore(SealedCookies(jar, CookieCipher(COOKIE_PASSWORD)))
    newest = ""
    for name in reversed(themes):
        conversation = _full_conversation(30)
        store.save(name, conversation.entries)
        newest = conversation.entries[-2].content
    return jar["h"], newest


def _cookie_header(page: Any, url: str) -> str:
    with page.expect_request(lambda r: r.url.endswith("/_stcore/health")) as request:
        page.evaluate("fetch('/_stcore/health')")
    return str(request.value.all_headers().get("cookie", ""))


def test_the_cookie_header_stays_bounded_across_themes_and_beside_the_manager(
    page: Any,
    tmp_path: Path,
    minilm: Any,  # noqa: F811
) -> None:
    # Issue 11 finding 2: one 2.8 KB cookie per theme; with 3 themes the Cookie header
    # passed 8 KB, Streamlit answered /_stcore/stream with 431 and the page stayed on its
    # skeleton. Finding 5: the key parameters cookie was trusted (99999999999 rounds).
    data = tmp_path / "data"
    make_theme(data, minilm, translate_queries=False)
    others = ["it", "legal", "ops", "sales", "safety"]
    for name in others:
        ThemeRepository(data).create(name, title=name.upper())
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps([f"Thought: ok.\nAnswer: Réponse {i}." for i in range(3)]), encoding="utf-8"
    )
    seeded, newest_it = _seeded_history(others)
    host = "127.0.0.1"
    legacy = [
        # What a browser kept from earlier versions: one cookie per theme, key parameters.
        {"name": f"chatitego.h.{t}", "value": "g" * 3800, "domain": host, "path": "/"}
        for t in ("old1", "old2")
    ]
    forged = "AAAAAAAAAAAAAAAAAAAAAA==:99999999999:AAAAAAAAAAAAAAAAAAAAAA=="
    legacy.append(
        {"name": "chatitego.EncryptedCookieManager.key_params", "value": forged}
        | {"domain": host, "path": "/"}
    )
    env = {"CHATITEGO_DATA_DIR": str(data), "COOKIE_PASSWORD": COOKIE_PASSWORD}
    manager_env = {**env, "ADMIN_PASSWORD_HASH": "scrypt$1024$8$1$AAAAAAAAAAAAAAAAAAAAAA==$x"}
    log = tmp_path / "server.log"
    with (
        streamlit_server("chatitego.py", env, script=script, log_path=log) as url,
        streamlit_server("rag_manager.py", manager_env) as manager_url,
    ):
        page.context.add_cookies(
            [*legacy, {"name": "chatitego.h", "value": seeded, "domain": host, "path": "/"}]
        )
        page.goto(f"{manager_url}/")  # the RAG Manager on the same host sets its cookies too
        page.get_by_label("Mot de passe").wait_for(timeout=60_000)
        page.goto(f"{url}/?theme=hr")
        before = _cookie_header(page, url)
        started = time.monotonic()
        _wait_ready(page)
        ready_s = time.monotonic() - started
        page.fill(CHAT_INPUT, "Combien de jours de congés ?")
        page.press(CHAT_INPUT, "Enter")
        page.get_by_text("Réponse 0.").first.wait_for(timeout=60_000)
        _wait_ready(page)
        page.reload()
        _wait_ready(page)
        page.get_by_text("Combien de jours de congés ?").first.wait_for(timeout=30_000)
        after = _cookie_header(page, url)
        names = {c["name"] for c in page.context.cookies()}
        _shot(page, "3-after-reload")
        # The most recently used other theme still has its newest messages.
        page.goto(f"{url}/?theme=it")
        _wait_ready(page)
        page.get_by_text(newest_it[:40], exact=False).first.wait_for(timeout=30_000)
        _shot(page, "4-other-theme")
    print(
        f"FIGURE cookie_header before={len(before)} after={len(after)} "
        f"themes_in_cookie={len(others) + 1} ready_with_forged_key_params_s={ready_s:.1f}"
    )
    assert len(before) > HEADER_LINE_LIMIT  # the legacy state this test starts from
    assert ready_s < 30
    assert not any(n.startswith("chatitego.h.") for n in names)
    assert "chatitego.EncryptedCookieManager.key_params" not in names
    assert len(after) < HEADER_LINE_LIMIT - 3000, after
    assert "Traceback" not in log.read_text(encoding="utf-8")
