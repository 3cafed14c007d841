"""Issue 11 in a real browser, the RAG Manager: a second theme is created (finding 3),
payloads in theme titles, file names, documents, feedback and the retrieval test stay
inert (finding 4 among them), and logging out works (finding 6).

A payload that fired would set ``window.__pwned`` or make the browser request the
tracker (a loopback HTTP server of the test). Screenshots:
test-output/screenshots/hardening-manager-*.png.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from manager.auth import hash_password
from tests.e2e.payloads import (
    FLAG_IN_ALL_FRAMES,
    LIVE_ELEMENTS,
    click_every_link,
    payloads,
    tracker,
)
from tests.e2e.support import open_manager_page, screenshot_path, streamlit_server
from tests.e2e.test_manager_browser import _idle
from themes.feedback import FeedbackEntry, FeedbackStep, record_feedback
from themes.theme import ThemeRepository

PASSWORD = "correct horse battery"
DOC_NAME = "<img src=x onerror=window.__pwned=1> consignes.md"
STORED_NAME = "_img src=x onerror=window.__pwned=1_ consignes.md"


def _shot(page: Any, name: str) -> None:
    page.screenshot(path=screenshot_path(f"hardening-manager-{name}"), full_page=True)


def _assert_inert(page: Any, seen: Any) -> None:
    page.wait_for_timeout(1500)  # time for a live payload's request to arrive
    assert page.evaluate(FLAG_IN_ALL_FRAMES) == []
    assert page.evaluate(LIVE_ELEMENTS, seen.url) == []
    assert click_every_link(page) == 0
    assert page.locator("[data-testid='stException']").count() == 0
    assert seen.hits == [], seen.hits


def _create_theme(page: Any, name: str, title: str) -> None:
    sidebar = page.locator("[data-testid='stSidebar']")
    expander = sidebar.get_by_text("Créer un thème")
    if not sidebar.get_by_label("Identifiant", exact=False).is_visible():
        expander.click()
    # CI once waited 30 s for the message in vain (not reproduced here, even under load):
    # the values are checked before the click, so a form rebuilt by a late script run shows
    # as such, and the message gets the time other waits of a loaded machine get.
    for label, value in (("Identifiant", name), ("Titre", title)):
        field = sidebar.get_by_label(label, exact=label == "Titre")
        field.fill(value)
        expect(field).to_have_value(value)
    sidebar.get_by_role("button", name="Créer").click()
    page.get_by_text(f"Thème « {name} » créé.").wait_for(timeout=60_000)
    _idle(page)


def test_second_theme_payloads_and_logout(page: Any, tmp_path: Path) -> None:
    started = time.monotonic()
    data = tmp_path / "data"
    with tracker() as seen:
        table = payloads(seen.url)
        doc = tmp_path / DOC_NAME
        doc.write_text(
            "# Consignes\n\nLa vanne ZK-4491 se purge dix minutes.\n\n"
            + "\n\n".join(table.values()),
            encoding="utf-8",
        )
        env = {
            "CHATITEGO_DATA_DIR": str(data),
            "ADMIN_PASSWORD_HASH": hash_password(PASSWORD, n=2**12),
        }
        log = tmp_path / "server.log"
        page.set_viewport_size({"width": 1400, "height": 1500})
        with streamlit_server("rag_manager.py", env, log_path=log) as url:
            page.goto(url)
            page.get_by_label("Mot de passe").fill(PASSWORD)
            page.get_by_role("button", name="Se connecter").click()
            page.get_by_text("Aucun thème pour l'instant", exact=False).wait_for(timeout=60_000)
            _idle(page)

            _create_theme(page, "alpha", table["md_image"] + " " + table["script_tag"])
            # Issue 11 finding 3: the second theme crashed the page (the theme was written,
            # the error box shown).
            _create_theme(page, "beta", table["md_image_nested_alt"] + " " + table["img_onerror"])
            sidebar = page.locator("[data-testid='stSidebar']")
            themes = sidebar.get_by_role("combobox", name="Thèmes")
            expect(themes).to_have_value(re.compile(r"^beta — "), timeout=10_000)
            _shot(page, "1-second-theme")
            _assert_inert(page, seen)

            page.locator("[data-testid='stFileUploaderDropzoneInput']").set_input_files(str(doc))
            page.get_by_role("button", name="Ingérer").click()
            page.get_by_text("Terminé : 1 ingéré(s)", exact=False).wait_for(timeout=90_000)
            _idle(page)
            page.get_by_text("est enregistré sous le nom", exact=False).first.wait_for()
            _shot(page, "2-ingested")
            _assert_inert(page, seen)

            # Issue 11 finding 4: a chat user's question with an image, sent with a thumb
            # down, was fetched by the admin's browser as soon as the theme was selected.
            record_feedback(
                ThemeRepository(data).get("beta").directory,
                FeedbackEntry(
                    rating=-1,
                    question="Purge ? " + table["md_image"] + " " + table["md_image_reference"],
                    answer="\n\n".join(table.values()),
                    reasoning=[FeedbackStep(type="thought", content=table["img_onerror"])],
                ),
            )
            open_manager_page(page, "Inspecter")
            page.get_by_label("Question", exact=True).first.fill("vanne ZK-4491")
            page.get_by_role("button", name="Chercher").click()
            page.get_by_text("Durées (ms)", exact=False).wait_for(timeout=60_000)
            _idle(page)
            for summary in page.locator("[data-testid='stExpander'] summary").all():
                if summary.is_visible():
                    summary.click()
            _shot(page, "3-inspect")
            _assert_inert(page, seen)

            open_manager_page(page, "Avis")
            review = page.locator("[data-testid='stExpander'] summary").filter(has_text="Purge")
            review.first.click()
            page.get_by_text("Raisonnement").last.wait_for()
            _shot(page, "4-review")
            _assert_inert(page, seen)

            # Issue 11 finding 6: logging out crashed (st.user had no "is_logged_in").
            page.get_by_role("button", name="Se déconnecter").click()
            page.get_by_label("Mot de passe").wait_for()
            assert page.locator("[data-testid='stException']").count() == 0
            _shot(page, "5-logged-out")
        server_log = log.read_text(encoding="utf-8")
        assert "Traceback" not in server_log, server_log[-3000:]
        assert (ThemeRepository(data).get("beta").documents_dir / STORED_NAME).is_file()
    print(f"FIGURE manager payloads={len(table)} tracker_requests={len(seen.hits)}")
    assert time.monotonic() - started < 240
