"""The settings form of a theme as values, and what saving it changes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SettingsForm:
    """What the admin submitted, as the widgets give it (numbers may come as floats)."""

    title: str
    description: str
    language: str
    detail: str
    engine_mode: str
    enabled_tools: list[str]
    wide_k: float
    top_k: float
    chunk_tokens: float  # 0: the embedding model's own size
    chunk_overlap: float
    compression: bool
    compression_threshold: float
    llm_extraction: bool
    translate_queries: bool
    search_first: bool


@dataclass(frozen=True)
class SettingsChanges:
    """The settings to save, and whether documents must be re-indexed to follow them."""

    values: dict[str, Any]
    chunking_changed: bool


def settings_changes(
    form: SettingsForm, saved_chunk_tokens: int | None, saved_chunk_overlap: int
) -> SettingsChanges:
    """The form as settings: text trimmed, numbers as ints, no tool ticked meaning all.

    Chunking applies when a document is indexed: a new chunk size or overlap leaves the
    documents already indexed as they were until they are re-indexed.
    """
    chunk_tokens = int(form.chunk_tokens) or None
    values: dict[str, Any] = {
        "title": form.title.strip(),
        "description": form.description.strip(),
        "language": form.language,
        "detail": form.detail,
        "engine_mode": form.engine_mode,
        "enabled_tools": list(form.enabled_tools) or ["*"],
        "retrieval": {
            "wide_k": int(form.wide_k),
            "top_k": int(form.top_k),
            "chunk_tokens": chunk_tokens,
            "chunk_overlap": int(form.chunk_overlap),
            "compression": form.compression,
            "compression_threshold": float(form.compression_threshold),
            "llm_extraction": form.llm_extraction,
            "translate_queries": form.translate_queries,
            "search_first": form.search_first,
        },
    }
    chunking = (chunk_tokens, int(form.chunk_overlap))
    return SettingsChanges(values, chunking != (saved_chunk_tokens, saved_chunk_overlap))
