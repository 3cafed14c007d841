"""StreamlitChatTracer: shows a turn's ReAct blocks live, from the engine's typed events.

The engine's ``stream_events`` say what each piece of the turn is (a block
starting, growing, complete); the tracer paints them as they come
(``trace_events``):

- Thought / Action / Observation in a collapsible reasoning panel
  (``st.status``), each type with its own colour and label (``render_block``);
- the final answer below it, as Markdown (``render_answer``).

Nothing from the model is passed as HTML. Repaints of the block being written
are throttled (``min_interval_s``); a completed block is always painted.

A client of the raw text alone (``trace``/``render``, kept for it) gets the
same panel: the tracer then segments the text with ``ReActStreamParser``, as
the engine does for its events.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.stream_events import BlockDelta, BlockEnd, BlockStart, StreamEvent
from engine.stream_parser import ReActStreamParser
from engine.types import ReActBlock, ReActType
from tracer.async_bridge import iterate_sync
from tracer.render import DisplayMode, is_visible, render_answer, render_block
from tracer.ui_text import text

_CURSOR = " ▌"


def count_steps(blocks: Sequence[ReActBlock]) -> int:
    """Reasoning steps of a turn: one per Thought."""
    return sum(1 for b in blocks if b.type is ReActType.THOUGHT)


def _panel_label(language: str, steps: int) -> str:
    return text(language, "reasoning_done", n=steps) if steps else text(language, "reasoning")


@dataclass
class TracedTurn:
    """What the tracer showed: the clean final answer and every block."""

    answer: str
    blocks: list[ReActBlock] = field(default_factory=list)
    complete: bool = False  # the stream ran to its end

    @property
    def steps(self) -> int:
        return count_steps(self.blocks)


class StreamlitChatTracer:
    """Paint one turn's raw stream into a Streamlit container (a ``st.chat_message``)."""

    def __init__(
        self,
        container: Any,
        *,
        mode: DisplayMode = DisplayMode.EVERYTHING,
        language: str = "fr",
        min_interval_s: float = 0.05,
    ) -> None:
        self.container = container
        self.mode = mode
        self.language = language
        self.min_interval_s = min_interval_s
        self._parser = ReActStreamParser()
        self._blocks: list[ReActBlock] = []  # completed, in order
        self._live_type = ReActType.UNKNOWN  # the block being written, from the events
        self._live_content = ""
        self._panel: Any = None
        self._live: Any = None  # placeholder of the reasoning block being written
        self._answer: Any = None
        self._last_paint = 0.0
        self._painted_answer = ""

    # --- public ------------------------------------------------------------------------
    def trace_events(self, events: AsyncIterator[StreamEvent]) -> TracedTurn:
        """Consume the engine's async event stream (always closed) and paint it."""
        items = iterate_sync(events, on_wait=self._on_wait)
        try:
            return self.render_events(items)
        finally:
            items.close()  # at once, even when Streamlit stops the script mid-stream

    def render_events(self, events: Iterable[StreamEvent]) -> TracedTurn:
        """Paint a turn's typed events; returns the final answer and the blocks."""
        self._open()
        complete = False
        try:
            for event in events:
                if isinstance(event, BlockEnd):
                    self._paint_completed(event.block)
                elif isinstance(event, BlockStart):
                    self._live_type, self._live_content = event.type, event.text
                    self._paint_current(self._live_block())
                elif isinstance(event, BlockDelta):
                    self._live_content += event.text
                    self._paint_current(self._live_block())
            complete = True
        finally:
            self._close(complete)
        return TracedTurn(self._final_answer(), list(self._blocks), complete)

    def trace(self, stream: AsyncIterator[str]) -> TracedTurn:
        """Consume the engine's async stream (always closed) and paint it."""
        deltas = iterate_sync(stream, on_wait=self._on_wait)
        try:
            return self.render(deltas)
        finally:
            deltas.close()  # at once, even when Streamlit stops the script mid-stream

    def render(self, deltas: Iterable[str]) -> TracedTurn:
        """Paint a stream of raw text deltas; returns the final answer and the blocks."""
        self._open()
        complete = False
        try:
            for delta in deltas:
                for block in self._parser.feed(delta):
                    self._paint_completed(block)
                self._paint_current(self._parser.current)
            for block in self._parser.flush():
                self._paint_completed(block)
            complete = True
        finally:
            self._close(complete)
        return TracedTurn(self._final_answer(), list(self._blocks), complete)

    @staticmethod
    def replay(
        container: Any, blocks: Sequence[ReActBlock], *, mode: DisplayMode, language: str
    ) -> None:
        """Show a past turn's reasoning, collapsed (the answer is shown by the page)."""
        visible = [b for b in blocks if is_visible(b.type, mode)]
        if not visible:
            return
        label = _panel_label(language, count_steps(blocks))
        panel = container.expander(label, expanded=False, icon=":material/psychology:")
        for block in visible:
            panel.markdown(render_block(block, language))

    # --- painting ----------------------------------------------------------------------
    def _open(self) -> None:
        if self.mode is not DisplayMode.ANSWER_ONLY:
            self._panel = self.container.status(text(self.language, "thinking"), expanded=True)
            self._live = self._panel.empty()
        self._answer = self.container.empty()
        if self._panel is None:
            self._answer.caption(text(self.language, "thinking"))

    def _on_wait(self, waited_s: float) -> None:
        # Runs while the model is silent (a slow first token): shows life, and gives
        # Streamlit a call in which to deliver a user's "stop".
        label = text(self.language, "thinking_for", s=int(waited_s))
        if self._panel is not None:
            self._panel.update(label=label)
        elif self._answer is not None and not self._painted_answer:
            self._answer.caption(label)

    def _live_block(self) -> ReActBlock | None:
        if self._live_type is ReActType.UNKNOWN and not self._live_content:
            return None
        return ReActBlock(self._live_type, self._live_content)

    def _paint_completed(self, block: ReActBlock) -> None:
        self._blocks.append(block)
        self._live_type, self._live_content = ReActType.UNKNOWN, ""
        if block.type.is_closing:
            self._paint_answer(block.content, final=True)
            return
        if self._panel is None or not is_visible(block.type, self.mode):
            return
        self._live.markdown(render_block(block, self.language))
        self._live = self._panel.empty()
        self._last_paint = time.monotonic()

    def _paint_current(self, current: ReActBlock | None) -> None:
        now = time.monotonic()
        if now - self._last_paint < self.min_interval_s:
            return
        if current is None or current.type is ReActType.UNKNOWN:
            return
        if current.type.is_closing:
            self._paint_answer(current.content, final=False)
        elif self._panel is not None and is_visible(current.type, self.mode):
            partial = ReActBlock(current.type, current.content)
            self._live.markdown(render_block(partial, self.language) + _CURSOR)
        self._last_paint = now

    def _paint_answer(self, content: str, *, final: bool) -> None:
        text = render_answer(content.strip())
        if not final:
            text += _CURSOR
        if text != self._painted_answer:
            self._answer.markdown(text)
            self._painted_answer = text

    def _close(self, complete: bool) -> None:
        if self._live is not None:
            self._live.empty()
        if self._painted_answer.endswith(_CURSOR):
            self._paint_answer(self._final_answer(), final=True)
        if self._panel is None:
            return
        if complete:
            label = _panel_label(self.language, count_steps(self._blocks))
            state = "complete"
        else:
            label, state = text(self.language, "reasoning_interrupted"), "error"
        self._panel.update(label=label, state=state, expanded=False)

    def _final_answer(self) -> str:
        for block in reversed(self._blocks):
            if block.type.is_closing:
                return block.content.strip()
        return ""
