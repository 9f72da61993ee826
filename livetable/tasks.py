"""Background tasks: the one way to stop one."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Coroutine
from typing import Any

log = logging.getLogger("livetable.tasks")


async def cancel(task: asyncio.Task[Any] | asyncio.Future[Any] | None) -> None:
    """Cancel ``task`` (if there is one) and wait until it has ended.

    The task's own ``CancelledError`` is expected and swallowed; the caller's is not: if
    the task calling this is itself being cancelled meanwhile, that goes on up (a plain
    ``suppress(CancelledError)`` around the ``await`` would eat it too).
    """
    if task is None:
        return
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise


def check_cancelled() -> None:
    """Raise :class:`asyncio.CancelledError` if the running task was asked to stop.

    For loops around calls of a library that can swallow a cancellation: redis-py's
    asyncio client, cancelled in the middle of a command, often returns its answer
    instead of raising (measured with redis-py 8.1: 297 of 300 tasks looping on ``GET``
    ran on after ``cancel()``; redis/redis-py#2028, #2551). A loop that relies on the
    ``CancelledError`` reaching it then never ends, and whoever awaits its end — a
    graceful stop — hangs. The request stays on the task (``cancelling()``), so the loop
    asks at each turn.
    """
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


async def wait_set(event: asyncio.Event, seconds: float) -> bool:
    """Wait until ``event`` is set or ``seconds`` have passed; whether it is set. The pause
    of a background loop between its turns, which never loses a cancellation.

    Not ``asyncio.wait_for(event.wait(), seconds)``: on Python 3.11, ``wait_for`` runs the
    wait as a task of its own, and a cancellation that lands in the turn that task ends
    (the event set: a delivery ending, a sweep done) is swallowed — ``wait_for`` returns
    the wait's result (python/cpython#86296, fixed in 3.12). The loop then goes on for
    ever and whoever awaits its end (a graceful stop) hangs: a seamless wallet's stop
    hung 20 minutes so. Here the wait runs in the caller's own task, and a cancellation
    asked meanwhile is raised (:func:`check_cancelled`) whatever became of it.
    """
    if not event.is_set():
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await event.wait()
    check_cancelled()
    return event.is_set()


#: What a part of a stop gets once the stop's deadline has passed (seconds): enough for a
#: connection to close that answers, not for one that hangs.
LAST_CHANCE = 0.1


async def within(deadline: float, stopping: Coroutine[Any, Any, Any], what: str) -> bool:
    """Run ``stopping`` (a part of a graceful stop) until ``deadline`` (monotonic) at the
    latest; whether it finished. One that did not is cancelled and left behind, not waited
    for: a call hung on a stalled connection (or a library that swallows the cancellation,
    see :func:`check_cancelled`) must not hold the process past its drain time."""
    task = asyncio.ensure_future(stopping)
    done, _ = await asyncio.wait({task}, timeout=max(deadline - time.monotonic(), LAST_CHANCE))
    if task in done:
        task.result()
        return True
    task.cancel()
    log.warning("stopping: %s did not finish in time; left behind", what)
    return False
