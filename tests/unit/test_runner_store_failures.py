"""The runner when the store fails a step: the table goes on without losing the step.

A commit can fail before the store wrote anything (the store is unreachable) or after (the
reply was lost with the connection): the store raises StoreUnavailable either way. Either
way the engine has already taken the step in memory; the runner must rebuild it from the
store before the next step, or the next commit would skip the failed step's events (a hole
in the event log) and its effects (a close of betting, a settlement never applied to the
ledger). Found by the scale-out test that kills Redis while cards are dealt
(tests/integration/test_scaleout_redis_restart.py).

Any other exception out of the store is a bug, not an outage: retried, it would fail the
same way for ever. The runner logs it and holds the table still.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any, TypeVar

import msgspec
import pytest
from bets import place_bet

from livetable import protocol as p
from livetable.betting.slips import BetRequest
from livetable.bus import MemoryBus, TableBatch
from livetable.clock import now_ms
from livetable.config import Settings
from livetable.engine import OpenRound, SetBetting, SettleRound, TableEngine, Timing
from livetable.host.runner import SETTLE_AHEAD, TableRunner
from livetable.server.health import readiness
from livetable.services import Services
from livetable.store import SQLiteStore
from livetable.store.base import OutOfStep, Settled, StoreUnavailable

#: Waits on the wall clock (asyncio.sleep above zero): not in bin/test --fast (tests/tiers.py).
pytestmark = pytest.mark.sleeps

TABLE = "t1"
T = TypeVar("T")
EVENTS = msgspec.json.Decoder(p.AnyTableEvent)


class FlakyStore:
    """A store whose commit of the close of betting fails after writing (reply lost), and
    whose first settlement fails before writing (store unreachable)."""

    def __init__(self, inner: SQLiteStore) -> None:
        self.inner = inner
        self.failed: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def commit_step(self, table: str, state: bytes, events: list[tuple[int, int, bytes]],
                          effects: list[Any], now: int, *,
                          snapshot: bytes = b"") -> list[Settled]:
        closes = any(isinstance(e, SetBetting) and e.status == "closed" for e in effects)
        settles = any(isinstance(e, SettleRound) for e in effects)
        if settles and "settle" not in self.failed:
            self.failed.append("settle")
            raise StoreUnavailable("store unreachable")
        settled = await self.inner.commit_step(table, state, events, effects, now)
        if closes and "close" not in self.failed:
            self.failed.append("close")
            raise StoreUnavailable("connection lost before the reply")
        return settled


async def test_failed_commits_lose_no_step(tmp_path: Path) -> None:
    store = FlakyStore(SQLiteStore(tmp_path / "db.sqlite3"))
    bus = MemoryBus()
    batches: list[TableBatch] = []
    bus.subscribe(batches.append)
    # The reveals 100 ms apart keep the close and the settlement in two steps: a tick late
    # by more than the reveals take catches up in one (engine.pacing.tick), and a loaded
    # machine (the tests run on several workers) can be that late by tens of milliseconds.
    runner = TableRunner(TABLE, store, bus,  # a Store by delegation
                         timing=Timing(betting_ms=300, deal_interval_ms=5,
                                       reveal_interval_ms=100, between_rounds_ms=50))
    await store.ensure_player("p1", "P1", 1000, 0)
    await runner.start()
    try:
        async def wait_for(kind: type[T], count: int = 1) -> T:
            async with asyncio.timeout(10):
                while True:
                    found = [e for b in batches for _, f in b.frames
                             if isinstance(e := EVENTS.decode(f), kind)]
                    if len(found) >= count:
                        return found[count - 1]
                    await asyncio.sleep(0.01)

        opened = await wait_for(p.RoundOpened)
        answer = await place_bet(store, BetRequest(player_id="p1", table=TABLE, bet_id="b1",
                                                  round_id=opened.round_id, spot="P1",
                                                  amount=100), opened.closes_at - 200)
        assert isinstance(answer, p.BetAccepted), answer
        await wait_for(p.RoundOpened, 2)  # the next round: the first one is over
    finally:
        await runner.stop()
    assert store.failed == ["close", "settle"]

    state = await store.load_table(TABLE)
    assert state is not None
    head = max(seq for b in batches for seq, _ in b.frames)
    logged = await store.events_after(TABLE, batches[0].epoch, 0, 10_000)
    # every event once, no hole, each published one as published; the log may hold one
    # step more, committed as the runner was stopped before it could publish it (whoever
    # runs the table next publishes from the log; a loaded run stopped there)
    assert logged is not None and len(logged) >= head
    assert [EVENTS.decode(f).seq for f in logged] == list(range(1, len(logged) + 1))
    for b in batches:
        for seq, frame in b.frames:
            assert logged[seq - 1] == frame, seq
    view = await store.round_view(opened.round_id)
    assert view is not None and view.state == "settled"
    record, _ = await store.bet_record("p1", 10, None)
    assert [(e.bet_id, e.state) for e in record] == [("b1", "settled")]
    report = await store.audit()
    assert report.ok, report.problems
    await store.close()



class BuggyStore:
    """A store with a bug: the commit that settles a round, or a settlement chunk, raises
    a KeyError every time."""

    def __init__(self, inner: SQLiteStore, where: str) -> None:
        self.inner = inner
        self.where = where
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def commit_step(self, table: str, state: bytes, events: list[tuple[int, int, bytes]],
                          effects: list[Any], now: int, *,
                          snapshot: bytes = b"") -> list[Settled]:
        if self.where == "commit" and any(isinstance(e, SettleRound) for e in effects):
            self.calls += 1
            raise KeyError("a bug in settling")
        return await self.inner.commit_step(table, state, events, effects, now,
                                            snapshot=snapshot)

    async def settle_pending(self, table: str, now: int) -> tuple[list[Settled], bool]:
        if self.where == "settle":
            self.calls += 1
            raise KeyError("a bug in a settlement chunk")
        return await self.inner.settle_pending(table, now)


@pytest.mark.parametrize("where", ["commit", "settle"])
async def test_a_bug_holds_the_table_instead_of_retrying_forever(
        tmp_path: Path, where: str, caplog: pytest.LogCaptureFixture) -> None:
    store = BuggyStore(SQLiteStore(tmp_path / "db.sqlite3"), where)
    runner = TableRunner(TABLE, store, MemoryBus(),  # a Store by delegation
                         timing=Timing(betting_ms=50, deal_interval_ms=1,
                                       reveal_interval_ms=1, between_rounds_ms=10))
    await runner.start()
    try:
        async with asyncio.timeout(10):
            while runner.halted is None:
                await asyncio.sleep(0.01)
        held_after = store.calls
        await asyncio.sleep(1.5)  # an outage would have been retried twice by now
        # no call after the table was held; the settlement task has SETTLE_AHEAD chunk
        # calls in flight at once, and the one after the bug was made before it failed
        assert store.calls == held_after == (1 if where == "commit" else SETTLE_AHEAD)
        assert runner.alive  # held, not stopped: the table's state is all in the store
        assert "KeyError" in runner.halted and "a bug" in runner.halted
        (record,) = [r for r in caplog.records if r.exc_info]
        assert isinstance(record.exc_info[1], KeyError)  # type: ignore[index]  # set above
    finally:
        await runner.stop()
        await store.close()


class LosingStore:
    """A store that loses its last write: the first step that opens a round is stored and
    answered, then the database goes back to what it held before it (as after a failover
    to a replica that had not got the step yet)."""

    def __init__(self, inner: SQLiteStore) -> None:
        self.inner = inner
        self.lost: list[OpenRound] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def commit_step(self, table: str, state: bytes, events: list[tuple[int, int, bytes]],
                          effects: list[Any], now: int, *,
                          snapshot: bytes = b"") -> list[Settled]:
        opens = [e for e in effects if isinstance(e, OpenRound)]
        if not opens or self.lost:
            return await self.inner.commit_step(table, state, events, effects, now,
                                             snapshot=snapshot)
        self.lost += opens
        before = sqlite3.connect(":memory:", check_same_thread=False)
        loop = asyncio.get_running_loop()  # on the store's writer thread, between its calls
        await loop.run_in_executor(self.inner.writer, self.inner.db.backup, before)
        settled = await self.inner.commit_step(table, state, events, effects, now)
        await loop.run_in_executor(self.inner.writer, before.backup, self.inner.db)  # lost
        before.close()
        return settled


async def test_an_engine_ahead_of_its_store_reloads_and_the_table_says_so(
        tmp_path: Path) -> None:
    """After a store lost its last writes the engine kept its round in memory
    and went on publishing steps the store did not have, for good. Now the store refuses
    the engine's next step (it does not follow on), the engine reloads from the store,
    /readyz names the table and why, the metric counts it, and the table goes on: a round
    opens again, in the store this time, and takes bets. The lost steps had been announced
    (the shoe, its commitment, the round): the shoe they started is never dealt again
    (docs/security.md), so the round opens in a new epoch, from a shoe numbered past it."""
    store = LosingStore(SQLiteStore(tmp_path / "db.sqlite3"))
    bus = MemoryBus()
    batches: list[TableBatch] = []
    bus.subscribe(batches.append)
    settings = Settings(data_dir=tmp_path, secret=b"losing-store-secret-0123456789abcdef",
                        betting_seconds=2, deal_interval=0.05, reveal_interval=0.01,
                        between_rounds=0.05, close_grace=0, audit_interval=0)
    services = Services(settings, store=store, bus=bus)  # a Store by delegation
    await services.start()
    runner = services.runners[TABLE]
    try:
        await store.ensure_player("p1", "P1", 1_000, 0)
        async with asyncio.timeout(10):
            while not runner.refusals:
                await asyncio.sleep(0.01)
        (lost,) = store.lost
        ready, checks = await readiness(services)
        assert ready, checks  # the table goes on: informative, not a verdict
        why = checks["steps_refused"][TABLE]
        assert "refused by the store" in why and ("does not follow" in why
                                                  or "where this engine left it" in why)
        assert services.metrics.steps_refused[TABLE] == 1
        assert 'livetable_steps_refused_total{table="t1"} 1.0' in \
            services.metrics.render().decode()

        # a round opens again, in the store this time, from the next shoe, and takes bets
        assert lost.round_id == f"{TABLE}.1.1"
        again = f"{TABLE}.2.1"
        async with asyncio.timeout(10):
            while True:
                view = await store.round_view(again)
                if view is not None:
                    break
                await asyncio.sleep(0.01)
        assert view.state == "betting" and await store.round_view(lost.round_id) is None
        answer = await place_bet(store, BetRequest(player_id="p1", table=TABLE, bet_id="b1",
                                                  round_id=again, spot="P1",
                                                  amount=100), now_ms())
        assert isinstance(answer, p.BetAccepted), answer
        # the gateway went with the table, to its new epoch (its clients resynced)
        assert services.gateway.feeds[TABLE].view().round_id == again
        assert "restored" in checks or "restored" in (await readiness(services))[1]
        assert runner.halted is None and runner.refusals == 1
    finally:
        await services.stop()
    # every event in the store once, numbered without a hole, and the ledger is right
    stored = SQLiteStore(tmp_path / "db.sqlite3")
    state = await stored.load_table(TABLE)
    assert state is not None
    head = TableEngine.from_bytes(state).state
    logged = await stored.events_after(TABLE, head.epoch, 0, 10_000)
    assert logged is not None and len(logged) == head.seq
    report = await stored.audit()
    assert report.ok, report.problems
    await stored.close()


class RefusingStore:
    """A store that refuses every step after the first as out of step: its rounds and the
    engine state it holds disagree, so a reload does not help."""

    def __init__(self, inner: SQLiteStore) -> None:
        self.inner = inner
        self.steps = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def commit_step(self, table: str, state: bytes, events: list[tuple[int, int, bytes]],
                          effects: list[Any], now: int, *,
                          snapshot: bytes = b"") -> list[Settled]:
        self.steps += 1
        if self.steps > 1:
            raise OutOfStep(f"table {table}: round r1 is settled: it cannot go settling")
        return await self.inner.commit_step(table, state, events, effects, now,
                                             snapshot=snapshot)


async def test_a_step_refused_again_after_the_reload_holds_the_table(tmp_path: Path) -> None:
    """The engine reloads once for a refused step; if the store refuses the step the
    reloaded engine takes too, reloading again would go round for ever: the table is held,
    as for a bug, and says why."""
    store = RefusingStore(SQLiteStore(tmp_path / "db.sqlite3"))
    refused: list[str] = []
    runner = TableRunner(TABLE, store, MemoryBus(),  # a Store by delegation
                         timing=Timing(betting_ms=50, deal_interval_ms=1,
                                       reveal_interval_ms=1, between_rounds_ms=10),
                         on_refused=refused.append)
    await runner.start()
    try:
        async with asyncio.timeout(10):
            while runner.halted is None:
                await asyncio.sleep(0.01)
        assert refused == [TABLE, TABLE] and runner.refusals == 2
        assert "refused the step again" in runner.halted
        steps = store.steps
        await asyncio.sleep(0.3)
        assert store.steps == steps  # held: no step tried since
    finally:
        await runner.stop()
        await store.close()


class ClosingRefusedOnceStore:
    """A store that refuses the close of betting once as out of step (PostgreSQL: the store
    is not where the engine left it — a failover lost what it wrote), writing nothing."""

    def __init__(self, inner: SQLiteStore) -> None:
        self.inner = inner
        self.refused = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def commit_step(self, table: str, state: bytes, events: list[tuple[int, int, bytes]],
                          effects: list[Any], now: int, *,
                          snapshot: bytes = b"") -> list[Settled]:
        closes = any(isinstance(e, SetBetting) and e.status == "closed" for e in effects)
        if closes and not self.refused:
            self.refused += 1
            raise OutOfStep("the store's head is not where this engine left it")
        return await self.inner.commit_step(table, state, events, effects, now,
                                             snapshot=snapshot)


async def test_a_step_refused_as_out_of_step_reloads_the_engine(tmp_path: Path) -> None:
    """The runner drops its engine and steps on from the store's state: the close is taken
    again, the round settles, the event log has no hole, and the table is not held."""
    store = ClosingRefusedOnceStore(SQLiteStore(tmp_path / "db.sqlite3"))
    bus = MemoryBus()
    batches: list[TableBatch] = []
    bus.subscribe(batches.append)
    runner = TableRunner(TABLE, store, bus,  # a Store by delegation
                         timing=Timing(betting_ms=300, deal_interval_ms=5,
                                       reveal_interval_ms=5, between_rounds_ms=50))
    await runner.start()
    try:
        async with asyncio.timeout(10):
            while not [b for b in batches for _, f in b.frames
                       if isinstance(EVENTS.decode(f), p.RoundSettled)]:
                await asyncio.sleep(0.01)
        assert runner.halted is None and runner.alive
    finally:
        await runner.stop()
    assert store.refused == 1
    head = max(seq for b in batches for seq, _ in b.frames)
    logged = await store.events_after(TABLE, batches[0].epoch, 0, 10_000)
    assert logged is not None and len(logged) == head  # every event once, no hole
    assert [EVENTS.decode(f).seq for f in logged] == list(range(1, head + 1))
    report = await store.audit()
    assert report.ok, report.problems
    await store.close()
