"""The runner settles a large round in chunks, off the table's path, and finishes what a
crash left half settled.

A store settles a round one chunk of whole players per call (``settle_pending``); the
runner's settlement task calls it until nothing is left and publishes each chunk's
``bet_settled`` as soon as it is stored, while the table goes on. A runner that starts —
after a crash, or taking a table over — first finishes the settlement in flight.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, TypeVar

import msgspec
import pytest
from bets import place_bet

from livetable import protocol as p
from livetable.betting.slips import BetRequest
from livetable.bus import MemoryBus, TableBatch
from livetable.engine import SettleRound, Timing
from livetable.host.runner import TableRunner
from livetable.store import SQLiteStore

#: Waits on the wall clock (asyncio.sleep above zero): not in bin/test --fast (tests/tiers.py).
pytestmark = pytest.mark.sleeps

TABLE = "t1"
T = TypeVar("T")
EVENTS = msgspec.json.Decoder(p.AnyTableEvent)
SETTLED = msgspec.json.Decoder(p.BetSettled)
FAST = Timing(betting_ms=400, deal_interval_ms=5, reveal_interval_ms=5,
              between_rounds_ms=50)


def private(batches: list[TableBatch]) -> list[p.BetSettled]:
    return [SETTLED.decode(frame) for b in batches for _, frame in b.private]


async def wait_for(batches: list[TableBatch], kind: type[T]) -> T:
    async with asyncio.timeout(10):
        while True:
            found = [e for b in batches for _, f in b.frames
                     if isinstance(e := EVENTS.decode(f), kind)]
            if found:
                return found[0]
            await asyncio.sleep(0.01)


async def bet_in_first_round(store: SQLiteStore, batches: list[TableBatch],
                             players: int) -> p.RoundOpened:
    opened = await wait_for(batches, p.RoundOpened)
    for n in range(players):
        answer = await place_bet(store, BetRequest(
            player_id=f"p{n}", table=TABLE, bet_id=f"b{n}", round_id=opened.round_id,
            spot="P1", amount=100), opened.closes_at - 300)
        assert isinstance(answer, p.BetAccepted), answer
    return opened


async def settle_first_round(store: SQLiteStore, bus: MemoryBus, batches: list[TableBatch],
                             players: int) -> p.RoundOpened:
    """Run a table until each of the first round's ``players`` bets is settled and
    published (``batches``: what ``bus`` published)."""
    runner = TableRunner(TABLE, store, bus, timing=FAST)
    await runner.start()
    try:
        opened = await bet_in_first_round(store, batches, players)
        async with asyncio.timeout(10):
            while len(private(batches)) < players:
                await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)  # nothing more comes
    finally:
        await runner.stop()
    return opened


async def assert_settled_in_chunks_of_three(store: SQLiteStore, batches: list[TableBatch],
                                            opened: p.RoundOpened) -> None:
    """Ten bets, each settled once: the settling step's chunk, then three more, each
    published in a batch of its own as it was stored."""
    settled = private(batches)
    assert sorted(s.bet_id for s in settled) == [f"b{n}" for n in range(10)]
    assert [len(b.private) for b in batches if b.private] == [3, 3, 3, 1]
    view = await store.round_view(opened.round_id)
    assert view is not None and view.state == "settled"
    assert (await store.audit()).ok


async def test_a_round_settles_in_chunks_each_published_as_it_is_stored(
        tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "db.sqlite3", settle_chunk=3)
    for n in range(10):
        await store.ensure_player(f"p{n}", f"P{n}", 1_000, 0)
    bus = MemoryBus()
    batches: list[TableBatch] = []
    bus.subscribe(batches.append)
    opened = await settle_first_round(store, bus, batches, 10)
    await assert_settled_in_chunks_of_three(store, batches, opened)
    await store.close()


async def test_a_runner_that_starts_finishes_a_settlement_a_crash_left(
        tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite3"
    store = SQLiteStore(path, settle_chunk=3)
    for n in range(7):
        await store.ensure_player(f"p{n}", f"P{n}", 1_000, 0)
    bus = MemoryBus()
    batches: list[TableBatch] = []
    bus.subscribe(batches.append)
    runner = TableRunner(TABLE, store, bus, timing=FAST)

    async def crash_after_the_first_chunk(table: str, now: int) -> tuple[list[object], bool]:
        await asyncio.sleep(3600)  # the process dies before its settlement task gets far
        raise AssertionError("unreachable")

    store.settle_pending = crash_after_the_first_chunk  # type: ignore[assignment,method-assign]
    await runner.start()
    opened = await bet_in_first_round(store, batches, 7)
    async with asyncio.timeout(10):
        while len(private(batches)) < 3:
            await asyncio.sleep(0.01)
    await runner.stop()  # the crash
    await store.close()
    assert len(private(batches)) == 3
    view_store = SQLiteStore(path, settle_chunk=3)
    view = await view_store.round_view(opened.round_id)
    assert view is not None and view.state == "settling"

    # a new process: its runner finishes the round before anything else
    bus2 = MemoryBus()
    after: list[TableBatch] = []
    bus2.subscribe(after.append)
    # (its next round bets for a minute: no later settlement step does the work for it)
    slow = Timing(betting_ms=60_000, deal_interval_ms=5, reveal_interval_ms=5,
                  between_rounds_ms=50)
    runner2 = TableRunner(TABLE, view_store, bus2, timing=slow)
    await runner2.start()
    try:
        async with asyncio.timeout(10):
            while len(private(after)) < 4:
                await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)
    finally:
        await runner2.stop()
    ids = [s.bet_id for s in private(batches) + private(after)]
    assert sorted(ids) == [f"b{n}" for n in range(7)]  # each exactly once
    view = await view_store.round_view(opened.round_id)
    assert view is not None and view.state == "settled"
    report = await view_store.audit()
    assert report.ok, report.problems
    await view_store.close()


async def test_the_chunks_after_the_first_are_asked_for_before_the_step_is_published(
        tmp_path: Path) -> None:
    """Publishing the settling step (round_settled to every connection) keeps the event
    loop busy; the chunks after the first must already be on their way to the store by
    then, so that a store taking calls in order settles them meanwhile (in the 100k-bet
    benchmark the SQLite writer sat idle about 80 ms there)."""
    store = SQLiteStore(tmp_path / "db.sqlite3", settle_chunk=3)
    for n in range(10):
        await store.ensure_player(f"p{n}", f"P{n}", 1_000, 0)
    order: list[str] = []
    commit_step, settle_pending = store.commit_step, store.settle_pending

    async def recording_commit_step(*args: Any, **kwargs: Any) -> Any:
        if any(isinstance(e, SettleRound) for e in args[3]):
            order.append("settling step stored")
        return await commit_step(*args, **kwargs)

    async def recording_settle_pending(table: str, now: int) -> Any:
        order.append("chunk asked for")
        return await settle_pending(table, now)

    store.commit_step = recording_commit_step  # type: ignore[method-assign]
    store.settle_pending = recording_settle_pending  # type: ignore[method-assign]
    bus = MemoryBus()
    batches: list[TableBatch] = []

    def published(batch: TableBatch) -> None:
        batches.append(batch)
        if any(isinstance(EVENTS.decode(f), p.RoundSettled) for _, f in batch.frames):
            order.append("settling step published")

    bus.subscribe(published)
    opened = await settle_first_round(store, bus, batches, 10)
    after = order[order.index("settling step stored"):]
    assert after.index("chunk asked for") < after.index("settling step published"), order
    await assert_settled_in_chunks_of_three(store, batches, opened)  # and still
    await store.close()
