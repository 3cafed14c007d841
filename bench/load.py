"""Load test: concurrent real browser sessions on one chat page, on each storage backend.

One Streamlit server (the chat page, as ``./run.sh`` runs it) on a scripted model with a
real model's pace (``bench.paced_llm``: first token 0.5 s, then 30 tokens/s) and the real
packaged embedding model; two themes, each with one document holding its own fact
(FAIT-ALPHA, FAIT-BETA). N headless Chromium sessions (separate browser contexts: their
own cookies) alternate between the two themes and send their questions at the same time.

Reported per backend: p50/p95 time to the first answer token and to the full answer, as
the browser shows them (a MutationObserver stamps them); the server's resident memory
with one warm session and with all N, hence the growth per added session (models are
loaded once per process, so it must stay small); and isolation — each session shows all
of its own answers, none of another session's, and only its own theme's fact.

    .venv/bin/python -m bench.load [--sessions 8] [--turns 3] [--backends embedded,postgres]

``postgres`` uses ``DATABASE_URL`` when set, else a throwaway local PostgreSQL (as
``./test.sh``). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.browser_stamps import CHAT_INPUT, OBSERVE
from tests.e2e.support import served

ROOT = Path(__file__).resolve().parent.parent
FACTS = {"alpha": "FAIT-ALPHA", "beta": "FAIT-BETA"}
# Set before the first run: no session ever sees another's answers or theme; the models
# are shared, so a session adds only its own state; and with 8 sessions on 2 cores the
# first token still comes within 3 s (the scripted model's own 0.5 s plus queueing).
TARGETS = {
    "isolation_problems_max": 0,
    "rss_per_added_session_mb_max": 50,
    "first_token_p95_s_max": 3.0,
}
DOCUMENT = (
    "# Consignes de l'atelier {title}\n\n"
    "Le code de cet atelier est {fact}. Les congés se posent une semaine à l'avance "
    "auprès du responsable, et le badge se rend à l'accueil au départ.\n"
)


# ---------------------------------------------------------------------- server side


def _serve(port: int) -> None:
    """The chat page on the paced model (run in the server's own process)."""
    sys.path.insert(0, str(ROOT))
    from bench.paced_llm import PacedLLM
    from models.app_settings import AppSettingsManager
    from tests.e2e.serve import run_page

    paced = PacedLLM()
    AppSettingsManager.load_models(llm_loader=lambda config, progress: paced)
    run_page("chatitego.py", port)


def _serve_command(port: int) -> list[str]:
    return [sys.executable, "-m", "bench.load", "--serve", str(port)]


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class _PeakRss(threading.Thread):
    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak, self._stop = pid, 0.0, threading.Event()

    def run(self) -> None:
        while not self._stop.wait(0.25):
            try:
                self.peak = max(self.peak, _rss_mb(self.pid))
            except OSError:
                return

    def stop(self) -> float:
        self._stop.set()
        return self.peak


def _make_themes(data: Path, env: dict[str, str], suffix: str) -> dict[str, str]:
    """Two themes (name → fact), created and ingested through the CLI, as an admin would."""
    names: dict[str, str] = {}
    full_env = {**os.environ, **env}
    for short, fact in FACTS.items():
        name = f"load{short}{suffix}"
        doc = data.parent / f"{name}.md"
        doc.write_text(DOCUMENT.format(title=short, fact=fact), encoding="utf-8")
        subprocess.run(
            [sys.executable, "-m", "themes", "create", name, "--title", f"Atelier {short}"],
            cwd=ROOT, env=full_env, check=True, capture_output=True,
        )  # fmt: skip
        # One document per theme and a fact the scripted model repeats: compression and
        # translated queries would only add model calls and noise to what is measured.
        subprocess.run(
            [sys.executable, "-m", "bench.load", "--settle", name],
            cwd=ROOT, env=full_env, check=True, capture_output=True,
        )  # fmt: skip
        subprocess.run(
            [sys.executable, "-m", "themes", "ingest", name, str(doc)],
            cwd=ROOT, env=full_env, check=True, capture_output=True,
        )  # fmt: skip
        names[name] = fact
    return names


def _settle(name: str) -> None:
    from config.settings import get_config
    from themes.theme import ThemeRepository

    theme = ThemeRepository(get_config().data_dir).get(name)
    theme.settings.retrieval.compression = False
    theme.settings.retrieval.translate_queries = False
    theme.save_settings()


# ---------------------------------------------------------------------- browser side

IDLE = "document.querySelector('[data-testid=\"stStatusWidget\"]') === null"


THINK_S = 2.0  # a fast user reads the answer this long before the next question
# ... and the page this long after it opened. A question sent at once can meet the rerun
# the cookie component asks for just after load; see the note in the issue (not hidden:
# "interrupted_turns" counts what still happens).
SETTLE_S = 3.0
LOST: list[str] = []  # questions the page dropped (sent again, up to 3 times)
INTERRUPTED = "interrompue avant la fin"


async def _turn(page: Any, marker: str) -> tuple[float, float] | None:
    """Send one question; the browser's times to its first and last words, or None when
    the page gave up on the turn (shown as interrupted: counted, not measured)."""
    from playwright.async_api import TimeoutError as PlaywrightTimeout

    await page.wait_for_selector(f"{CHAT_INPUT}:not([disabled])", timeout=180_000)
    # A question typed while the page's script still runs can be lost with that run.
    await page.wait_for_function(IDLE, timeout=180_000)
    await page.evaluate(OBSERVE, [f"DEBUT-{marker}", f"FIN-{marker}"])
    question = f"Question {marker} : quel est le code de l'atelier ?"
    for _attempt in range(3):
        await page.fill(CHAT_INPUT, question)
        await page.press(CHAT_INPUT, "Enter")
        try:  # the page shows the question it took at once; one it dropped never shows
            await page.get_by_text(question).first.wait_for(timeout=15_000)
            break
        except PlaywrightTimeout:
            LOST.append(marker)
    done = (
        "window.__stamps && (window.__stamps.last"
        f" || document.body.innerText.includes({INTERRUPTED!r}))"
    )
    try:
        await page.wait_for_function(done, timeout=120_000)
    except PlaywrightTimeout:
        shot = Path(tempfile.gettempdir()) / f"chatitego-load-{marker}.png"
        await page.screenshot(path=str(shot), full_page=True)
        raise RuntimeError(f"no complete answer to {marker}; the page: {shot}") from None
    stamps = await page.evaluate("window.__stamps")
    await page.wait_for_timeout(THINK_S * 1000)
    if not stamps.get("last"):
        return None
    return (stamps["first"] - stamps["start"]) / 1000, (stamps["last"] - stamps["start"]) / 1000


async def _session(
    page: Any, session: int, turns: int, first_turn: int
) -> list[tuple[float, float] | None]:
    return [await _turn(page, f"S{session}Q{t}") for t in range(first_turn, turns)]


def _isolation(
    text: str, session: int, answered: list[int], fact: str, facts: list[str]
) -> list[str]:
    """What a session's page shows that it should not, or lacks (of the turns answered)."""
    problems = []
    for t in answered:
        for edge in ("DEBUT", "FIN"):
            if f"{edge}-S{session}Q{t}" not in text:
                problems.append(f"S{session}: its answer {t} is missing")
    import re

    others = {m for m in re.findall(r"\bS(\d+)Q\d+\b", text) if int(m) != session}
    if others:
        problems.append(f"S{session}: shows sessions {sorted(others)}'s questions")
    if fact not in text:
        problems.append(f"S{session}: its theme's fact {fact} is missing")
    for other in facts:
        if other != fact and other in text:
            problems.append(f"S{session}: shows another theme's fact {other}")
    return problems


async def _drive(
    url: str, pid: int, themes: dict[str, str], sessions: int, turns: int
) -> dict[str, Any]:
    from playwright.async_api import async_playwright

    from tests.e2e.support import CHROMIUM_FLAGS, chromium_path

    names = list(themes)
    LOST.clear()
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_FLAGS)
        pages = []
        for _ in range(sessions):
            context = await browser.new_context(locale="fr-FR")
            pages.append(await context.new_page())
        rss_idle = _rss_mb(pid)
        # Session 0 warms the process (the engine, the embedding model, the first search)
        # alone: its first turn is not counted; the memory after it is the one-session level.
        await pages[0].goto(f"{url}/?theme={names[0]}")
        await pages[0].wait_for_selector(CHAT_INPUT, timeout=180_000)
        await pages[0].wait_for_timeout(SETTLE_S * 1000)
        warm = await _turn(pages[0], "S0Q0")
        alone = await _turn(pages[0], "S0Q1")  # the baseline: one session, warm
        if warm is None or alone is None:
            raise RuntimeError("a turn of the only session was interrupted")
        rss_one = _rss_mb(pid)
        for i in range(1, sessions):
            await pages[i].goto(f"{url}/?theme={names[i % 2]}")
        await asyncio.gather(*(pg.wait_for_selector(CHAT_INPUT, timeout=180_000) for pg in pages))
        await pages[0].wait_for_timeout(SETTLE_S * 1000)
        peak = _PeakRss(pid)
        peak.start()
        started = time.monotonic()
        results = await asyncio.gather(
            *(_session(pages[i], i, turns, 2 if i == 0 else 0) for i in range(sessions))
        )
        wall = time.monotonic() - started
        rss_all, rss_peak = _rss_mb(pid), peak.stop()
        problems: list[str] = []
        for i, page in enumerate(pages):
            text = await page.inner_text("body")
            # Session 0 asked Q0 and Q1 alone first; an interrupted turn has no answer to see.
            first = 2 if i == 0 else 0
            answered = [*range(first), *(first + t for t, r in enumerate(results[i]) if r)]
            problems += _isolation(text, i, answered, themes[names[i % 2]], list(themes.values()))
        await browser.close()
    times = [t for per in results for t in per if t is not None]
    interrupted = sum(t is None for per in results for t in per)
    firsts, fulls = sorted(f for f, _ in times), sorted(c for _, c in times)

    def pct(values: list[float], q: float) -> float:
        return round(values[min(len(values) - 1, int(q * len(values)))], 2)

    return {
        "turns_measured": len(times),
        "warm_up_turn_s": [round(warm[0], 2), round(warm[1], 2)],
        "alone_first_token_s": round(alone[0], 2),
        "alone_full_answer_s": round(alone[1], 2),
        "ratio_first_token_p50_vs_alone": round(statistics.median(firsts) / alone[0], 2),
        "ratio_full_answer_p50_vs_alone": round(statistics.median(fulls) / alone[1], 2),
        "first_token_p50_s": round(statistics.median(firsts), 2),
        "first_token_p95_s": pct(firsts, 0.95),
        "full_answer_p50_s": round(statistics.median(fulls), 2),
        "full_answer_p95_s": pct(fulls, 0.95),
        "wall_s": round(wall, 1),
        "rss_idle_mb": round(rss_idle),
        "rss_one_session_mb": round(rss_one),
        "rss_all_sessions_mb": round(rss_all),
        "rss_peak_mb": round(rss_peak),
        "rss_per_added_session_mb": round(
            (max(rss_all, rss_peak) - rss_one) / max(1, sessions - 1), 1
        ),
        "interrupted_turns": interrupted,
        "questions_dropped": list(LOST),
        "think_time_s": THINK_S,
        "settle_after_load_s": SETTLE_S,
        "isolation_problems": problems,
        "targets": TARGETS,
    }


