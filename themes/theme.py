"""A theme: one business domain with its settings, system prompt, documents and index.

Where a theme's parts are kept is its ``ThemeStore`` (``themes.theme_store``): folders
under ``<data_dir>/themes/<name>/`` with the embedded backend, PostgreSQL with
``VECTOR_BACKEND=postgres``. ``Theme`` and ``ThemeRepository`` are the same either way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from themes.documents import DocumentFiles
from themes.index_storage import IndexVersion
from themes.names import validate_theme_name
from themes.store_protocol import ThemeIndexStorage
from themes.theme_settings import (
    RetrievalSettings,
    ThemeExists,
    ThemeNotFound,
    ThemeSettings,
    now_iso,
)
from themes.theme_store import (
    DOCUMENTS_DIR,
    PROMPT_FILE,
    PROMPT_HISTORY_DIR,
    SETTINGS_FILE,
    FolderThemeStore,
    ThemeStore,
    theme_store,
)

__all__ = [
    "DOCUMENTS_DIR",
    "PROMPT_FILE",
    "PROMPT_HISTORY_DIR",
    "SETTINGS_FILE",
    "THEMES_DIR",
    "RetrievalSettings",
    "Theme",
    "ThemeExists",
    "ThemeNotFound",
    "ThemeRepository",
    "ThemeSettings",
]

THEMES_DIR = "themes"


class Theme:
    """One theme; ``directory`` is its local folder (under ``<data_dir>/themes/``)."""

    def __init__(
        self, directory: Path, settings: ThemeSettings, store: ThemeStore | None = None
    ) -> None:
        self.directory = directory
        self.settings = settings
        self.store: ThemeStore = store or FolderThemeStore()

    @property
    def name(self) -> str:
        return self.settings.name

    @property
    def documents_dir(self) -> Path:
        """The embedded backend's documents folder (see ``documents`` for any backend)."""
        return self.directory / DOCUMENTS_DIR

    @property
    def documents(self) -> DocumentFiles:
        """The stored original documents."""
        return self.store.documents(self.directory, self.name)

    @property
    def storage(self) -> ThemeIndexStorage:
        return self.store.index_storage(self.directory, self.name)

    @property
    def system_prompt(self) -> str:
        return self.store.read_prompt(self.directory, self.name)

    def set_system_prompt(self, text: str) -> None:
        """Replace the system prompt, keeping the previous one in the history."""
        self.store.write_prompt(self.directory, self.name, text)

    def prompt_history(self) -> list[str]:
        """When each previous system prompt was replaced, oldest first."""
        return self.store.prompt_history(self.directory, self.name)

    def save_settings(self) -> None:
        self.settings.updated_at = now_iso()
        self.store.write_settings(self.directory, self.settings)

    def load_data(self) -> IndexVersion:
        """The theme's published index (always a complete version)."""
        return self.storage.load_current()

    def document_names(self) -> list[str]:
        """The stored original documents' names, sorted."""
        return self.documents.names()


class ThemeRepository:
    """All themes of a data directory (and, with the postgres backend, of the database)."""

    def __init__(self, data_dir: Path | str, store: ThemeStore | None = None) -> None:
        self.root = Path(data_dir) / THEMES_DIR
        self.store: ThemeStore = store or theme_store()

    def path_of(self, name: str) -> Path:
        return self.root / validate_theme_name(name)

    def names(self) -> list[str]:
        return self.store.names(self.root)

    def exists(self, name: str) -> bool:
        directory = self.path_of(name)
        return self.store.read_settings(directory, directory.name) is not None

    def get(self, name: str) -> Theme:
        directory = self.path_of(name)
        settings = self.store.read_settings(directory, directory.name)
        if settings is None:
            known = ", ".join(self.names()) or "none yet"
            raise ThemeNotFound(f"no theme named {name!r} (existing themes: {known})")
        return Theme(directory, settings, self.store)

    def create(
        self,
        name: str,
        *,
        title: str = "",
        description: str = "",
        language: Literal["fr", "en"] = "fr",
        system_prompt: str = "",
    ) -> Theme:
        directory = self.path_of(name)
        settings = ThemeSettings(
            name=name, title=title or name, description=description, language=language
        )
        self.store.create(directory, settings, system_prompt)
        return Theme(directory, settings, self.store)

    def delete(self, name: str, *, lock_timeout: float = 2.0) -> None:
        """Remove a theme and everything in it (the caller confirms first).

        Takes the theme's write lock first: while an ingest, update or repair runs, this
        waits up to ``lock_timeout`` seconds, then raises ``ThemeBusy`` with nothing removed.
        A theme whose settings are damaged can still be deleted.
        """
        directory = self.path_of(name)
        if directory.name not in self.names():
            known = ", ".join(self.names()) or "none yet"
            raise ThemeNotFound(f"no theme named {name!r} (existing themes: {known})")
        self.store.delete(directory, directory.name, lock_timeout)
