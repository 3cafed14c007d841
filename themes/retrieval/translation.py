"""Query translation: the injected translator, its output cleaned, and a bounded cache."""

from __future__ import annotations

import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Callable

logger = logging.getLogger(__name__)

Translator = Callable[[str], str | None]

TRANSLATION_CACHE_SIZE = 128


class TranslationCache:
    """Translations of recent queries (thread-safe). Failures are not kept, so the next
    query asks again; successes are, up to ``TRANSLATION_CACHE_SIZE``."""

    def __init__(self) -> None:
        self._translations: OrderedDict[str, str | None] = OrderedDict()
        self._lock = threading.Lock()

    def translate(self, translator: Translator, query: str) -> str | None:
        """``query`` translated and cleaned, or ``None`` when the translator failed."""
        with self._lock:
            if query in self._translations:
                self._translations.move_to_end(query)
                return self._translations[query]
        try:
            translated = translator(query)
        except Exception as exc:  # noqa: BLE001 - a failed translation only loses a variant
            logger.warning("query translation failed: %s: %s", type(exc).__name__, exc)
            return None
        cleaned = clean_translation(translated)
        if cleaned is not None:
            with self._lock:
                self._translations[query] = cleaned
                while len(self._translations) > TRANSLATION_CACHE_SIZE:
                    self._translations.popitem(last=False)
        return cleaned


def clean_translation(text: str | None) -> str | None:
    """First non-empty line of a model's translation, without quotes or a label."""
    if not isinstance(text, str):
        return None
    for line in text.splitlines():
        line = re.sub(r"^\s*(?:translation|traduction)\s*:\s*", "", line, flags=re.IGNORECASE)
        line = line.strip().strip("\"'«»“”`").strip()
        if line:
            return line[:500]
    return None
