"""Where themes live: ``ThemeStore``, and the folder store of the embedded backend.

A theme is its settings, its system prompt (with the previous ones), its original
documents and its versioned index. ``FolderThemeStore`` keeps them under
``<data_dir>/themes/<name>/``::

    theme.json            settings (ThemeSettings)
    system_prompt.md      the theme's system prompt (Markdown, edited by the admin)
    prompt_history/       previous system prompts, one file per change
    documents/            the original files, kept so the theme can be re-indexed
    index/                versioned index (see themes.index_storage)

``themes.pg.theme_store.PgThemeStore`` keeps the same things in PostgreSQL
(``VECTOR_BACKEND=postgres``). Either way the theme's local folder exists for what stays
per replica (feedback, the RAG Manager's ledger and regression questions).
"""

from __future__ import annotations

import json
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from config.store import StoreSettings, get_store_settings
from themes.atomic_write import atomic_write
from themes.documents import DocumentFiles, FolderDocuments
from themes.index_storage import IndexStorage
from themes.store_protocol import ThemeIndexStorage
from themes.theme_settings import ThemeExists, ThemeSettings

SETTINGS_FILE = "theme.json"
PROMPT_FILE = "system_prompt.md"
PROMPT_HISTORY_DIR = "prompt_history"
DOCUMENTS_DIR = "documents"


class ThemeStore(Protocol):
    """Reads and writes themes; ``directory`` is always the theme's local folder."""

    kind: str

    def names(self, root: Path) -> list[str]:
        """Every theme's name, sorted."""
        ...

    def read_settings(self, directory: Path, name: str) -> ThemeSettings | None:
        """The theme's settings, ``None`` when there is no such theme."""
        ...

    def create(self, directory: Path, settings: ThemeSettings, system_prompt: str) -> None:
        """A new theme (``ThemeExists`` when the name is taken)."""
        ...

    def write_settings(self, directory: Path, settings: ThemeSettings) -> None: ...

    def delete(self, directory: Path, name: str, lock_timeout: float) -> None:
        """Remove the theme and everything in it, under its write lock (``ThemeBusy``)."""
        ...

    def read_prompt(self, directory: Path, name: str) -> str: ...

    def write_prompt(self, directory: Path, name: str, text: str) -> None:
        """Replace the system prompt, keeping the previous one in the history."""
        ...

    def prompt_history(self, directory: Path, name: str) -> list[str]:
        """When each previous system prompt was replaced (sortable stamps), oldest first."""
        ...

    def index_storage(self, directory: Path, name: str) -> ThemeIndexStorage: ...

    def documents(self, directory: Path, name: str) -> DocumentFiles: ...


class FolderThemeStore:
    """Themes as folders under ``<data_dir>/themes/`` (the embedded backend)."""

    kind = "embedded"

    def names(self, root: Path) -> list[str]:
        if not root.is_dir():
            return []
        return sorted(p.name for p in root.iterdir() if (p / SETTINGS_FILE).is_file())

    def read_settings(self, directory: Path, name: str) -> ThemeSettings | None:
        path = directory / SETTINGS_FILE
        if not path.is_file():
            return None
        return ThemeSettings.model_validate(json.loads(path.read_text("utf-8")))

    def create(self, directory: Path, settings: ThemeSettings, system_prompt: str) -> None:
        if (directory / SETTINGS_FILE).exists():
            raise ThemeExists(f"the theme {settings.name!r} already exists")
        directory.mkdir(parents=True, exist_ok=True)
        (directory / DOCUMENTS_DIR).mkdir(exist_ok=True)
        self.write_settings(directory, settings)
        if system_prompt:
            atomic_write(directory / PROMPT_FILE, system_prompt)

    def write_settings(self, directory: Path, settings: ThemeSettings) -> None:
        atomic_write(directory / SETTINGS_FILE, settings.model_dump_json(indent=2))

    def delete(self, directory: Path, name: str, lock_timeout: float) -> None:
        trash = directory.with_name(f".{name}.deleting")
        shutil.rmtree(trash, ignore_errors=True)  # left by an interrupted deletion
        storage = IndexStorage(directory, required_file=SETTINGS_FILE)
        with storage.exclusive(lock_timeout=lock_timeout):
            os.replace(directory, trash)  # atomic: the theme disappears at once
        shutil.rmtree(trash, ignore_errors=True)

    def read_prompt(self, directory: Path, name: str) -> str:
        path = directory / PROMPT_FILE
        return path.read_text(encoding="utf-8") if path.exists() else ""

    def write_prompt(self, directory: Path, name: str, text: str) -> None:
        path = directory / PROMPT_FILE
        if path.exists():
            history = directory / PROMPT_HISTORY_DIR
            history.mkdir(exist_ok=True)
            stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
            shutil.copy2(path, history / f"{stamp}.md")
        atomic_write(path, text)

    def prompt_history(self, directory: Path, name: str) -> list[str]:
        history = directory / PROMPT_HISTORY_DIR
        return sorted(p.stem for p in history.glob("*.md")) if history.is_dir() else []

    def index_storage(self, directory: Path, name: str) -> ThemeIndexStorage:
        return IndexStorage(directory, required_file=SETTINGS_FILE)

    def documents(self, directory: Path, name: str) -> DocumentFiles:
        return FolderDocuments(directory / DOCUMENTS_DIR)


def theme_store(settings: StoreSettings | None = None) -> ThemeStore:
    """The store the settings name (``VECTOR_BACKEND``; the process's settings by default)."""
    settings = settings or get_store_settings()
    if settings.vector_backend == "postgres":
        from themes.pg.theme_store import postgres_theme_store

        assert settings.database_url is not None  # checked by StoreSettings
        return postgres_theme_store(
            settings.database_url.get_secret_value(), ef_search=settings.pg_hnsw_ef_search
        )
    return FolderThemeStore()
