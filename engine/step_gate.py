"""The step gate: the agent's next model call waits until the engine has judged the last step."""

from __future__ import annotations

import asyncio
import logging

from llama_index.core.workflow import Context

from engine.events import StepBoundary

logger = logging.getLogger(__name__)

# A gate that is never opened (an engine bug) must not hang the turn.
GATE_TIMEOUT_S = 30.0


class StepGate:
    """Lets the agent wait until the engine has judged every event of the last step."""

    def __init__(self) -> None:
        self._waiting: dict[int, asyncio.Event] = {}

    async def wait(self, ctx: Context, step: int) -> None:
        if not ctx.is_running:
            return
        event = asyncio.Event()
        self._waiting[step] = event
        ctx.write_event_to_stream(StepBoundary(step=step))
        try:
            await asyncio.wait_for(event.wait(), timeout=GATE_TIMEOUT_S)
        except TimeoutError:
            logger.warning("step %d started without the orchestrator's acknowledgement", step)

    def ack(self, step: int) -> None:
        event = self._waiting.pop(step, None)
        if event is not None:
            event.set()
