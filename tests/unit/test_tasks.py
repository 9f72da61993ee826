"""livetable.tasks.cancel: the one way to stop a background task."""

from __future__ import annotations

import asyncio

import pytest

from livetable.tasks import cancel

#: Waits on the wall clock (asyncio.sleep above zero): not in bin/test --fast (tests/tiers.py).
pytestmark = pytest.mark.sleeps


async def test_it_stops_the_task_and_swallows_only_the_tasks_cancellation() -> None:
    stopped = asyncio.Event()

    async def forever() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            stopped.set()

    task = asyncio.create_task(forever())
    await asyncio.sleep(0)
    await cancel(task)
    assert task.cancelled() and stopped.is_set()
    await cancel(None)  # nothing to stop
    await cancel(task)  # already ended


async def test_the_callers_own_cancellation_goes_on_up() -> None:
    async def slow_to_stop() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await asyncio.sleep(0.2)  # cleans up for a while
            raise

    async def stopper(task: asyncio.Task[None]) -> str:
        await cancel(task)
        return "went on"  # must not be reached: the stopper itself was cancelled

    worker = asyncio.create_task(slow_to_stop())
    await asyncio.sleep(0)
    outer = asyncio.create_task(stopper(worker))
    await asyncio.sleep(0.05)
    outer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await outer
