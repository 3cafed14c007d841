"""Shaping one step of model output before it reaches the raw stream and the agent.

Two jobs, both chunk-boundary safe (a partial line that may still become a
marker is held back until it is decided):

- cut what the model must not be believed for: an ``Observation:`` it wrote
  itself (the real tool has not run yet), an answer written after its action
  (the agent runs the action) and any protocol line written after its answer.
  Stop sequences do this server-side where the LLM supports them; this is the
  client-side guarantee. Code fences follow ``ReActStreamParser``'s rules, so
  a marker-looking line is cut exactly when the parser would read a marker: a
  fence line is held until the next line tells scaffolding from code.
- after an Observation, a step that starts without a marker would be glued to
  the observation by any reader of the raw stream. Such a step is held back and
  given the marker the agent will read it with: ``Thought:`` when a marker
  follows later, ``Answer:`` when the text has none.
"""

from __future__ import annotations

import re

from engine.markers import (
    PROTOCOL_TYPES,
    PartialLine,
    classify_partial_line,
    is_fence,
    match_marker,
)
from engine.types import ReActType


class StepShaper:
    """Filter the deltas of one LLM call; ``kept_text`` is what the agent parses."""

    def __init__(self, *, needs_leading_marker: bool = False) -> None:
        self._buffering = needs_leading_marker  # undecided, or holding a marker-less step
        self._pending = ""  # raw text while buffering
        self._held = ""  # start of the current line, not yet decided
        self._line_open = False  # the current line's start was decided and forwarded
        self._kept: list[str] = []
        self._hold_step = False  # buffering, and the step does not start with a marker
        self._seen_closing = False
        self._seen_action = False
        self._fence_lines: list[str] = []  # a fence line (and blank lines) held back
        self._in_code = False  # inside a code block: nothing is a marker
        self._in_scaffold = False  # inside a fence that wraps the protocol
        self.cut = False
        self.cut_reason: str | None = None

    @property
    def kept_text(self) -> str:
        """The text forwarded so far: what the model is taken to have said."""
        return "".join(self._kept)

    def feed(self, delta: str) -> str:
        """Return the part of ``delta`` that can be forwarded now."""
        if self.cut or not delta:
            return ""
        if self._buffering:
            self._pending += delta
            return self._try_leave_buffering()
        return self._shape(delta, final=False)

    def finish(self) -> str:
        """End of the LLM call: return whatever is still held back."""
        if self._buffering:
            text, self._pending = self._pending.strip("\r\n"), ""
            self._buffering = False
            if not text.strip():
                return ""
            if _leading_marker(text.split("\n"), final=True):
                prefix = ""  # the stream ended while its first line was still undecided
            else:
                prefix = "Thought:" if _has_marker_line(text) else "Answer:"
                # A fence must stay alone on its line to remain a fence.
                prefix += "\n" if is_fence(text.split("\n", 1)[0]) else " "
            return self._shape(prefix + text, final=True)
        if self.cut:
            return ""
        return self._shape("", final=True)

    # --- internals --------------------------------------------------------
    def _try_leave_buffering(self) -> str:
        if self._hold_step:
            return ""
        starts_with_marker = _leading_marker(self._pending.split("\n"), final=False)
        if starts_with_marker is None:
            return ""  # undecided yet
        if not starts_with_marker:
            self._hold_step = True
            return ""  # hold the whole step; finish() gives it its marker
        self._buffering = False
        text, self._pending = self._pending.lstrip("\r\n"), ""
        return self._shape(text, final=False)

    def _shape(self, delta: str, *, final: bool) -> str:
        out: list[str] = []
        text, self._held = self._held + delta, ""
        while text and not self.cut:
            if self._line_open:
                chunk, newline, text = text.partition("\n")
                self._emit(out, chunk + newline)
                self._line_open = not newline
                continue
            line, newline, rest = text.partition("\n")
            if not newline and not final:
                if self._undecided(line):
                    self._held = line
                    break
                self._line_open = True  # the rest of this line cannot change the decision
            self._on_line_start(out, line, line + newline)
            text = rest
        if final and not self.cut:
            self._emit(out, "".join(self._fence_lines))
            self._fence_lines = []
        return "".join(out)

    def _on_line_start(self, out: list[str], line: str, segment: str) -> None:
        """Forward, hold or cut at a line whose start is decided (``segment``: what came)."""
        if self._in_code:
            self._emit(out, segment)
            self._in_code = not is_fence(line)
            return
        if is_fence(line):
            if self._fence_lines:  # two fences in a row: a code block opens and closes
                self._emit(out, "".join(self._fence_lines) + segment)
                self._fence_lines = []
            else:
                self._fence_lines = [segment]  # scaffolding or code? the next line tells
            return
        if self._fence_lines and not line.strip():
            self._fence_lines.append(segment)
            return
        marker = self._effective_marker(line)
        held, self._fence_lines = "".join(self._fence_lines), []
        if held:
            if self._fence_is_scaffold(marker is not None):
                self._in_scaffold = not self._in_scaffold
            else:
                self._in_code = True  # the held fence opens a code block; this line is code
                self._emit(out, held + segment)
                return
        if self._line_allowed(marker):
            self._emit(out, held + segment)

    def _effective_marker(self, line: str) -> tuple[ReActType, str] | None:
        """The marker that starts a block at ``line``, as ``ReActStreamParser`` reads it."""
        marker = match_marker(line)
        if marker is not None and self._seen_closing and marker[0] not in PROTOCOL_TYPES:
            return None  # "Conclusion: ..." inside an answer is prose
        return marker

    def _fence_is_scaffold(self, before_marker: bool) -> bool:
        # Same rule as ReActStreamParser._fence_is_scaffold.
        if self._in_scaffold and before_marker:
            return True
        if self._seen_closing:
            return False
        return before_marker

    def _undecided(self, partial: str) -> bool:
        """Whether the start of this line may still change how the line is treated."""
        if not partial.strip():
            return True  # a blank line or not: it matters after a held fence
        state = classify_partial_line(partial)
        if state is PartialLine.MAYBE:
            return True
        if state is PartialLine.MARKER and not self._in_code:
            # "Action Input: `" may become "Action Input: ```json", which opens code.
            marker = self._effective_marker(partial)
            return marker is not None and _FENCE_START.fullmatch(marker[1]) is not None
        return False

    def _emit(self, out: list[str], text: str) -> None:
        if text:
            out.append(text)
            self._kept.append(text)

    def _line_allowed(self, marker: tuple[ReActType, str] | None) -> bool:
        if marker is None:
            return True
        kind, rest = marker
        if kind is ReActType.OBSERVATION:
            self._stop("fabricated_observation")
            return False
        if self._seen_closing and kind in PROTOCOL_TYPES:
            self._stop("text_after_answer")
            return False
        if kind.is_closing:
            if self._seen_action:
                # The tool has not run yet: an answer now is invented, and the
                # agent will run the action anyway.
                self._stop("answer_after_action")
                return False
            self._seen_closing = True
        if kind in _ACTION_TYPES:
            self._seen_action = True
        self._in_code = is_fence(rest)  # "Action Input: ```json" opens a code block
        return True

    def _stop(self, reason: str) -> None:
        self.cut = True
        self.cut_reason = reason
        self._held = ""
        self._line_open = False
        self._fence_lines = []


_FENCE_START = re.compile(r"(?:(?:`{1,3}|~{1,3})[\w+-]*)?")
_ACTION_TYPES = frozenset({ReActType.ACTION, ReActType.ACTION_INPUT, ReActType.TOOL_CALL})


def _has_marker_line(text: str) -> bool:
    return any(match_marker(line) is not None for line in text.split("\n"))


def _leading_marker(lines: list[str], *, final: bool) -> bool | None:
    """Whether the step starts with a marker line, after blank lines and at most one fence.

    A fence directly followed by a marker is scaffolding around the protocol
    (``ReActStreamParser`` reads it so). ``lines[-1]`` is the incomplete last line
    unless ``final``. None: not known yet.
    """
    *complete, partial = lines
    if final:
        complete, partial = lines, ""
    fence_seen = False
    for line in complete:
        if not line.strip():
            continue
        if is_fence(line) and not fence_seen:
            fence_seen = True
            continue
        return match_marker(line) is not None
    if not partial.strip():
        return None if not final else False
    state = classify_partial_line(partial)
    if state is PartialLine.MAYBE:
        return None
    return state is PartialLine.MARKER
