"""Consuming the engine's async stream from Streamlit's synchronous script thread.

One event loop runs for the whole process in a daemon thread; the script
thread pulls one item at a time from it. Keeping a single loop (rather than
one per run) lets clients bound to a loop, such as an HTTP connection pool,
outlive a run. The stream is always closed: on exhaustion, when the consumer
stops early, and when Streamlit interrupts the script (its stop and rerun
exceptions are raised inside the consumer's ``st`` calls, here inside
``on_wait``) — the engine then records a ``cancelled`` turn.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import AsyncIterator, Callable, Generator
from typing import TypeVar

T = TypeVar("T")

_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()
_CLOSE_TIMEOUT_S = 10.0


def background_loop() -> asyncio.AbstractEventLoop:
    """The process-wide loop, started on first use."""
    global _loop
    with _loop_lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="chatitego-async", daemon=True).start()
            _loop = loop
        return _loop


def iterate_sync(
    stream: AsyncIterator[T],
    *,
    on_wait: Callable[[float], None] | None = None,
    poll_s: float = 0.5,
) -> Generator[T, None, None]:
    """Items of ``stream``, one by one; ``on_wait(elapsed_s)`` runs while an item is slow."""
    loop = background_loop()
    tasks: list[asyncio.Task[T]] = []  # the item being fetched, to cancel it on the loop
    try:
        while True:
            pending = asyncio.run_coroutine_threadsafe(_next(stream, tasks), loop)
            waited = 0.0
            while True:
                try:
                    item = pending.result(timeout=poll_s if on_wait else None)
                    break
                except concurrent.futures.TimeoutError:
                    waited += poll_s
                    if on_wait is not None:
                        on_wait(waited)
            yield item
    except StopAsyncIteration:
        return
    finally:
        closing = asyncio.run_coroutine_threadsafe(_cancel_and_close(stream, tasks), loop)
        try:
            closing.result(timeout=_CLOSE_TIMEOUT_S)
        except concurrent.futures.TimeoutError:
            closing.cancel()


async def _next(stream: AsyncIterator[T], tasks: list[asyncio.Task[T]]) -> T:
    task = asyncio.current_task()
    tasks[:] = [task] if task is not None else []  # type: ignore[list-item]
    return await stream.__anext__()


async def _cancel_and_close(stream: AsyncIterator[T], tasks: list[asyncio.Task[T]]) -> None:
    # An item still on its way is cancelled inside the stream, and the stream's own
    # clean-up (which may await) finishes before aclose: a running async generator
    # cannot be closed.
    for task in tasks:
        if not task.done():
            task.cancel()
            await asyncio.wait([task])
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        await aclose()
