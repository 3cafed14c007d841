"""The chat page in a real browser (Debian chromium, headless), on a scripted model.

Ask a question, see the reasoning and the answer with its sources, reload
(the conversation comes back from the encrypted cookie), switch theme via the
URL and back. Screenshots: test-output/screenshots/chat-*.png.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from engine.tools.theme_rag import SEARCH_TOOL_NAME
from tests.e2e.support import screenshot_path, streamlit_server
from tests.e2e.test_manager_browser import _idle
from tests.test_engine_corpus import act
from tests.test_theme_rag import make_theme, minilm  # noqa: F401 - fixture
from themes.theme import ThemeRepository

QUESTION = "Combien de jours de télétravail par semaine ?"
SCRIPT = [
    "Thought: Je cherche dans la politique RH.\n"
    + act(SEARCH_TOOL_NAME, json.dumps({"query": "télétravail jours par semaine"})).split("\n", 1)[
        1
    ],
    "Thought: La politique le dit.\nAnswer: Jusqu'à **deux jours** par semaine.",
]
CHAT_INPUT = "textarea[data-testid='stChatInputTextArea']"


def _wait_ready(page: Any) -> None:
    page.wait_for_selector(CHAT_INPUT, timeout=60_000)
    # The cookie component's first writes cause one or two quick reruns after load: a
    # question sent meanwhile is asked again by the page (tested in test_chat_page), but
    # the scripted model would then run out of script.
    for _ in range(2):
        page.wait_for_timeout(700)
        page.wait_for_function(
            "document.querySelector('[data-testid=\"stStatusWidget\"]') === null"
        )


def test_ask_reload_and_switch_theme(page: Any, tmp_path: Path, minilm: Any) -> None:  # noqa: F811
    data = tmp_path / "data"
    make_theme(data, minilm, translate_queries=False)  # the script has no translation call
    ThemeRepository(data).create("it", title="Support informatique", language="fr")
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT), encoding="utf-8")
    env = {"CHATITEGO_DATA_DIR": str(data), "COOKIE_PASSWORD": "e2e-only-cookie-key"}
    log = tmp_path / "server.log"
    with streamlit_server("chatitego.py", env, script=script, log_path=log) as url:
        page.goto(f"{url}/?theme=hr")
        _wait_ready(page)
        page.fill(CHAT_INPUT, QUESTION)
        page.press(CHAT_INPUT, "Enter")
        answer = page.get_by_text("deux jours", exact=False).last
        answer.wait_for(timeout=60_000)
        source = page.locator("[data-testid='stExpander'] summary").filter(has_text="hr-policy.pdf")
        source.first.wait_for()
        page.screenshot(path=screenshot_path("chat-1-answer"), full_page=True)
        # The reasoning panel folds once the turn is over; open it to read the steps.
        page.get_by_text(re.compile("Raisonnement")).first.click()
        page.get_by_text("Je cherche dans la politique RH.").first.wait_for()
        page.screenshot(path=screenshot_path("chat-2-reasoning"), full_page=True)

        # Export: the PDF is built on click and downloaded. Clicked once the page's runs
        # are over, as a reader would: CI once clicked during the rerun that follows a
        # turn and no download came (not reproduced alone; see the issue 12 note).
        _idle(page)
        with page.expect_download() as download:
            page.get_by_role("button", name="PDF").click()
        pdf = Path(download.value.path()).read_bytes()
        assert pdf.startswith(b"%PDF") and len(pdf) > 1000
        with page.expect_download() as download:
            page.get_by_role("button", name="Markdown").click()
        md = Path(download.value.path()).read_text(encoding="utf-8")
        assert md.index("## Résumé") < md.index(QUESTION, md.index("## Conversation"))

        page.reload()
        _wait_ready(page)
        page.get_by_text(QUESTION).first.wait_for(timeout=30_000)
        page.get_by_text("deux jours", exact=False).first.wait_for()
        page.screenshot(path=screenshot_path("chat-3-after-reload"), full_page=True)

        page.goto(f"{url}/?theme=it")
        _wait_ready(page)
        page.get_by_role("heading", name="Support informatique").wait_for()
        assert page.get_by_text(QUESTION).count() == 0  # another theme, another conversation
        page.screenshot(path=screenshot_path("chat-4-other-theme"), full_page=True)

        page.goto(f"{url}/?theme=hr")
        _wait_ready(page)
        page.get_by_text(QUESTION).first.wait_for(timeout=30_000)

        page.goto(f"{url}/?theme=does-not-exist")
        page.get_by_text("n'existe pas", exact=False).first.wait_for(timeout=30_000)
        page.screenshot(path=screenshot_path("chat-5-unknown-theme"), full_page=True)
    assert "Traceback" not in log.read_text(encoding="utf-8")
