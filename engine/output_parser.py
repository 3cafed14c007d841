"""Agent-side parser: one complete step of model output -> a llama-index reasoning step.

It segments the text with the same rules as ``ReActStreamParser`` (so the
client display and the agent never disagree) and replaces llama-index's
``ReActOutputParser``. A malformed step never raises ``ValueError``: it raises
``RetryException`` with a message that tells the model how to fix its output.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

import dirtyjson  # type: ignore[import-untyped]
from llama_index.core.agent.react.output_parser import ReActOutputParser
from llama_index.core.agent.react.types import (
    ActionReasoningStep,
    BaseReasoningStep,
    ResponseReasoningStep,
)

from engine.errors import RetryException
from engine.stream_parser import ReActStreamParser
from engine.types import ReActBlock, ReActType

# Key under which a non-JSON Action Input is passed on; the agent maps it onto
# the tool's single parameter when that is unambiguous.
RAW_INPUT_KEY = "__raw_input__"

FORMAT_REMINDER = (
    "Use exactly one of these two formats:\n"
    "Thought: <your reasoning>\n"
    "Action: <tool name>\n"
    'Action Input: <JSON object, e.g. {"expression": "2 * 3"}>\n'
    "or\n"
    "Thought: <your reasoning>\n"
    "Answer: <your final answer to the user>"
)

# A tool name starts with a letter (any script: "加法" is a name) or an underscore.
_ACTION_NAME = re.compile(r"[^\W\d][\w.\-]*")
_INLINE_ARGS = re.compile(r"^[^\s(\[{]+\s*[(\[](?P<args>.*)[)\]]\s*$", re.DOTALL)


class TolerantReActOutputParser(ReActOutputParser):
    """ReAct output parser that accepts real models' variants and teaches on errors."""

    def parse(self, output: str, is_streaming: bool = False) -> BaseReasoningStep:
        """Parse a whole step; raise ``RetryException`` when it cannot be used."""
        blocks = ReActStreamParser.parse(output).blocks
        return step_from_blocks(blocks, is_streaming=is_streaming)


def step_from_blocks(blocks: list[ReActBlock], *, is_streaming: bool = False) -> BaseReasoningStep:
    """Build the reasoning step from the blocks of one step of model output."""
    # Anything after a fabricated Observation was invented by the model.
    for i, block in enumerate(blocks):
        if block.type is ReActType.OBSERVATION:
            blocks = blocks[:i]
            break
    if not any(b.content for b in blocks):
        raise RetryException("Your previous response was empty. " + FORMAT_REMINDER)

    thoughts: list[str] = []
    for i, block in enumerate(blocks):
        if block.type is ReActType.THOUGHT:
            thoughts.append(block.content)
        elif block.type.is_closing:
            return _response_step(thoughts, block, is_streaming)
        elif block.type in (ReActType.ACTION, ReActType.TOOL_CALL):
            return _action_step(thoughts, block, blocks[i + 1 :])
        elif block.type is ReActType.ACTION_INPUT:
            raise RetryException(
                "You wrote an Action Input without an Action line before it. "
                "Write 'Action: <tool name>' first. " + FORMAT_REMINDER
            )
    raise RetryException(
        "You wrote a Thought but neither an Action nor an Answer. "
        "Call a tool with Action/Action Input, or give your final answer with "
        "'Answer:'. " + FORMAT_REMINDER
    )


def _response_step(
    thoughts: list[str], block: ReActBlock, is_streaming: bool
) -> ResponseReasoningStep:
    if not block.content:
        raise RetryException("Your Answer was empty. Write the answer to the user after 'Answer:'.")
    thought = " ".join(t for t in thoughts if t) or "(implicit) I can answer now."
    return ResponseReasoningStep(thought=thought, response=block.content, is_streaming=is_streaming)


def _action_step(
    thoughts: list[str], action: ReActBlock, following: list[ReActBlock]
) -> ActionReasoningStep:
    first_line = action.content.split("\n", 1)[0].strip()
    cleaned = first_line.strip("`*'\" ")
    name_match = _ACTION_NAME.match(cleaned)
    if name_match is None:
        raise RetryException(
            f"'Action: {first_line}' does not name a tool. Write only the tool name "
            "after 'Action:', e.g. 'Action: calculate'. " + FORMAT_REMINDER
        )
    name = name_match.group(0).rstrip(".-")
    raw_input: str | None = None
    for block in following:
        if block.type is ReActType.ACTION_INPUT:
            raw_input = block.content
            break
        if block.type is not ReActType.THOUGHT:
            break
    if raw_input is None:
        inline = _INLINE_ARGS.match(cleaned)
        if inline is not None:
            raw_input = inline.group("args")
        elif "\n" in action.content and action.content.split("\n", 1)[1].strip():
            raw_input = action.content.split("\n", 1)[1]
    if raw_input is None:
        raise RetryException(
            f"You wrote 'Action: {name}' without an 'Action Input:' line. Add it, with "
            'a JSON object of arguments, e.g. Action Input: {"expression": "2 * 3"}; '
            "if the tool takes no argument write Action Input: {}."
        )
    thought = " ".join(t for t in thoughts if t) or f"I will use {name}."
    return ActionReasoningStep(
        thought=thought, action=name, action_input=parse_action_input(raw_input)
    )


def parse_action_input(raw: str) -> dict[str, Any]:
    """Parse an Action Input into a dict; non-JSON text goes under ``RAW_INPUT_KEY``."""
    text = _strip_fences(raw).strip()
    if not text:
        return {}
    start, end = text.find("{"), text.rfind("}")
    if start != -1 and end > start:
        candidate = text[start : end + 1]
        parsed = _load_object(candidate)
        if parsed is not None:
            return parsed
        raise RetryException(
            f"The Action Input is not valid JSON: {candidate[:200]!r}. Write a JSON object "
            'with double quotes, e.g. {"expression": "2 * 3"}.'
        )
    if text.startswith("{"):
        # An object that never closes (a forgotten brace, a truncated output) is not
        # plain text for the tool's single argument: the model must rewrite it.
        raise RetryException(
            f"The Action Input is not valid JSON (the object is not closed): {text[:200]!r}. "
            'Write a complete JSON object with double quotes, e.g. {"expression": "2 * 3"}.'
        )
    return {RAW_INPUT_KEY: text.strip("`'\" ")}


def _load_object(candidate: str) -> dict[str, Any] | None:
    loaders = (json.loads, dirtyjson.loads, ast.literal_eval)
    for load in loaders:
        try:
            value = load(candidate)
        except Exception:  # noqa: BLE001 - each loader fails in its own way; try the next
            continue
        if isinstance(value, dict):
            return {str(k): _plain(v) for k, v in value.items()}
    return None


def _plain(value: Any) -> Any:
    # dirtyjson returns AttributedDict/AttributedList: make them plain for pydantic.
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _strip_fences(text: str) -> str:
    lines = [line for line in text.split("\n") if not line.strip().startswith(("```", "~~~"))]
    return "\n".join(lines)
