"""Shaping one step of model output before it reaches the raw stream and the agent.

Two jobs, both chunk-boundary safe (a partial line that may still become a
marker is held back until it is decided):

- cut what the model must not be believed for: an ``Observation:`` it wrote
  itself (the real tool has not run yet) and any protocol line written after
  its answer. Stop sequences do this server-side where the LLM supports them;
  this is the client-side guarantee.
- after an Observation, a step that starts without a marker would be glued to
  the observation by any reader of the raw stream. Such a step is held back and
  given the marker the agent will read it with: ``Thought:`` when a marker
  follows later, ``Answer:`` when the text has none.
"""

from __future__ import annotations

from engine.markers import PROTOCOL_TYPES, PartialLine, classify_partial_line, is_fence
from engine.markers import match_marker
from engine.types import ReActType


class StepShaper:
    """Filter the deltas of one LLM call; ``kept_text`` is what the agent parses."""

    def __init__(self, *, needs_leading_marker: bool = False) -> None:
        self._buffering = needs_leading_marker  # undecided, or holding a marker-less step
        self._pending = ""  # raw text while buffering
        self._held = ""  # start of the current line, not yet decided
        self._line_open = False  # the current line's start was decided and forwarded
        self._kept: list[str] = []
        self._seen_closing = False
        self._in_answer_fence = False
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
            text, self._pending = self._pending.strip("\n"), ""
            self._buffering = False
            if not text.strip():
                return ""
            prefix = "Thought: " if _has_marker_line(text) else "Answer: "
            return self._shape(prefix + text, final=True)
        if self.cut:
            return ""
        return self._shape("", final=True)

    # --- internals --------------------------------------------------------
    def _try_leave_buffering(self) -> str:
        stripped = self._pending.lstrip()
        if not stripped:
            return ""
        first_line, newline, _ = stripped.partition("\n")
        if newline:
            starts_with_marker = match_marker(first_line) is not None
        else:
            state = classify_partial_line(first_line)
            if state is PartialLine.MAYBE:
                return ""
            starts_with_marker = state is PartialLine.MARKER
        if not starts_with_marker:
            return ""  # hold the whole step; finish() gives it its marker
        self._buffering = False
        text, self._pending = self._pending.lstrip("\n"), ""
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
                if classify_partial_line(line) is PartialLine.MAYBE:
                    self._held = line
                    break
                self._line_open = True  # the rest of this line cannot change the decision
            if self._line_start_allowed(line):
                self._emit(out, line + newline)
            text = rest
        return "".join(out)

    def _emit(self, out: list[str], text: str) -> None:
        out.append(text)
        self._kept.append(text)

    def _line_start_allowed(self, line: str) -> bool:
        if self._seen_closing and is_fence(line):
            self._in_answer_fence = not self._in_answer_fence
            return True
        marker = None if self._in_answer_fence else match_marker(line)
        if marker is None:
            return True
        kind = marker[0]
        if kind is ReActType.OBSERVATION:
            self._stop("fabricated_observation")
            return False
        if self._seen_closing and kind in PROTOCOL_TYPES:
            self._stop("text_after_answer")
            return False
        if kind.is_closing:
            self._seen_closing = True
        return True

    def _stop(self, reason: str) -> None:
        self.cut = True
        self.cut_reason = reason
        self._held = ""
        self._line_open = False


def _has_marker_line(text: str) -> bool:
    return any(match_marker(line) is not None for line in text.split("\n"))
