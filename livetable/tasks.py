"""Background tasks: the one way to stop one."""

from __future__ import annotations

import asyncio
from typing import Any


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
