"""Full garbage collections timed by the tables (server/gcpolicy.py)."""

from __future__ import annotations

import asyncio
import gc

import pytest

from livetable.server.gcpolicy import NO_AUTOMATIC_FULL, YOUNG_THRESHOLD, Collector

#: Waits on the wall clock (asyncio.sleep above zero): not in bin/test --fast (tests/tiers.py).
pytestmark = pytest.mark.sleeps


async def test_it_waits_for_a_quiet_moment_then_collects() -> None:
    busy = [True]
    pauses: list[float] = []
    collector = Collector(lambda: busy[0], interval=0.01, longest=60, poll=0.01,
                          on_collect=pauses.append)
    saved = gc.get_threshold()
    collector.start()
    try:
        assert gc.get_threshold() == (YOUNG_THRESHOLD, 10, NO_AUTOMATIC_FULL)
        await asyncio.sleep(0.2)
        assert collector.collections == 0  # the tables were busy all along
        busy[0] = False
        async with asyncio.timeout(5):
            while collector.collections == 0:
                await asyncio.sleep(0.01)
        assert len(pauses) == collector.collections and pauses[0] >= 0
    finally:
        await collector.stop()
        gc.unfreeze()
    assert gc.get_threshold() == saved


async def test_tables_that_are_never_quiet_still_get_collected() -> None:
    collector = Collector(lambda: True, interval=0.01, longest=0.1, poll=0.01)
    collector.start()
    try:
        async with asyncio.timeout(5):
            while collector.collections < 2:
                await asyncio.sleep(0.01)
    finally:
        await collector.stop()
        gc.unfreeze()


async def test_a_failing_busy_check_does_not_stop_collection() -> None:
    def broken() -> bool:
        raise RuntimeError("bug")

    collector = Collector(broken, interval=0.01, longest=60, poll=0.01)
    collector.start()
    try:
        async with asyncio.timeout(5):
            while collector.collections == 0:
                await asyncio.sleep(0.01)
    finally:
        await collector.stop()
        gc.unfreeze()