@contextmanager
def _database(backend: str, folder: Path) -> Iterator[dict[str, str]]:
    if backend == "embedded":
        yield {"VECTOR_BACKEND": "embedded"}
    elif os.environ.get("DATABASE_URL"):
        yield {"VECTOR_BACKEND": "postgres", "DATABASE_URL": os.environ["DATABASE_URL"]}
    else:
        from themes.pg.local_server import LocalPostgres

        with LocalPostgres.start(folder / "pg", remove_on_stop=True) as server:
            yield {"VECTOR_BACKEND": "postgres", "DATABASE_URL": server.url}


def run(backend: str, sessions: int, turns: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="chatitego-load-") as tmp:
        root = Path(tmp)
        data = root / "data"
        data.mkdir()
        with _database(backend, root) as db_env:
            env = {
                **db_env,
                "CHATITEGO_DATA_DIR": str(data),
                "COOKIE_PASSWORD": "load-bench",
                "HF_HUB_OFFLINE": "1",
                "TRANSFORMERS_OFFLINE": "1",
            }
            themes = _make_themes(data, env, uuid.uuid4().hex[:6])
            # Kept after the run (the temporary folder is not): what the server said.
            log = Path(tempfile.gettempdir()) / f"chatitego-load-server-{backend}.log"
            with served(_serve_command, env, log, timeout_s=180) as (url, server):
                result = asyncio.run(_drive(url, server.pid, themes, sessions, turns))
    return {"backend": backend, "sessions": sessions, "turns_per_session": turns, **result}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--backends", default="embedded,postgres")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--settle", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        _serve(args.serve)
        return
    if args.settle:
        _settle(args.settle)
        return
    runs = [run(b, args.sessions, args.turns) for b in args.backends.split(",")]
    print(
        json.dumps(
            {
                "bench": "load",
                "model": "paced scripted (first token 0.5 s, 30 tokens/s)",
                "cores": os.cpu_count(),
                "load_average_1m": round(os.getloadavg()[0], 1),
                "runs": runs,
            }
        )
    )


if __name__ == "__main__":
    main()
