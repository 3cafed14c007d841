"""Building the turn's agent: the formatter of the prompt profile, the tools, the limits."""

from __future__ import annotations

from collections.abc import Sequence

from llama_index.core.llms import LLM
from llama_index.core.tools import BaseTool

from config.settings import AppConfig
from engine.agent import ChatitegoReActAgent
from engine.compact import CompactReActFormatter, compact_header
from engine.formatter import ChatitegoReActFormatter
from engine.prompts import Language, system_header
from engine.theme_context import ThemeContext
from engine.turn_policy import retry_policy, turn_timeout_s
from engine.turn_state import TurnState


def session_compact_header(context: ThemeContext, language: Language, detail: str) -> str:
    """The compact profile's system header for this theme (stable: a warm-up reads it)."""
    return compact_header(language, detail, context.custom_prompt, context.title)


def build_agent(
    tools: Sequence[BaseTool],
    state: TurnState,
    *,
    config: AppConfig,
    context: ThemeContext,
    detail: str,
    llm: LLM | None,
    documents_first: bool = False,
) -> ChatitegoReActAgent:
    """A fresh agent for one turn over ``tools`` (``llm`` None: not loaded yet)."""
    formatter: ChatitegoReActFormatter | CompactReActFormatter
    if context.compact:
        formatter = CompactReActFormatter(
            header=session_compact_header(context, state.language, detail),
            documents_first=documents_first,
            language=state.language,
            theme_prompt=context.custom_prompt,
            detail=detail,
        )
    else:
        formatter = ChatitegoReActFormatter(
            system_header=system_header(state.language, detail, with_context=bool(context.prompt)),
            context=context.prompt,
        )
    agent = ChatitegoReActAgent(
        name="chatitego",
        tools=list(tools),
        llm=llm if llm is not None else _PlaceholderLLM.instance(),
        formatter=formatter,
        streaming=True,
        timeout=turn_timeout_s(config),
    )
    agent.configure_turn(
        state, retry_policy=retry_policy(config, llm), tool_timeout_s=config.tool_timeout_s
    )
    return agent


def new_turn_state(config: AppConfig, language: Language) -> TurnState:
    return TurnState(
        language=language,
        max_steps=config.max_steps,
        max_consecutive_retries=config.max_consecutive_retries,
    )


class _PlaceholderLLM:
    """Stands in for the LLM until the first turn builds the configured one."""

    _instance: LLM | None = None

    @classmethod
    def instance(cls) -> LLM:
        if cls._instance is None:
            from llama_index.core.llms.mock import MockLLM

            cls._instance = MockLLM()
        return cls._instance
