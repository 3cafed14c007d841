"""How long a turn may take and how often a model call is retried, for a given model."""

from __future__ import annotations

from llama_index.core.llms import LLM

from config.settings import AppConfig
from engine.transport import RetryPolicy
from models.inprocess import is_in_process


def retry_policy(config: AppConfig, llm: LLM | None) -> RetryPolicy:
    """The retry policy of a model call with ``llm`` (``None``: not loaded yet, remote)."""
    c = config
    if is_in_process(llm):
        # A local model is never "unreachable": a slow first token is a long prompt
        # being read on a busy CPU, and a retry would only read it again.
        return RetryPolicy(
            max_attempts=1,
            total_budget_s=c.local_llm_turn_budget_s,
            first_token_timeout_s=c.local_llm_turn_budget_s,
            stall_timeout_s=max(c.llm_stall_timeout_s, 120.0),
            backoff_initial_s=c.llm_backoff_initial_s,
        )
    return RetryPolicy(
        max_attempts=c.llm_max_attempts,
        total_budget_s=c.llm_retry_budget_s,
        first_token_timeout_s=c.llm_timeout_s,
        stall_timeout_s=c.llm_stall_timeout_s,
        backoff_initial_s=c.llm_backoff_initial_s,
    )


def turn_timeout_s(config: AppConfig) -> float:
    """The workflow's timeout: every step may spend its whole model and tool budgets."""
    c = config
    budget = max(c.llm_retry_budget_s, c.local_llm_turn_budget_s)
    return (c.max_steps + 2) * (budget + c.tool_timeout_s)
