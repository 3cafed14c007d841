"""ReActEngine.stream_events: the typed events of a turn, and the tracer painting them."""

from __future__ import annotations

from typing import Any

import pytest

from engine import ReActEngine, ReActStreamParser, ReActType, StopReason
from engine.stream_events import (
    BlockDelta,
    BlockEnd,
    BlockStart,
    BlockTracker,
    Observation,
    RawText,
    StreamEvent,
    ToolCall,
    TurnEnd,
)
from tests.fakes import ScriptedLLM
from tests.test_engine_corpus import Toolbox, act, corpus_config
from tests.test_tracer_stream import TEXT, Recorder, chunked
from tracer.streamlit_tracer import StreamlitChatTracer


async def _events(script: list[Any], chunk_size: int = 5) -> tuple[list[StreamEvent], str]:
    llm = ScriptedLLM(script, chunk_size=chunk_size)
    engine = ReActEngine(config=corpus_config(), llm=llm, tools=Toolbox().tools())
    engine.start(language="en")
    events = [event async for event in engine.stream_events("What is 6*7?")]
    llm_again = ScriptedLLM(script, chunk_size=chunk_size)
    engine_again = ReActEngine(config=corpus_config(), llm=llm_again, tools=Toolbox().tools())
    engine_again.start(language="en")
    text = "".join([delta async for delta in engine_again.stream("What is 6*7?")])
    return events, text


def _semantic(events: list[StreamEvent]) -> list[Any]:
    """The events a client branches on: block ends, tool events, the end."""
    kept: list[Any] = []
    for event in events:
        if isinstance(event, BlockEnd):
            kept.append((event.block.type, event.block.content))
        elif isinstance(event, ToolCall):
            kept.append(("call", event.name, dict(event.args)))
        elif isinstance(event, Observation):
            kept.append(("observation", event.tool, event.text, event.is_error))
        elif isinstance(event, TurnEnd):
            kept.append(("end", event.outcome.stop_reason))
    return kept


async def test_the_events_of_a_tool_turn_are_the_expected_sequence() -> None:
    events, text = await _events([act("add", '{"a": 6, "b": 7}'), "Thought: I know.\nAnswer: 13"])
    assert _semantic(events) == [
        (ReActType.THOUGHT, "I need a tool."),
        (ReActType.ACTION, "add"),
        ("call", "add", {"a": 6, "b": 7}),
        ("observation", "add", "13", False),
        (ReActType.ACTION_INPUT, '{"a": 6, "b": 7}'),
        (ReActType.OBSERVATION, "13"),
        (ReActType.THOUGHT, "I know."),
        (ReActType.ANSWER, "13"),
        ("end", StopReason.ANSWERED),
    ]
    # stream() is the raw-text view: the same text, event for event.
    assert "".join(e.text for e in events if isinstance(e, RawText)) == text
    assert isinstance(events[-1], TurnEnd)
    assert events[-1].outcome.blocks == ReActStreamParser.parse(text).blocks


async def test_a_block_is_announced_before_it_grows() -> None:
    events, _ = await _events(["Thought: I know it.\nAnswer: forty-two"], chunk_size=3)
    kinds = [type(e) for e in events if isinstance(e, BlockStart | BlockDelta | BlockEnd)]
    first_start = kinds.index(BlockStart)
    assert BlockDelta not in kinds[:first_start]
    starts = [e.type for e in events if isinstance(e, BlockStart)]
    assert starts[:1] == [ReActType.THOUGHT] and ReActType.ANSWER in starts


@pytest.mark.parametrize("size", [1, 2, 3, 7, 1000])
def test_block_events_do_not_depend_on_the_chunking(size: int) -> None:
    tracker = BlockTracker()
    events: list[StreamEvent] = []
    for piece in chunked(TEXT, size):
        events += tracker.feed(piece)
    events += tracker.flush()
    assert [e.block for e in events if isinstance(e, BlockEnd)] == (
        ReActStreamParser.parse(TEXT).blocks
    )


@pytest.mark.parametrize("size", [1, 2, 5])
def test_the_live_block_of_the_events_is_the_parsers_current_block(size: int) -> None:
    tracker, parser = BlockTracker(), ReActStreamParser()
    live: tuple[ReActType, str] | None = None
    for piece in chunked(TEXT, size):
        parser.feed(piece)
        for event in tracker.feed(piece):
            if isinstance(event, BlockEnd):
                live = None
            elif isinstance(event, BlockStart):
                live = (event.type, event.text)
            elif isinstance(event, BlockDelta):
                assert live is not None
                live = (live[0], live[1] + event.text)
        current = parser.current
        assert live == ((current.type, current.content) if current is not None else None)


def _final_paints(log: list[tuple[str, Any]]) -> list[Any]:
    """What stays on screen: the painted blocks and the panel's last state."""
    return [v for k, v in log if k == "markdown" and not str(v).endswith(" ▌")] + [
        v for k, v in log if k == "update"
    ][-1:]


@pytest.mark.parametrize("size", [1, 4, 1000])
def test_the_tracer_paints_the_same_panel_from_events_as_from_text(size: int) -> None:
    tracker = BlockTracker()
    events: list[StreamEvent] = []
    for piece in chunked(TEXT, size):
        events += [RawText(piece), *tracker.feed(piece)]
    events += tracker.flush()
    from_text: list[tuple[str, Any]] = []
    from_events: list[tuple[str, Any]] = []
    by_text = StreamlitChatTracer(Recorder(from_text), min_interval_s=0).render(chunked(TEXT, size))
    by_events = StreamlitChatTracer(Recorder(from_events), min_interval_s=0).render_events(events)
    assert by_events == by_text
    assert _final_paints(from_events) == _final_paints(from_text)
    # Live repaints of a growing block: the events repaint only what changed.
    live_events = [v for k, v in from_events if k == "markdown" and str(v).endswith(" ▌")]
    live_text = [v for k, v in from_text if k == "markdown" and str(v).endswith(" ▌")]
    assert live_events and set(live_events) <= set(live_text)
    assert live_events[-1] == live_text[-1]


async def test_the_tracer_paints_an_engine_turn_from_its_events() -> None:
    llm = ScriptedLLM([act("add", '{"a": 6, "b": 7}'), "Thought: I know.\nAnswer: 13"])
    engine = ReActEngine(config=corpus_config(), llm=llm, tools=Toolbox().tools())
    engine.start(language="en")
    events = [event async for event in engine.stream_events("What is 6*7?")]
    text = "".join(e.text for e in events if isinstance(e, RawText))
    log_events: list[tuple[str, Any]] = []
    log_text: list[tuple[str, Any]] = []
    turn = StreamlitChatTracer(Recorder(log_events), min_interval_s=0).render_events(events)
    again = StreamlitChatTracer(Recorder(log_text), min_interval_s=0).render([text])
    assert turn == again and turn.answer == "13" and turn.complete
    assert _final_paints(log_events) == _final_paints(log_text)


async def test_closing_the_event_stream_early_records_a_cancelled_turn() -> None:
    llm = ScriptedLLM([act("add", '{"a": 6, "b": 7}'), "Thought: I know.\nAnswer: 13"])
    engine = ReActEngine(config=corpus_config(), llm=llm, tools=Toolbox().tools())
    engine.start(language="en")
    events = engine.stream_events("What is 6*7?")
    async for event in events:  # noqa: B007 - one event, then the consumer leaves
        break
    await events.aclose()  # type: ignore[attr-defined]
    assert engine.last_outcome is not None
    assert engine.last_outcome.stop_reason is StopReason.CANCELLED
