"""ReAct prompt formatting: llama-index's formatter plus the Finalizer's injected Thoughts."""

from __future__ import annotations

import json
from collections.abc import Sequence

from llama_index.core.agent.react.formatter import ReActChatFormatter
from llama_index.core.agent.react.types import (
    ActionReasoningStep,
    BaseReasoningStep,
    ObservationReasoningStep,
)
from llama_index.core.llms import ChatMessage, MessageRole
from llama_index.core.tools import BaseTool


class InjectedThoughtStep(BaseReasoningStep):
    """A corrective Thought added by the orchestrator, not written by the model."""

    thought: str

    def get_content(self) -> str:
        return f"Thought: {self.thought}"

    @property
    def is_done(self) -> bool:
        return False


class ChatitegoReActFormatter(ReActChatFormatter):
    """Like llama-index's, with two changes to the scratchpad.

    - An injected Thought travels with the observation before it, in the
      observation's (user) role: chat APIs such as Mistral's reject a
      conversation that ends with two assistant messages.
    - An Action Input is shown as JSON. llama-index prints the Python dict
      (``{'a': 1}``), which teaches the model the single quotes the system
      prompt forbids.
    """

    def format(
        self,
        tools: Sequence[BaseTool],
        chat_history: list[ChatMessage],
        current_reasoning: list[BaseReasoningStep] | None = None,
    ) -> list[ChatMessage]:
        head = super().format(tools, chat_history, [])
        tail: list[ChatMessage] = []
        for step in current_reasoning or []:
            if isinstance(step, InjectedThoughtStep):
                note = f"(Note) {step.get_content()}"
                if tail and tail[-1].role == self.observation_role:
                    tail[-1] = ChatMessage(
                        role=self.observation_role, content=f"{tail[-1].content}\n{note}"
                    )
                else:
                    tail.append(ChatMessage(role=self.observation_role, content=note))
                continue
            role = (
                self.observation_role
                if isinstance(step, ObservationReasoningStep)
                else MessageRole.ASSISTANT
            )
            tail.append(ChatMessage(role=role, content=step_content(step)))
        return [*head, *tail]


def step_content(step: BaseReasoningStep) -> str:
    """The scratchpad text of one reasoning step (Action Input as JSON)."""
    if isinstance(step, ActionReasoningStep):
        args = json.dumps(step.action_input, ensure_ascii=False, default=str)
        return f"Thought: {step.thought}\nAction: {step.action}\nAction Input: {args}"
    return step.get_content()
