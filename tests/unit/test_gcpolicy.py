"""Full garbage collections timed by the tables (server/gcpolicy.py)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from livetable import protocol as p
from livetable.clock import now_ms
from livetable.config import Settings
from livetable.protocol.codes import Phase
from livetable.server.gcpolicy import (
    BUSY_BEFORE_CLOSE_MS,
    NO_AUTOMATIC_FULL,
    YOUNG_THRESHOLD,
    Collector,
    tables_busy,
    tables_closing,
)
from livetable.services import Services

#: Waits on the wall clock (asyncio.sleep above zero): not in bin/test --fast (tests/tiers.py).
pytestmark = pytest.mark.sleeps


@contextlib.asynccontextmanager
async def running(collector: Collector) -> AsyncIterator[Collector]:
    """The collector started, and stopped (what it froze let go) however the test ends."""
    collector.start()
    try:
        yield collector
    finally:
        await collector.stop()
        gc.unfreeze()


async def wait_until(predicate: Callable[[], bool]) -> None:
    async with asyncio.timeout(5):
        while not predicate():
            await asyncio.sleep(0.01)


async def test_it_waits_for_a_quiet_moment_then_collects() -> None:
    busy = [True]
    pauses: list[float] = []
    collector = Collector(lambda: busy[0], interval=0.01, longest=60, poll=0.01,
                          on_collect=pauses.append)
    saved = gc.get_threshold()
    async with running(collector):
        assert gc.get_threshold() == (YOUNG_THRESHOLD, 10, NO_AUTOMATIC_FULL)
        await asyncio.sleep(0.2)
        assert collector.collections == 0  # the tables were busy all along
        busy[0] = False
        await wait_until(lambda: collector.collections > 0)
        assert len(pauses) == collector.collections and pauses[0] >= 0
    assert gc.get_threshold() == saved


async def test_tables_that_are_never_quiet_still_get_collected() -> None:
    collector = Collector(lambda: True, interval=0.01, longest=0.1, poll=0.01)
    async with running(collector):
        await wait_until(lambda: collector.collections >= 2)


async def test_a_failing_busy_check_does_not_stop_collection() -> None:
    def broken() -> bool:
        raise RuntimeError("bug")

    collector = Collector(broken, interval=0.01, longest=60, poll=0.01)
    async with running(collector):
        await wait_until(lambda: collector.collections > 0)


async def test_the_young_collections_wait_through_the_close_of_betting() -> None:
    """While a table closes its betting no collection runs (the late bets in flight are
    not walked again and again, nor the loop stopped as their acks are due); once the
    close has been over for ``release_after``, the held ones run, as one."""
    closing = [False]
    pauses: list[float] = []
    collector = Collector(lambda: True, interval=60, closing=lambda: closing[0],
                          hold_poll=0.01, release_after=0.1, on_collect=pauses.append)
    async with running(collector):
        await asyncio.sleep(0.05)
        assert gc.isenabled()
        closing[0] = True
        await wait_until(lambda: not gc.isenabled())
        await asyncio.sleep(0.2)
        assert not gc.isenabled() and collector.released == 0 and not pauses
        closing[0] = False
        await asyncio.sleep(0.03)
        assert not gc.isenabled()  # the last slips are still being answered
        await wait_until(gc.isenabled)
        assert collector.released == 1 and len(pauses) == 1
    assert gc.isenabled()


async def test_a_close_that_never_ends_is_still_collected_and_a_stop_ends_the_hold() -> None:
    collector = Collector(lambda: True, interval=60, closing=lambda: True, hold_poll=0.01,
                          hold_longest=0.05)
    async with running(collector):
        await wait_until(lambda: collector.released >= 2)
        await wait_until(lambda: not gc.isenabled())  # held again after each
    assert gc.isenabled()


async def test_a_failing_closing_check_holds_nothing() -> None:
    def broken() -> bool:
        raise RuntimeError("bug")

    collector = Collector(lambda: True, interval=60, closing=broken, hold_poll=0.01)
    async with running(collector):
        await asyncio.sleep(0.1)
        assert gc.isenabled()


@dataclass
class Feed:
    phase: Phase
    closes_at: int | None
    last_sent: float = 0.0

    def view(self) -> p.TableSnapshot:
        return p.TableSnapshot(id="t1", name="T1", phase=self.phase, mode="auto",
                               closes_at=self.closes_at)


def test_a_table_closes_its_betting_in_its_last_seconds_only() -> None:
    now = now_ms()
    soon, later = now + BUSY_BEFORE_CLOSE_MS - 1_000, now + BUSY_BEFORE_CLOSE_MS + 5_000
    assert tables_closing([Feed("betting", soon)])
    assert not tables_closing([Feed("betting", later), Feed("dealing", None)])
    assert tables_closing([Feed("betting", later), Feed("betting", soon)])
    assert tables_busy([Feed("dealing", None)], settling=False)
    assert not tables_busy([Feed("betting", later)], settling=False)
    assert tables_busy([Feed("betting", later)], settling=True)


def test_a_process_holds_its_collections_only_while_bets_come_in_a_close(
        tmp_path: Path) -> None:
    """A table only watched (the fan-out's benches, a quiet table) holds nothing: a hold
    keeps cyclic garbage, and there is no burst of bets in flight to spare."""
    services = Services(Settings(data_dir=tmp_path, secret=b"s" * 32,
                                 sqlite_writer="thread"))
    soon = now_ms() + BUSY_BEFORE_CLOSE_MS - 1_000
    services.gateway.feeds = {"t1": Feed("betting", soon)}  # type: ignore[dict-item]
    assert not services.closing()  # closing, but no bet answered
    services.metrics.bet("accepted")
    assert services.closing()
    assert not services.closing()  # none since the last look
    services.metrics.bet("betting_closed")
    services.gateway.feeds = {"t1": Feed("dealing", None)}  # type: ignore[dict-item]
    assert not services.closing()  # bets, but no table closing
