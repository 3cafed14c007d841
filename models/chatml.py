"""ChatML prompt formatting (Qwen and most current instruct GGUFs).

llama-index's ``LlamaCPP`` formats prompts Llama-2 style by default, which a
ChatML model reads as noise; these two functions replace that.
"""

from __future__ import annotations

from collections.abc import Sequence

from llama_index.core.llms import ChatMessage, MessageRole

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
_ROLE_NAMES = {
    MessageRole.SYSTEM: "system",
    MessageRole.USER: "user",
    MessageRole.ASSISTANT: "assistant",
    MessageRole.TOOL: "user",
    MessageRole.FUNCTION: "user",
}


def messages_to_prompt(messages: Sequence[ChatMessage]) -> str:
    """A ChatML conversation, ending with an open assistant turn."""
    parts = []
    for msg in messages:
        role = _ROLE_NAMES.get(msg.role, "user")
        parts.append(f"{IM_START}{role}\n{msg.content or ''}{IM_END}\n")
    parts.append(f"{IM_START}assistant\n")
    return "".join(parts)


def completion_to_prompt(completion: str) -> str:
    """A single user message in ChatML."""
    return messages_to_prompt([ChatMessage(role=MessageRole.USER, content=completion)])
