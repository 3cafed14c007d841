"""Fixtures of the real-browser tests (marker ``browser``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.support import CHROMIUM_FLAGS, chromium_path


@pytest.fixture(autouse=True)
def _browser_marker(request: pytest.FixtureRequest) -> None:
    request.node.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_FLAGS)
        yield b
        b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900}, locale="fr-FR")
    p = context.new_page()
    p.set_default_timeout(30_000)
    yield p
    context.close()
