"""Engine overhead per turn vs plain llama-index ReActAgent, same scripted LLM, same run.

A 3-step turn (two tool calls, then the answer) with a zero-latency scripted
model: what is measured is the orchestration (parsing, shaping, finalizer,
workflow), not a model. Prints one JSON object.

    .venv/bin/python -m bench.engine_overhead [--turns 30]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Callable, Coroutine
from typing import Any

from llama_index.core.agent.workflow import ReActAgent

from config.settings import AppConfig
from engine import ReActEngine
from engine.tools.general import GeneralToolKit
from tests.fakes import ScriptedLLM

SCRIPT = [
    'Thought: I need the first product.\nAction: calculate\nAction Input: {"expression": "6 * 7"}',
    'Thought: Now the second one.\nAction: calculate\nAction Input: {"expression": "42 + 1"}',
    "Thought: I can answer without using any more tools.\nAnswer: The result is 43.",
]


def _script() -> list[Any]:
    return list(SCRIPT)


async def ours_turn() -> None:
    engine = ReActEngine(config=AppConfig(router_top_k=50), llm=ScriptedLLM(_script()))
    engine.start(language="en")
    engine.set_history([])
    async for _ in engine.stream("What is 6*7+1?"):
        pass
    assert engine.last_outcome is not None and engine.last_outcome.answer == "The result is 43."


async def plain_turn() -> None:
    agent = ReActAgent(tools=GeneralToolKit().tools(), llm=ScriptedLLM(_script()))
    handler = agent.run(user_msg="What is 6*7+1?")
    async for _ in handler.stream_events():
        pass
    result = await handler
    assert "43" in str(result.response.content)


def _time(turn: Callable[[], Coroutine[Any, Any, None]], turns: int) -> list[float]:
    async def run_all() -> list[float]:
        await turn()  # warm-up: imports, first-call caches
        times = []
        for _ in range(turns):
            start = time.perf_counter()
            await turn()
            times.append(time.perf_counter() - start)
        return times

    return asyncio.run(run_all())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=30)
    args = parser.parse_args()
    # Interleave the two so that machine load affects both alike.
    ours: list[float] = []
    plain: list[float] = []
    for _ in range(3):
        ours += _time(ours_turn, args.turns // 3)
        plain += _time(plain_turn, args.turns // 3)
    ours_ms = statistics.median(ours) * 1000
    plain_ms = statistics.median(plain) * 1000
    print(
        json.dumps(
            {
                "benchmark": "engine_overhead",
                "turn_steps": 3,
                "turns": len(ours),
                "ours_ms_per_turn_p50": round(ours_ms, 2),
                "plain_react_agent_ms_per_turn_p50": round(plain_ms, 2),
                "overhead_ms": round(ours_ms - plain_ms, 2),
                "ratio_vs_plain": round(ours_ms / plain_ms, 3),
                "targets": {"overhead_ms_max": 50, "ratio_max": 1.5},
            }
        )
    )


if __name__ == "__main__":
    main()
