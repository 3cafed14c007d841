"""Chat page in a real browser: send → first answer token visible, send → complete render.

Both pages run on the same machine in the same run: Chatitego's chat page on a
zero-latency scripted model (a tool call, then a ~120-word answer), and a bare
Streamlit chat page streaming the same answer text (``chat_page_baseline``).
Times are read in the browser (a MutationObserver stamps when the answer's
first and last words appear). Prints one JSON object; target: first answer
token ≤ 1.5 s warm.

    .venv/bin/python -m bench.chat_page [--turns 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path
from typing import Any

from bench.browser_stamps import CHAT_INPUT, OBSERVE
from engine.tools.theme_rag import SEARCH_TOOL_NAME
from models.embeddings import load_packaged_minilm
from tests.e2e.support import CHROMIUM_FLAGS, chromium_path, streamlit_server
from tests.test_theme_rag import make_theme

WORDS = (
    "La politique prévoit jusqu'à deux jours de télétravail par semaine, à convenir avec "
    "le responsable, hors période d'essai. "
) * 8


def script(turns: int) -> list[str]:
    items: list[str] = []
    for i in range(turns):
        items.append(
            "Thought: Je cherche.\nAction: "
            + SEARCH_TOOL_NAME
            + '\nAction Input: {"query": "télétravail"}\n'
        )
        items.append(f"Thought: Je sais.\nAnswer: DEBUT{i} {WORDS}FIN{i}.")
    return items


def baseline_script(turns: int) -> list[str]:
    return [f"Answer: DEBUT{i} {WORDS}FIN{i}." for i in range(turns)]


def measure(url: str, turns: int, browser: Any) -> list[tuple[float, float]]:
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(url)
    page.wait_for_selector(CHAT_INPUT, timeout=120_000)
    times: list[tuple[float, float]] = []
    for i in range(turns):
        page.wait_for_selector(f"{CHAT_INPUT}:not([disabled])", timeout=60_000)
        page.evaluate(OBSERVE, [f"DEBUT{i}", f"FIN{i}"])
        page.fill(CHAT_INPUT, f"Question {i} ?")
        page.press(CHAT_INPUT, "Enter")
        page.wait_for_function("window.__stamps && window.__stamps.last", timeout=120_000)
        stamps = page.evaluate("window.__stamps")
        times.append(
            ((stamps["first"] - stamps["start"]) / 1000, (stamps["last"] - stamps["start"]) / 1000)
        )
        page.wait_for_timeout(500)  # let the rerun that follows a turn settle
    page.close()
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=5)
    turns = parser.parse_args().turns
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        root = Path(tmp)
        data = root / "data"
        make_theme(data, load_packaged_minilm(), translate_queries=False)
        ours_script, base_script = root / "ours.json", root / "base.json"
        ours_script.write_text(json.dumps(script(turns)), encoding="utf-8")
        base_script.write_text(json.dumps(baseline_script(turns)), encoding="utf-8")
        browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_FLAGS)
        env = {"CHATITEGO_DATA_DIR": str(data), "COOKIE_PASSWORD": "bench"}
        with streamlit_server(
            "chatitego.py", env, script=ours_script, log_path=Path("/tmp/bench_server.log")
        ) as url:
            ours = measure(f"{url}/?theme=hr", turns, browser)
        with streamlit_server(
            "bench/chat_page_baseline.py", {**env, "BENCH_SCRIPT": str(base_script)}
        ) as url:
            base = measure(url, turns, browser)
        browser.close()

    def median(values: list[float]) -> float:
        return round(statistics.median(values), 3)

    warm_ours, warm_base = ours[1:] or ours, base[1:] or base
    result = {
        "bench": "chat_page",
        "turns": turns,
        "ours_first_token_s": [round(f, 3) for f, _ in ours],
        "ours_complete_s": [round(c, 3) for _, c in ours],
        "baseline_first_token_s": [round(f, 3) for f, _ in base],
        "baseline_complete_s": [round(c, 3) for _, c in base],
        "ours_warm_first_token_median_s": median([f for f, _ in warm_ours]),
        "ours_warm_complete_median_s": median([c for _, c in warm_ours]),
        "ratio_first_token": round(
            median([f for f, _ in warm_ours]) / median([f for f, _ in warm_base]), 2
        ),
        "ratio_complete": round(
            median([c for _, c in warm_ours]) / median([c for _, c in warm_base]), 2
        ),
        "target_first_token_s": 1.5,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
