"""StreamlitChatTracer over a recording fake container, and the async bridge's closing rules."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from engine import ReActEngine, StopReason
from engine.types import ReActType
from tests.fakes import ScriptedLLM, Stall
from tests.test_engine_corpus import corpus_config
from tracer.async_bridge import iterate_sync
from tracer.render import DisplayMode
from tracer.streamlit_tracer import StreamlitChatTracer

TEXT = (
    "Thought: I need the calculator.\n"
    "Action: calculator\n"
    'Action Input: {"expression": "6*7"}\n'
    "Observation: 42\n"
    "Thought: I know.\n"
    "Answer: It is **42**.\n"
)


class Interrupted(BaseException):
    """Stands for Streamlit's StopException (a BaseException raised inside st calls)."""


class Recorder:
    """A fake Streamlit container: records every call, optionally raises on the Nth paint."""

    def __init__(self, log: list[tuple[str, Any]], fail_at: int | None = None) -> None:
        self.log = log
        self.fail_at = fail_at

    def _paint(self, kind: str, value: Any) -> None:
        self.log.append((kind, value))
        paints = sum(1 for k, _ in self.log if k in ("markdown", "caption"))
        if self.fail_at is not None and paints >= self.fail_at:
            raise Interrupted

    def status(self, label: str, expanded: bool = False) -> Recorder:
        self.log.append(("status", label))
        return self

    def empty(self) -> Recorder:
        self.log.append(("empty", None))
        return self

    def expander(self, label: str, expanded: bool = False, icon: str = "") -> Recorder:
        self.log.append(("expander", label))
        return self

    def update(self, **kw: Any) -> None:
        self.log.append(("update", kw))

    def markdown(self, text: str) -> None:
        self._paint("markdown", text)

    def caption(self, text: str) -> None:
        self._paint("caption", text)


def chunked(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


@pytest.mark.parametrize("size", [1, 3, 7, 1000])
def test_blocks_and_answer_do_not_depend_on_the_chunking(size: int) -> None:
    log: list[tuple[str, Any]] = []
    turn = StreamlitChatTracer(Recorder(log), min_interval_s=0).render(chunked(TEXT, size))
    assert turn.answer == "It is **42**."
    assert turn.complete and turn.steps == 2
    assert [b.type for b in turn.blocks][:4] == [
        ReActType.THOUGHT,
        ReActType.ACTION,
        ReActType.ACTION_INPUT,
        ReActType.OBSERVATION,
    ]
    painted = [v for k, v in log if k == "markdown"]
    assert painted[-1] == "It is **42**."  # the final paint has no cursor
    final_blocks = [p for p in painted if not p.endswith("▌")]
    assert final_blocks[0].startswith(":gray[**Pensée**]")
    assert log[-1] == (
        "update",
        {"label": "Raisonnement · 2 étape(s)", "state": "complete", "expanded": False},
    )


def test_the_answer_is_painted_while_it_streams() -> None:
    log: list[tuple[str, Any]] = []
    StreamlitChatTracer(Recorder(log), min_interval_s=0).render(chunked(TEXT, 2))
    partial = [v for k, v in log if k == "markdown" and v.endswith("▌") and "42" not in v]
    assert any(p.startswith("It is") for p in partial)  # the answer grew on screen


def test_answer_only_mode_opens_no_reasoning_panel() -> None:
    log: list[tuple[str, Any]] = []
    turn = StreamlitChatTracer(Recorder(log), mode=DisplayMode.ANSWER_ONLY).render([TEXT])
    assert turn.answer == "It is **42**."
    assert not [k for k, _ in log if k == "status"]
    assert not [v for k, v in log if k == "markdown" and "Pensée" in v]


def test_hide_thoughts_paints_the_tool_calls_but_not_the_thoughts() -> None:
    log: list[tuple[str, Any]] = []
    StreamlitChatTracer(Recorder(log), mode=DisplayMode.HIDE_THOUGHTS).render([TEXT])
    painted = "\n".join(v for k, v in log if k == "markdown")
    assert "**Pensée**" not in painted and "**Action**" in painted and "Observation" in painted


def test_repaints_of_a_growing_block_are_throttled() -> None:
    fast: list[tuple[str, Any]] = []
    slow: list[tuple[str, Any]] = []
    StreamlitChatTracer(Recorder(fast), min_interval_s=0).render(chunked(TEXT, 1))
    StreamlitChatTracer(Recorder(slow), min_interval_s=60).render(chunked(TEXT, 1))
    assert (
        len([1 for k, _ in slow if k == "markdown"])
        < len([1 for k, _ in fast if k == "markdown"]) / 5
    )


def test_replay_shows_a_past_turn_collapsed_with_its_step_count() -> None:
    log: list[tuple[str, Any]] = []
    turn = StreamlitChatTracer(Recorder([])).render([TEXT])
    StreamlitChatTracer.replay(
        Recorder(log), turn.blocks, mode=DisplayMode.EVERYTHING, language="en"
    )
    assert log[0] == ("expander", "Reasoning · 2 step(s)")
    assert any("**Thought**" in v for k, v in log if k == "markdown")


# --- the async bridge ---------------------------------------------------------------------
class Tracked:
    def __init__(self) -> None:
        self.closed = False
        self.cancelled = False


async def slow_stream(state: Tracked, delays: list[float]) -> AsyncIterator[str]:
    try:
        for i, delay in enumerate(delays):
            await asyncio.sleep(delay)
            yield f"Thought: step {i}\n"
    except asyncio.CancelledError:
        state.cancelled = True
        raise
    finally:
        await asyncio.sleep(0)  # clean-up that awaits, like the engine's cancel_run
        state.closed = True


def test_a_stream_read_to_its_end_is_closed() -> None:
    state = Tracked()
    assert list(iterate_sync(slow_stream(state, [0, 0]))) == [
        "Thought: step 0\n",
        "Thought: step 1\n",
    ]
    assert state.closed


def test_a_consumer_that_stops_early_closes_the_stream() -> None:
    state = Tracked()
    items = iterate_sync(slow_stream(state, [0, 0, 0]))
    assert next(items) == "Thought: step 0\n"
    items.close()
    assert state.closed and not state.cancelled


def test_an_interruption_while_waiting_cancels_the_item_inside_the_stream() -> None:
    state = Tracked()
    waits: list[float] = []

    def on_wait(elapsed: float) -> None:
        waits.append(elapsed)
        raise Interrupted  # Streamlit delivers the user's stop inside an st call

    items = iterate_sync(slow_stream(state, [0, 30]), on_wait=on_wait, poll_s=0.05)
    start = time.monotonic()
    with pytest.raises(Interrupted):
        list(items)
    assert time.monotonic() - start < 5  # did not wait for the 30 s item
    assert waits and state.cancelled and state.closed


def test_stopping_the_page_mid_turn_leaves_a_cancelled_outcome() -> None:
    llm = ScriptedLLM([Stall(["Thought: I am thinking about it"], seconds=20)])
    engine = ReActEngine(config=corpus_config(llm_stall_timeout_s=30.0), llm=llm, tools=[])
    engine.start()
    tracer = StreamlitChatTracer(Recorder([], fail_at=1), min_interval_s=0)
    start = time.monotonic()
    with pytest.raises(Interrupted):
        tracer.trace(engine.stream("Question ?"))
    assert time.monotonic() - start < 15
    assert engine.last_outcome is not None
    assert engine.last_outcome.stop_reason is StopReason.CANCELLED
