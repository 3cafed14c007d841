"""ReActFinalizer: the orchestration-level judge of a turn.

It sees only the typed blocks the engine yields, never the parser's internals.
It stops on a closing block (final answer, answer, response, conclusion) and
watches for reasoning going wrong: an empty observation, the same action
repeated, the model going in circles, too many steps. Its remedy is a
corrective Thought injected into the reasoning (in the user's language), not a
restart; when the remedies are used up it asks for a forced final answer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum

from engine.markers import is_fence
from engine.observations import is_empty_result
from engine.prompts import INJECTED_THOUGHTS, Language
from engine.types import ReActBlock, ReActType


class Verdict(Enum):
    CONTINUE = "continue"
    STOP = "stop"  # a closing block arrived: the turn is answered
    INJECT = "inject"  # add ``thought`` to the reasoning before the next step
    FORCE_FINAL = "force_final"  # the next model call must give the final answer


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    thought: str | None = None
    reason: str = ""


_CONTINUE = Decision(Verdict.CONTINUE)


class ReActFinalizer:
    """Decide, block by block, whether the reasoning goes on, is corrected, or ends."""

    def __init__(
        self,
        *,
        language: Language = "fr",
        max_steps: int = 8,
        max_injections: int = 3,
        circle_window: int = 4,
    ) -> None:
        self.language = language
        self.max_steps = max_steps
        self.max_injections = max_injections
        self.circle_window = circle_window
        self.injections = 0
        self.stopped = False
        self._last_action: str | None = None
        self._signatures: list[str] = []
        self._observations: list[str] = []
        self._warned_steps = False
        self._pending: tuple[str, str] | None = None  # (tool, signature) awaiting its result

    def observe(self, block: ReActBlock) -> Decision:
        """Judge one completed block."""
        if self.stopped:
            return _CONTINUE
        if block.type.is_closing:
            self.stopped = True
            return Decision(Verdict.STOP, reason=block.type.value)
        if block.type in (ReActType.ACTION, ReActType.TOOL_CALL):
            self._last_action = block.content
            self._pending = None
            return _CONTINUE
        if block.type is ReActType.ACTION_INPUT and self._last_action is not None:
            tool = self._last_action.split("\n", 1)[0]
            self._last_action = None
            self._pending = _signature(tool, block.content)
            return _CONTINUE
        if block.type is ReActType.OBSERVATION:
            if self._last_action is not None:
                # An action without an Action Input line ("Action: search[weather]").
                tool, _, raw_input = self._last_action.partition("\n")
                self._last_action = None
                self._pending = _signature(tool, raw_input)
            decision = self._on_action_ran()
            observed = self._on_observation(block.content, judge=decision is _CONTINUE)
            return decision if decision is not _CONTINUE else observed
        return _CONTINUE

    def _on_action_ran(self) -> Decision:
        # Judged only once its Observation arrives: an action refused before running
        # (a format retry) never counts as a call.
        if self._pending is None:
            return _CONTINUE
        tool, signature = self._pending
        self._pending = None
        repeated = signature in self._signatures
        self._signatures.append(signature)
        if repeated:
            return self._inject("repeated_action", tool=tool)
        return _CONTINUE

    def _on_observation(self, content: str, *, judge: bool = True) -> Decision:
        self._observations.append(content.strip())
        steps = len(self._observations)
        if not judge:
            return _CONTINUE  # this step already got a decision
        if not content.strip() or is_empty_result(content.strip()):
            return self._inject("empty_observation")
        recent = self._observations[-self.circle_window :]
        if len(recent) == self.circle_window and len(set(recent)) <= self.circle_window // 2:
            return self._inject("going_in_circles")
        if not self._warned_steps and steps >= max(2, self.max_steps - 2):
            self._warned_steps = True
            return self._inject("many_steps", steps=steps, max_steps=self.max_steps)
        return _CONTINUE

    def _inject(self, kind: str, **fields: object) -> Decision:
        if self.injections >= self.max_injections:
            return Decision(Verdict.FORCE_FINAL, reason=kind)
        self.injections += 1
        thought = INJECTED_THOUGHTS[kind][self.language].format(**fields)
        return Decision(Verdict.INJECT, thought=thought, reason=kind)


def _signature(tool: str, raw_input: str) -> tuple[str, str]:
    tool = tool.strip().strip("`*'\" ").strip()
    return tool, f"{tool}:{_canonical(raw_input)}"


def _canonical(raw_input: str) -> str:
    # Drop code-fence lines (```json ... ```) and inline backticks around the input.
    lines = [line for line in raw_input.split("\n") if not is_fence(line)]
    text = "\n".join(lines).strip().strip("`").strip()
    try:
        return json.dumps(json.loads(text), sort_keys=True)
    except ValueError:
        return " ".join(text.split())
