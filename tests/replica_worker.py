"""One "replica" of Chatitego for the two-replica test: a separate process on the library.

It reads the storage settings from its environment (``VECTOR_BACKEND=postgres``,
``DATABASE_URL``) like the app does, and answers JSON commands, one per line on stdin,
with one JSON line on stdout: ``create``, ``ingest``, ``retrieve``, ``remove``, ``hold``
(take the theme's writer lock and keep it until the next line) and ``quit``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from models.embeddings import load_packaged_minilm
from themes.index_storage import IndexVersion, ThemeBusy
from themes.ingest import ingest_files, remove_document
from themes.retrieval import HybridRetriever
from themes.theme import ThemeRepository


def serve(data_dir: Path) -> None:
    model = load_packaged_minilm()
    themes = ThemeRepository(data_dir)
    loaded: dict[str, IndexVersion] = {}

    def answer(**fields: Any) -> None:
        print(json.dumps(fields), flush=True)

    answer(ready=themes.store.kind)
    for line in sys.stdin:
        command = json.loads(line)
        op, name = command["op"], command.get("theme", "")
        try:
            if op == "quit":
                answer(ok=True)
                return
            if op == "create":
                theme = themes.create(name)
                theme.settings.retrieval.chunk_tokens = 64
                theme.settings.retrieval.chunk_overlap = 0
                theme.save_settings()
                answer(ok=True)
            elif op == "ingest":
                report = ingest_files(
                    themes.get(name), [Path(command["path"])], model, lock_timeout=0.5
                )
                answer(ok=True, version=report.version)
            elif op == "retrieve":
                theme = themes.get(name)
                loaded[name] = theme.storage.refresh(loaded.get(name))
                result = HybridRetriever(loaded[name], model).retrieve(command["query"])
                answer(ok=True, version=loaded[name].name, texts=[c.text for c in result.items])
            elif op == "remove":
                report = remove_document(themes.get(name), command["name"], lock_timeout=0.5)
                answer(ok=True, version=report.version)
            elif op == "hold":
                with themes.get(name).storage.exclusive(lock_timeout=5):
                    answer(ok=True, held=True)
                    sys.stdin.readline()
                answer(ok=True, released=True)
            else:
                answer(ok=False, error=f"unknown op {op!r}")
        except ThemeBusy as exc:
            answer(ok=False, busy=True, error=str(exc))


if __name__ == "__main__":
    serve(Path(sys.argv[1]))
