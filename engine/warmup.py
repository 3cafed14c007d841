"""Loading the models and reading a theme's stable prompt before the first question.

A chat server calls ``warm_up_in_background`` once at start: the models load
into the process-wide ``AppSettings`` (the pages get them from there), and the
in-process model reads the stable start of the theme's prompts into its KV
cache. Nothing here may stop the server: a failure is logged, and the page
reports it in its own words when it loads the models itself.
"""

from __future__ import annotations

import logging
import threading
import time

from config.settings import AppConfig, get_config
from engine.engine import ReActEngine

logger = logging.getLogger(__name__)


def warm_up(theme: str | None, config: AppConfig | None = None) -> float:
    """Load the models and prefill ``theme``'s prompt; the seconds it took."""
    started = time.perf_counter()
    engine = ReActEngine(config=config or get_config())
    engine.start(theme=theme)
    engine.warm_up()
    return time.perf_counter() - started


def warm_up_in_background(theme: str | None, config: AppConfig | None = None) -> threading.Thread:
    """``warm_up`` in a daemon thread; errors are logged, never raised."""

    def work() -> None:
        try:
            seconds = warm_up(theme, config)
        except Exception as exc:  # noqa: BLE001 - the server must start anyway
            logger.warning("warm-up failed (the first question will load the models): %s", exc)
            return
        logger.info("models loaded and theme %r prefilled in %.1f s", theme, seconds)

    thread = threading.Thread(target=work, name="chatitego-warm-up", daemon=True)
    thread.start()
    return thread
