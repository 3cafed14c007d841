"""A theme's settings (what the admin sets) and the errors naming a theme."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from themes.errors import ThemesError
from themes.mcp_config import McpServerConfig


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


# How long an answer is: the engine's prompts, the chat page's preference and the theme's
# setting all take these values.
DetailLevel = Literal["concise", "standard", "detailed"]
DETAIL_LEVELS: tuple[DetailLevel, ...] = get_args(DetailLevel)


class ThemeNotFound(ThemesError, LookupError):
    """No theme of that name; the message lists the existing ones."""


class ThemeExists(ThemesError, ValueError):
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
    """Everything an admin sets for a theme (the system prompt is kept beside it)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    title: str = ""
    description: str = ""
    language: Literal["fr", "en"] = "fr"
    detail: DetailLevel = "standard"
    engine_mode: Literal["react", "chat"] = "react"
    enabled_tools: list[str] = Field(default_factory=lambda: ["*"])
    mcp_servers: list[McpServerConfig] = Field(default_factory=list)
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings)
    created_at: str = Field(default_factory=lambda: now_iso())
    updated_at: str = Field(default_factory=lambda: now_iso())
