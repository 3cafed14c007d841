"""A theme: one business domain with its settings, system prompt, documents and index.

Layout under ``<data_dir>/themes/<name>/``::

    theme.json            settings (ThemeSettings)
    system_prompt.md      the theme's system prompt (Markdown, edited by the admin)
    prompt_history/       previous system prompts, one file per change
    documents/            the original files, kept so the theme can be re-indexed
    index/                versioned index (see themes.index_storage)
"""

from __future__ import annotations

import json
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from themes.index_storage import IndexStorage, IndexVersion
from themes.mcp_config import McpServerConfig
from themes.names import validate_theme_name

THEMES_DIR = "themes"
SETTINGS_FILE = "theme.json"
PROMPT_FILE = "system_prompt.md"
PROMPT_HISTORY_DIR = "prompt_history"
DOCUMENTS_DIR = "documents"


class ThemeNotFound(LookupError):
    """No theme of that name; the message lists the existing ones."""


class ThemeExists(ValueError):
    """A theme of that name already exists."""


class RetrievalSettings(BaseModel):
    """How a theme's documents are chunked, retrieved and compressed."""

    model_config = ConfigDict(extra="forbid")

    wide_k: int = Field(20, ge=1, le=200, description="candidates per retriever before fusion")
    top_k: int = Field(5, ge=1, le=50, description="chunks kept after reranking")
    chunk_tokens: int | None = Field(
        None, ge=32, le=2048, description="chunk size; None = the embedding model's limit"
    )
    chunk_overlap: int = Field(32, ge=0, le=512)
    compression: bool = Field(True, description="keep only the sentences close to the query")
    compression_threshold: float = Field(0.25, ge=-1.0, le=1.0)
    llm_extraction: bool = Field(False, description="let the LLM extract the relevant part")
    search_first: bool = Field(
        True,
        description="search the documents with the question before the model's first step "
        "(small models otherwise answer from memory)",
    )
    translate_queries: bool = Field(
        True, description="also search with the question translated (FR<->EN) by the LLM"
    )


class ThemeSettings(BaseModel):
    """Everything an admin sets for a theme (the system prompt lives in its own file)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    title: str = ""
    description: str = ""
    language: Literal["fr", "en"] = "fr"
    detail: Literal["concise", "standard", "detailed"] = "standard"
    engine_mode: Literal["react", "chat"] = "react"
    enabled_tools: list[str] = Field(default_factory=lambda: ["*"])
    mcp_servers: list[McpServerConfig] = Field(default_factory=list)
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings)
    created_at: str = Field(default_factory=lambda: _now())
    updated_at: str = Field(default_factory=lambda: _now())


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class Theme:
    """One theme on disk."""

    def __init__(self, directory: Path, settings: ThemeSettings) -> None:
        self.directory = directory
        self.settings = settings

    @property
    def name(self) -> str:
        return self.settings.name

    @property
    def documents_dir(self) -> Path:
        return self.directory / DOCUMENTS_DIR

    @property
    def storage(self) -> IndexStorage:
        return IndexStorage(self.directory, required_file=SETTINGS_FILE)

    @property
    def system_prompt(self) -> str:
        path = self.directory / PROMPT_FILE
        return path.read_text(encoding="utf-8") if path.exists() else ""

    def set_system_prompt(self, text: str) -> None:
        """Replace the system prompt, keeping the previous one in the history folder."""
        path = self.directory / PROMPT_FILE
        if path.exists():
            history = self.directory / PROMPT_HISTORY_DIR
            history.mkdir(exist_ok=True)
            stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
            shutil.copy2(path, history / f"{stamp}.md")
        _atomic_write(path, text)

    def prompt_history(self) -> list[Path]:
        """Previous system prompts, oldest first."""
        history = self.directory / PROMPT_HISTORY_DIR
        return sorted(history.glob("*.md")) if history.is_dir() else []

    def save_settings(self) -> None:
        self.settings.updated_at = _now()
        _atomic_write(self.directory / SETTINGS_FILE, self.settings.model_dump_json(indent=2))

    def load_data(self) -> IndexVersion:
        """The theme's published index (always a complete version)."""
        return self.storage.load_current()

    def document_files(self) -> list[Path]:
        """The stored original documents, sorted by name."""
        if not self.documents_dir.is_dir():
            return []
        return sorted(
            p for p in self.documents_dir.iterdir() if p.is_file() and not p.name.startswith(".")
        )


class ThemeRepository:
    """All themes of a data directory."""

    def __init__(self, data_dir: Path | str) -> None:
        self.root = Path(data_dir) / THEMES_DIR

    def path_of(self, name: str) -> Path:
        return self.root / validate_theme_name(name)

    def names(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if (p / SETTINGS_FILE).is_file())

    def exists(self, name: str) -> bool:
        return (self.path_of(name) / SETTINGS_FILE).is_file()

    def get(self, name: str) -> Theme:
        directory = self.path_of(name)
        settings_path = directory / SETTINGS_FILE
        if not settings_path.is_file():
            known = ", ".join(self.names()) or "none yet"
            raise ThemeNotFound(f"no theme named {name!r} (existing themes: {known})")
        settings = ThemeSettings.model_validate(json.loads(settings_path.read_text("utf-8")))
        return Theme(directory, settings)

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
        if (directory / SETTINGS_FILE).exists():
            raise ThemeExists(f"the theme {name!r} already exists")
        directory.mkdir(parents=True, exist_ok=True)
        (directory / DOCUMENTS_DIR).mkdir(exist_ok=True)
        theme = Theme(
            directory,
            ThemeSettings(
                name=name, title=title or name, description=description, language=language
            ),
        )
        theme.save_settings()
        if system_prompt:
            _atomic_write(directory / PROMPT_FILE, system_prompt)
        return theme

    def delete(self, name: str, *, lock_timeout: float = 2.0) -> None:
        """Remove a theme and everything in it (the caller confirms first).

        Takes the theme's write lock first: while an ingest, update or repair runs, this
        waits up to ``lock_timeout`` seconds, then raises ``ThemeBusy`` with nothing removed.
        A theme whose settings are damaged can still be deleted.
        """
        directory = self.path_of(name)
        if not (directory / SETTINGS_FILE).is_file():
            known = ", ".join(self.names()) or "none yet"
            raise ThemeNotFound(f"no theme named {name!r} (existing themes: {known})")
        trash = directory.with_name(f".{name}.deleting")
        shutil.rmtree(trash, ignore_errors=True)  # left by an interrupted deletion
        storage = IndexStorage(directory, required_file=SETTINGS_FILE)
        with storage.exclusive(lock_timeout=lock_timeout):
            os.replace(directory, trash)  # atomic: the theme disappears at once
        shutil.rmtree(trash, ignore_errors=True)


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
