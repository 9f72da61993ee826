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
