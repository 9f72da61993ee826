"""The runner when the store fails a step: the table goes on without losing the step.

A commit can fail before the store wrote anything (the store is unreachable) or after (the
reply was lost with the connection): the store raises StoreUnavailable either way. Either
way the engine has already taken the step in memory; the runner must rebuild it from the
store before the next step, or the next commit would skip the failed step's events (a hole
in the event log) and its effects (a close of betting, a settlement never applied to the
ledger). Found by the scale-out test that kills Redis while cards are dealt
(tests/integration/test_scaleout_redis_restart.py).

Any other exception out of the store is a bug, not an outage: retried, it would fail the
same way for ever. The runner logs it and holds the table still (issue 16).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, TypeVar

import msgspec
import pytest

from livetable import protocol as p
from livetable.bus import MemoryBus, TableBatch
from livetable.engine import SetBetting, SettleRound, Timing
from livetable.server.runner import SETTLE_AHEAD, TableRunner
from livetable.store import BetRequest, SQLiteStore
from livetable.store.base import Settled, StoreUnavailable

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
    runner = TableRunner(TABLE, store, bus,  # type: ignore[arg-type]  # a Store by delegation
                         timing=Timing(betting_ms=300, deal_interval_ms=5,
                                       reveal_interval_ms=5, between_rounds_ms=50))
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
        answer = await store.place_bet(BetRequest(player_id="p1", table=TABLE, bet_id="b1",
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
    assert logged is not None and len(logged) == head  # every event once, no hole
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
    runner = TableRunner(TABLE, store, MemoryBus(),  # type: ignore[arg-type]  # a Store by delegation
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
