"""Typed events of a turn, and the raw ReAct text as one view over them.

``ReActEngine.stream_events`` yields, in order:

- ``RawText``: a piece of the raw ReAct text, exactly as ``stream`` yields it;
- after it, what the engine's parser decided from that text: ``BlockEnd`` for
  each block it completed, then ``BlockStart`` when a new block is being
  written and ``BlockDelta`` as its content grows (a client shows it live);
- ``ToolCall``, ``Observation`` and ``Sources`` when a tool ran: typed at the
  source (the agent's tool result), never read back from the text;
- ``TurnEnd`` with the turn's outcome, last.

Invariant: the ``BlockEnd`` blocks are those of ``ReActStreamParser.parse`` over
the concatenated ``RawText``, whatever the chunking; the text of the
last ``BlockStart`` and the ``BlockDelta`` after it is the content of the
parser's ``current`` block. Observation lines keep their no-break spaces (see
``engine.raw_stream.inert``) in the raw text: the engine segments that text
itself, and stored conversations are replayed by parsing it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

from engine.stream_parser import ReActStreamParser
from engine.types import ReActBlock, ReActType, Source, TurnOutcome


@dataclass(frozen=True)
class RawText:
    """A piece of the turn's raw ReAct text."""

    text: str


@dataclass(frozen=True)
class BlockStart:
    """A block of this type is being written, ``text`` so far (``UNKNOWN``: not decided yet).

    The text comes with the start so that a client paints the new block once.
    """

    type: ReActType
    text: str = ""


@dataclass(frozen=True)
class BlockDelta:
    """The open block's content grew by ``text``."""

    text: str


@dataclass(frozen=True)
class BlockEnd:
    """A block is complete: its type and its clean content."""

    block: ReActBlock


@dataclass(frozen=True)
class ToolCall:
    """The agent called a tool with these (checked) arguments."""

    name: str
    args: Mapping[str, Any]


@dataclass(frozen=True)
class Observation:
    """A tool's result, as the model reads it."""

    tool: str
    text: str
    is_error: bool = False


@dataclass(frozen=True)
class Sources:
    """Passages a tool result cited for the first time in this turn."""

    sources: tuple[Source, ...]


@dataclass(frozen=True)
class TurnEnd:
    """The turn is over; ``outcome`` is also ``ReActEngine.last_outcome``."""

    outcome: TurnOutcome


StreamEvent = (
    RawText | BlockStart | BlockDelta | BlockEnd | ToolCall | Observation | Sources | TurnEnd
)


class BlockTracker:
    """The block events of a raw text, fed piece by piece."""

    def __init__(self) -> None:
        self._parser = ReActStreamParser()
        self._open: ReActBlock | None = None  # the live block as last announced

    def feed(self, text: str) -> list[StreamEvent]:
        events: list[StreamEvent] = [BlockEnd(b) for b in self._parser.feed(text)]
        if events:
            self._open = None
        return events + self._live_events()

    def flush(self) -> list[StreamEvent]:
        self._open = None
        return [BlockEnd(b) for b in self._parser.flush()]

    def _live_events(self) -> list[StreamEvent]:
        current = self._parser.current
        if current is None or current == self._open:
            return []
        previous, self._open = self._open, current
        if (
            previous is not None
            and previous.type is current.type
            and current.content.startswith(previous.content)
        ):
            return [BlockDelta(current.content[len(previous.content) :])]
        # A new block, or one whose shown text changed (a held fence became code).
        return [BlockStart(current.type, current.content)]


async def with_block_events(events: AsyncIterator[StreamEvent]) -> AsyncIterator[StreamEvent]:
    """``events`` with the block events of their raw text; closes ``events`` when closed."""
    tracker = BlockTracker()
    try:
        async for event in events:
            if isinstance(event, TurnEnd):
                for block_event in tracker.flush():
                    yield block_event
            yield event
            if isinstance(event, RawText):
                for block_event in tracker.feed(event.text):
                    yield block_event
    finally:
        await _aclose(events)


async def raw_text(events: AsyncIterator[StreamEvent]) -> AsyncIterator[str]:
    """The raw ReAct text of a turn's events (what ``ReActEngine.stream`` yields)."""
    try:
        async for event in events:
            if isinstance(event, RawText):
                yield event.text
    finally:
        await _aclose(events)


async def _aclose(events: AsyncIterator[Any]) -> None:
    # A turn records a cancelled outcome when it is closed: close it now, not at
    # garbage collection.
    aclose = getattr(events, "aclose", None)
    if aclose is not None:
        await aclose()
