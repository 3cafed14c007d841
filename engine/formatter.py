"""ReAct prompt formatting: llama-index's formatter plus the Finalizer's injected Thoughts."""

from __future__ import annotations

from collections.abc import Sequence

from llama_index.core.agent.react.formatter import ReActChatFormatter
from llama_index.core.agent.react.types import BaseReasoningStep, ObservationReasoningStep
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
    """Like llama-index's, but an injected Thought travels with the observation before it.

    It is sent in the observation's (user) role: chat APIs such as Mistral's
    reject a conversation that ends with two assistant messages.
    """

    def format(
        self,
        tools: Sequence[BaseTool],
        chat_history: list[ChatMessage],
        current_reasoning: list[BaseReasoningStep] | None = None,
    ) -> list[ChatMessage]:
        reasoning = current_reasoning or []
        plain = [s for s in reasoning if not isinstance(s, InjectedThoughtStep)]
        messages = super().format(tools, chat_history, plain)
        if len(plain) == len(reasoning):
            return messages
        head = messages[: len(messages) - len(plain)]
        tail: list[ChatMessage] = []
        for step in reasoning:
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
            tail.append(ChatMessage(role=role, content=step.get_content()))
        return [*head, *tail]
