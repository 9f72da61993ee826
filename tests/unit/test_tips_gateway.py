"""Tips at the gateway (livetable/server/gateway/tips.py): a tip waiting on its wallet does
not hold up the frames sent after it — a seamless debit may take seconds, and the bets and
pings behind it are read and answered meanwhile, as behind a slow bet; and a tip taken
stands when the bus cannot tell the dealer consoles (an outage of the news, not of the
money: no `error` follows its `tip_accepted`)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from test_player_commands import _Socket

from livetable import protocol as p
from livetable.auth import mint
from livetable.betting.tips import TipAnswer, TipRequest
from livetable.bus import TableBatch
from livetable.config import Settings
from livetable.metrics import Metrics
from livetable.server.gateway import Gateway
from livetable.store.base import StoreUnavailable
from livetable.store.sqlite import SQLiteStore

#: Waits on the wall clock (asyncio.sleep above zero): not in bin/test --fast (tests/tiers.py).
pytestmark = pytest.mark.sleeps


class HeldTips(SQLiteStore):
    """The store, with every tip held until the test lets it through."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.release = asyncio.Event()

    async def place_tip(self, tip: TipRequest, now: int) -> TipAnswer:
        await self.release.wait()
        return await super().place_tip(tip, now)


async def until(ws: _Socket, kind: str) -> dict[str, Any]:
    async with asyncio.timeout(5):
        while True:
            for frame in ws.sent:
                if frame["type"] == kind:
                    return frame
            await asyncio.sleep(0.005)


async def test_a_tip_waiting_on_its_wallet_holds_up_no_frame_after_it(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, secret=b"s" * 32, heartbeat=0, player_balance=1000)

    async def execute(table: str, command: Any) -> p.Ack | p.Error:
        raise AssertionError("no dealer command here")

    store = HeldTips(tmp_path / "db.sqlite3")
    gateway = Gateway(settings, store, execute, Metrics(), b"s" * 32)
    snapshot = p.encode(p.TableSnapshot(id="t1", name="T1", phase="idle", mode="auto"))
    gateway.deliver(TableBatch(table="t1", epoch=1, seq=0, frames=[], snapshot=snapshot))
    token = mint(b"s" * 32, "player", "p1", "P1", 3600)
    ws = _Socket({"type": "hello", "v": 1, "table": "t1", "token": token},
                 {"type": "tip", "tip_id": "t-1", "amount": 100},
                 {"type": "ping", "t": 7})
    session = asyncio.create_task(gateway.serve(ws, "player"))  # type: ignore[arg-type]
    try:
        welcome = await until(ws, "welcome")
        assert welcome["player"]["tips"] == {"min": 10, "max": 5000}
        assert (await until(ws, "pong"))["t"] == 7  # answered while the tip waits
        assert not [f for f in ws.sent if f["type"] == "tip_accepted"]
        store.release.set()
        taken = await until(ws, "tip_accepted")
        assert (taken["tip_id"], taken["balance"]) == ("t-1", 900)
        assert [f["type"] for f in ws.sent] == ["welcome", "pong", "tip_accepted"]
    finally:
        await ws.close()
        async with asyncio.timeout(5):
            await session
        await store.close()


async def test_a_tip_taken_stands_when_the_dealer_consoles_cannot_be_told(
        tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, secret=b"s" * 32, heartbeat=0, player_balance=1000)

    async def execute(table: str, command: Any) -> p.Ack | p.Error:
        raise AssertionError("no dealer command here")

    async def bus_down(note: Any) -> None:
        raise StoreUnavailable("Redis bus: Connection refused")

    metrics = Metrics()
    gateway = Gateway(settings, SQLiteStore(tmp_path / "db.sqlite3"), execute, metrics,
                      b"s" * 32)
    gateway.chat.publish = bus_down
    snapshot = p.encode(p.TableSnapshot(id="t1", name="T1", phase="idle", mode="auto"))
    gateway.deliver(TableBatch(table="t1", epoch=1, seq=0, frames=[], snapshot=snapshot))
    token = mint(b"s" * 32, "player", "p1", "P1", 3600)
    ws = _Socket({"type": "hello", "v": 1, "table": "t1", "token": token},
                 {"type": "tip", "tip_id": "t-1", "amount": 100},
                 {"type": "ping", "t": 1})
    session = asyncio.create_task(gateway.serve(ws, "player"))  # type: ignore[arg-type]
    try:
        await until(ws, "pong")
        await until(ws, "tip_accepted")
        assert sorted(f["type"] for f in ws.sent) == ["pong", "tip_accepted", "welcome"]
        assert metrics.counters["livetable_tip_news_lost_total"] == 1
        assert metrics.tips == {"accepted": 1}
    finally:
        await ws.close()
        async with asyncio.timeout(5):
            await session
        await gateway.store.close()
