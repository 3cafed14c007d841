"""Fixtures of the real-browser tests (marker ``browser``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.support import CHROMIUM_FLAGS, chromium_path, screenshot_path


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # At collection, so that "-m browser" selects these tests (a marker added by a
    # fixture comes too late for -m: "-m browser" used to deselect them all).
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    # Module scope, not session: while playwright's sync API is started it holds an
    # event loop as "running" in the main thread, and later tests' asyncio.run fail.
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_FLAGS)
        yield b
        b.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if report.when == "call":
        item.stash[_FAILED] = report.failed


_FAILED = pytest.StashKey[bool]()


@pytest.fixture
def page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900}, locale="fr-FR")
    p = context.new_page()
    p.set_default_timeout(30_000)
    yield p
    if request.node.stash.get(_FAILED, False):
        # What the browser showed when the test failed, to look at.
        p.screenshot(path=screenshot_path(f"FAILED-{request.node.name}"), full_page=True)
    context.close()
