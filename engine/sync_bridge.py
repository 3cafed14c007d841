"""The one bridge between the engine's async code and synchronous callers.

- ``run_sync``: run a coroutine to its end from synchronous code (a CLI, a
  warm-up), even when the caller's thread already runs an event loop.
- ``iterate_sync``: consume an async stream one item at a time from a thread
  that has no loop (Streamlit's script thread).
- ``call_with_timeout``: run blocking work in a thread and stop waiting for it
  after a deadline (a side LLM call inside a synchronous tool).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Generator
from typing import Any, TypeVar

T = TypeVar("T")

_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()
_CLOSE_TIMEOUT_S = 10.0


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """The result of ``coro``, run on a loop of its own; its exception is re-raised here."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    # Called from inside a running loop (a notebook, a server): use a private one.
    results: list[T] = []
    errors: list[BaseException] = []

    def target() -> None:
        try:
            results.append(asyncio.run(coro))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            errors.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
    return results[0]


def background_loop() -> asyncio.AbstractEventLoop:
    """The process-wide loop, started on first use.

    Keeping a single loop (rather than one per run) lets clients bound to a
    loop, such as an HTTP connection pool, outlive a run.
    """
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
    """Items of ``stream``, one by one; ``on_wait(elapsed_s)`` runs while an item is slow.

    The stream runs on ``background_loop``. It is always closed: on exhaustion,
    when the consumer stops early, and when ``on_wait`` raises (Streamlit
    interrupts a script by raising inside its ``st`` calls) — the engine then
    records a ``cancelled`` turn.
    """
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


def call_with_timeout(
    work: Callable[[threading.Event], T], timeout_s: float, *, name: str
) -> tuple[bool, T | None]:
    """``(finished, result)`` of ``work(gave_up)`` run in a daemon thread for ``timeout_s``.

    Past the deadline the caller goes on and ``gave_up`` is set, so that work
    able to stop early (a token loop) does; the thread is never joined again.
    A ``work`` that raises finishes with ``None``: it must log its own failure.
    """
    box: list[T] = []
    gave_up = threading.Event()

    def target() -> None:
        box.append(work(gave_up))

    worker = threading.Thread(target=target, name=name, daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        gave_up.set()
        return False, None
    return True, box[0] if box else None


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
