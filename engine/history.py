"""Conversation history from the caller: cleaned and compressed before each turn.

The engine is stateless: the page sends the whole history (OpenAI style
``{"role", "content"}``) before every prompt. Assistant messages keep only
their final answer (never old Thought/Action scaffolding, which would teach
the model to copy it), long messages are shortened in the middle, and the
oldest messages go first when the budget is exceeded.

An assistant message may carry ``"stop_reason": "waiting_for_user"``: it was
an ``ask_user`` question, and the next prompt is the user's reply to it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llama_index.core.llms import ChatMessage, MessageRole

from engine.observations import clean_text
from engine.stream_parser import ReActStreamParser
from engine.types import StopReason

logger = logging.getLogger(__name__)

_ROLES = {"user": MessageRole.USER, "assistant": MessageRole.ASSISTANT}


@dataclass(frozen=True)
class PreparedHistory:
    """History ready for the agent, and a pending ``ask_user`` question if any."""

    messages: list[ChatMessage]
    pending_question: str | None = None
    pending_task: str | None = None

    @property
    def waiting_for_user(self) -> bool:
        return self.pending_question is not None


def prepare_history(
    raw: Sequence[Mapping[str, Any]] | None,
    *,
    max_messages: int = 12,
    max_chars: int = 6000,
) -> PreparedHistory:
    """Clean then compress an OpenAI-style history."""
    if raw is None:
        return PreparedHistory(messages=[])
    if isinstance(raw, (str, bytes)) or not isinstance(raw, Sequence):
        raise TypeError("history must be a list of {'role': ..., 'content': ...} dicts")
    cleaned = [m for m in (_clean_message(item) for item in raw) if m is not None]
    pending_question = pending_task = None
    if cleaned and cleaned[-1][2] == StopReason.WAITING_FOR_USER.value:
        pending_question = cleaned[-1][1]
        task_index = _last_user_index(cleaned[:-1])
        if task_index is not None:
            pending_task = cleaned[task_index][1]
            cleaned = cleaned[:task_index]
        else:
            cleaned = cleaned[:-1]
    messages = [ChatMessage(role=_ROLES[role], content=text) for role, text, _ in cleaned]
    return PreparedHistory(
        messages=compress(messages, max_messages=max_messages, max_chars=max_chars),
        pending_question=pending_question,
        pending_task=pending_task,
    )


def _clean_message(item: Any) -> tuple[str, str, str | None] | None:
    if not isinstance(item, Mapping):
        logger.warning("history entry ignored: not a mapping (%s)", type(item).__name__)
        return None
    role, content = item.get("role"), item.get("content")
    if role not in _ROLES or not isinstance(content, str):
        if role != "system":
            logger.warning("history entry ignored: role=%r", role)
        return None
    text = clean_text(content).strip()
    if role == "assistant":
        text = answer_only(text)
    if not text:
        return None
    stop_reason = item.get("stop_reason")
    return role, text, stop_reason if isinstance(stop_reason, str) else None


def answer_only(text: str) -> str:
    """The final answer of an assistant message that may contain ReAct scaffolding.

    Plain text is its own answer. Scaffolding with no answer (an interrupted
    turn: Thought/Action only) gives "", so that the message is dropped rather
    than teaching the model to copy old Thought/Action lines.
    """
    answer = ReActStreamParser.parse(text).get_final_answer()
    return answer if answer is not None else ""


def _last_user_index(items: list[tuple[str, str, str | None]]) -> int | None:
    for i in range(len(items) - 1, -1, -1):
        if items[i][0] == "user":
            return i
    return None


def compress(
    messages: list[ChatMessage], *, max_messages: int, max_chars: int
) -> list[ChatMessage]:
    """Keep the most recent messages within a message count and a character budget."""
    recent = messages[-max_messages:] if max_messages else []
    per_message = max(200, max_chars // 3)
    shortened = [
        ChatMessage(role=m.role, content=_shorten(m.content or "", per_message)) for m in recent
    ]
    kept: list[ChatMessage] = []
    total = 0
    for msg in reversed(shortened):
        size = len(msg.content or "")
        if total + size > max_chars:
            break
        kept.append(msg)
        total += size
    kept.reverse()
    # A history that starts with an answer confuses chat templates: start on a question.
    while kept and kept[0].role != MessageRole.USER:
        kept.pop(0)
    return kept


def _shorten(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = (limit - 7) // 2
    return f"{text[:half]} […] {text[-half:]}"
