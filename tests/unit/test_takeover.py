"""docs/decisions.md#every-failure-loud-and-recoverable: an engine takeover mid-settlement costs
the players nothing but a pause.

At a standby's takeover mid-settlement both gateways closed every client with 4011
("events were lost on the way"). The old engine had stored the step that settles the round
and died before publishing it; the new engine, rebuilt from the store, published first a
step without events (its recovery) and settlement results, both at the store's head —
ahead of the gateways' head, with nothing between: a gap to them. The Redis bus now catches
up from the table's log before it delivers a batch ahead of its head, events or not.

Here the engines are two runners on one store, and their batches cross a Redis bus's
receiving side (encoded as on the wire) to a gateway with players connected, as between
processes; the old runner dies between storing the settling step and publishing it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from bets import place_bet
from test_gateway import FakeWebSocket, settle

from livetable import protocol as p
from livetable.auth import mint
from livetable.betting.slips import BetRequest
from livetable.bus import BATCH_DECODER, BATCH_ENCODER, SessionEnd, TableBatch, TableNote
from livetable.bus.redis import RedisBus
from livetable.clock import now_ms
from livetable.config import Settings
from livetable.engine import Timing
from livetable.host.runner import TableRunner
from livetable.metrics import Metrics
from livetable.server.gateway import Gateway
from livetable.store import SQLiteStore

#: Waits on the wall clock (asyncio.sleep above zero): not in bin/test --fast (tests/tiers.py).
pytestmark = pytest.mark.sleeps

TABLE = "t1"
SECRET = b"t" * 32
PLAYERS = ["p0", "p1", "p2", "p3"]
#: Betting stays open until the test has placed its bets and closes it (a dealer's close):
#: a 400 ms window closed before the last bet on a busy CI machine (BetRejected
#: betting_closed), the bets racing the clock instead of the takeover being tested.
TIMING = Timing(betting_ms=60_000, deal_interval_ms=5, reveal_interval_ms=5,
                between_rounds_ms=300, close_grace_ms=0)


class Wire:
    """One engine's publishing side: each batch crosses to the gateway's bus as bytes. A
    process that dies (``dies_at`` a round_settled) stores the step and publishes nothing
    from then on."""

    def __init__(self, bus: RedisBus, dies_at_settlement: bool = False) -> None:
        self.bus = bus
        self.dies_at_settlement = dies_at_settlement
        self.dead = asyncio.Event()

    async def publish(self, batch: TableBatch) -> None:
        if self.dies_at_settlement and any(b'"round_settled"' in f for _, f in batch.frames):
            self.dead.set()
            await asyncio.Event().wait()  # killed: the stored step never leaves
        await self.bus._receive(BATCH_DECODER.decode(BATCH_ENCODER.encode(batch)))

    def subscribe(self, deliver: Any) -> None:
        raise AssertionError("engines do not subscribe")

    async def end_session(self, end: SessionEnd) -> None:
        raise AssertionError("engines end no session")

    def on_session_end(self, close: Any) -> None:
        raise AssertionError("engines do not subscribe")

    async def publish_note(self, note: TableNote) -> None:
        raise AssertionError("engines publish no chat notes")

    def subscribe_notes(self, deliver: Any) -> None:
        raise AssertionError("engines do not subscribe")

    async def watchers_elsewhere(self, table: str, here: int) -> int | None:
        raise AssertionError("engines count no watchers")

    async def balances_moved(self, players: list[str]) -> None:
        raise AssertionError("engines take no bets")

    def on_balances_elsewhere(self, tell: Any) -> None:
        raise AssertionError("engines do not subscribe")

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None


async def test_a_takeover_mid_settlement_closes_no_client(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "db.sqlite3")
    store.settle_chunk = 2  # a player's two bets a chunk: the round settles in four
    settings = Settings(data_dir=tmp_path, send_queue=256, secret=SECRET, event_log_size=100,
                        heartbeat=0)

    async def execute(table: str, command: Any) -> p.Ack | p.Error:
        return p.Error(code="table_unavailable", message="no dealer here")

    gateway = Gateway(settings, store, execute, Metrics(), SECRET)
    bus = RedisBus(None, [TABLE], store)  # type: ignore[arg-type]  # its receiving side only
    bus.subscribe(gateway.deliver)
    old_wire = Wire(bus, dies_at_settlement=True)
    old = TableRunner(TABLE, store, old_wire, timing=TIMING)
    for pid in PLAYERS:
        await store.ensure_player(pid, pid.upper(), 10_000, 0)
    await old.start()
    sockets = {pid: FakeWebSocket({"type": "hello", "v": 1, "table": TABLE,
                                   "token": mint(SECRET, "player", pid, pid, 3600)})
               for pid in PLAYERS}
    sessions = [asyncio.create_task(gateway.serve(ws, "player"))  # type: ignore[arg-type]
                for ws in sockets.values()]
    new: TableRunner | None = None
    try:
        await settle(lambda: all(any(m["type"] == "round_opened" for m in ws.sent)
                                 for ws in sockets.values()), timeout=10)
        opened = next(m for m in sockets["p0"].sent if m["type"] == "round_opened")
        bets: dict[str, list[str]] = {}
        for pid in PLAYERS:
            for spot in ("P1", "P2"):
                answer = await place_bet(store, BetRequest(
                    player_id=pid, table=TABLE, bet_id=f"{pid}-{spot}",
                    round_id=opened["round_id"], spot=spot, amount=100), now_ms())
                assert isinstance(answer, p.BetAccepted), answer
                bets.setdefault(pid, []).append(answer.bet_id)
        closed = await old.execute(p.CloseBetting())
        assert isinstance(closed, p.Ack), closed

        async with asyncio.timeout(10):
            await old_wire.dead.wait()  # the settling step is stored, not published
        await old.stop()  # kill -9
        view = await store.round_view(opened["round_id"])
        assert view is not None and view.state in ("settling", "settled")

        new = TableRunner(TABLE, store, Wire(bus), timing=TIMING)
        await new.start()  # the standby takes over
        await settle(lambda: any(ws.close_codes for ws in sockets.values()) or all(
            sorted(m["bet_id"] for m in ws.sent if m["type"] == "bet_settled") == bets[pid]
            and any(m["type"] == "round_opened" and m["round_id"] != opened["round_id"]
                    for m in ws.sent)
            for pid, ws in sockets.items()), timeout=10)
    finally:
        for runner in (old, new):
            if runner is not None:
                await runner.stop()
        for ws in sockets.values():
            await ws.close(1000)
        async with asyncio.timeout(5):
            await asyncio.gather(*sessions)

    for pid, ws in sockets.items():
        assert ws.close_codes == [1000], (pid, ws.close_codes)  # ours: no 4011 before
        welcome, *rest = ws.sent
        seqs = [m["seq"] for m in rest if "seq" in m]
        # every event, in order, once, from the welcome on
        assert seqs == list(range(welcome["seq"] + 1, welcome["seq"] + 1 + len(seqs))), pid
        settled = [m["bet_id"] for m in rest if m["type"] == "bet_settled"]
        assert sorted(settled) == sorted(bets[pid]), pid  # each bet settled once
    assert gateway.metrics.counters.get("livetable_feed_gaps_total", 0) == 0
    report = await store.audit()
    assert report.ok, report.problems
    await store.close()
