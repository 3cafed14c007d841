"""What one turn takes from its session: settings, theme, history, models and tools."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from llama_index.core.llms import LLM
from llama_index.core.tools import BaseTool

from config.settings import AppConfig
from engine.history import PreparedHistory
from engine.prompts import Language
from engine.router import ToolRouter
from engine.session_models import SessionModels
from engine.theme_context import ThemeContext
from engine.types import TurnOutcome


@dataclass(frozen=True)
class TurnSetup:
    """A started session, seen by one turn; the turn reports through ``record``."""

    config: AppConfig
    language: Language
    detail: str
    history: PreparedHistory
    context: ThemeContext
    models: SessionModels
    extra_tools: Sequence[BaseTool]
    # With ``auto``, the loaded model decides the prompt profile: the context to use then.
    settle_profile: Callable[[LLM], ThemeContext]
    live_tools: Callable[[], Awaitable[list[BaseTool]]]
    # After ``live_tools``: one sentence per MCP server it could not use (empty: all fine).
    live_notes: Callable[[], list[str]]
    router_with: Callable[[Sequence[BaseTool]], ToolRouter]
    record: Callable[[TurnOutcome], None]
