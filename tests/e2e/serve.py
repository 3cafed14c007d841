"""Serve a Chatitego page for the browser tests, on a scripted model.

    python tests/e2e/serve.py PAGE.py PORT [SCRIPT.json]

SCRIPT.json is a list of model outputs (strings) replayed in order by
``tests.fakes.ScriptedLLM``; without it the page runs on the configured models.
The models are installed in ``AppSettings`` before Streamlit starts, exactly as
a real process initialises them once; the embedding model is the real packaged
MiniLM (offline).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

# As ./run.sh: room for the larger Cookie header of browsers holding earlier versions'
# cookies (read by websockets when Streamlit imports it, hence here, first).
os.environ.setdefault("WEBSOCKETS_MAX_LINE_LENGTH", "16384")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def main() -> None:
    page, port = sys.argv[1], int(sys.argv[2])
    if len(sys.argv) > 3:
        from models.app_settings import AppSettingsManager
        from tests.fakes import ScriptedLLM

        script = json.loads(Path(sys.argv[3]).read_text(encoding="utf-8"))
        scripted = ScriptedLLM(script, chunk_size=4)
        AppSettingsManager.load_models(llm_loader=lambda config, progress: scripted)
    run_page(page, port)


def run_page(page: str, port: int) -> None:
    """Streamlit in this process, as ./run.sh runs it (the models already installed)."""
    from streamlit.web import bootstrap

    flags = {
        "server_port": port,
        "server_headless": True,
        "server_address": "127.0.0.1",
        "browser_gatherUsageStats": False,
        "server_fileWatcherType": "none",
        "global_developmentMode": False,
        "server_allowedHosts": ["localhost", "127.0.0.1"],  # as ./run.sh on localhost
    }
    bootstrap.load_config_options(flag_options=flags)
    bootstrap.run(str(ROOT / page), False, [], flags)


if __name__ == "__main__":
    main()
