"""Real-browser test support: a Streamlit server on a free port and Debian's chromium.

The browser is the system's ``/usr/bin/chromium`` (``./test.sh`` installs it
with apt when missing) driven by playwright; no browser is downloaded.
Screenshots go to ``test-output/screenshots/`` (ignored by git) to be looked at.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "test-output" / "screenshots"
CHROMIUM_FLAGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]


def chromium_path() -> str:
    """The system chromium; a clear failure when it is missing."""
    found = os.environ.get("CHROMIUM_PATH") or shutil.which("chromium")
    if not found:
        raise RuntimeError(
            "chromium is not installed: run ./test.sh (it installs Debian's chromium) "
            "or 'apt-get install -y chromium'"
        )
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def streamlit_server(
    page: str,
    env: Mapping[str, str],
    script: Path | None = None,
    log_path: Path | None = None,
    timeout_s: float = 120.0,
) -> Iterator[str]:
    """Run ``page`` (path relative to the repository) and yield its base URL."""

    def command(port: int) -> list[str]:
        args = [sys.executable, str(ROOT / "tests" / "e2e" / "serve.py"), page, str(port)]
        return args if script is None else [*args, str(script)]

    with served(command, env, log_path, timeout_s) as (url, _proc):
        yield url


@contextmanager
def served(
    command: Callable[[int], list[str]],
    env: Mapping[str, str],
    log_path: Path | None = None,
    timeout_s: float = 120.0,
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """Run ``command(port)`` (a Streamlit server) until it is healthy; yield its URL and
    process (whose memory a benchmark may read), and stop it after."""
    port = free_port()
    log = (log_path or Path(os.devnull)).open("w")
    proc = subprocess.Popen(
        command(port), cwd=ROOT, env={**os.environ, **env}, stdout=log, stderr=subprocess.STDOUT
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"streamlit exited with {proc.returncode}; log: {log_path}")
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"streamlit did not start within {timeout_s} s")
            time.sleep(0.3)
        yield url, proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def screenshot_path(name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS / f"{name}.png"


def manager_navigation(page: Any) -> Any:
    """The RAG Manager's page navigation (``st.navigation``, in the sidebar)."""
    return page.locator("[data-testid='stSidebarNav']")


def open_manager_page(page: Any, title: str) -> None:
    """Go to a RAG Manager page by its link, and wait until it is the current one."""
    navigation = manager_navigation(page)
    navigation.get_by_role("link", name=title, exact=True).click()
    navigation.locator("[aria-current='page']", has_text=title).wait_for(timeout=30_000)
    page.wait_for_timeout(300)
    page.wait_for_function(
        "document.querySelector('[data-testid=\"stStatusWidget\"]') === null", timeout=90_000
    )
