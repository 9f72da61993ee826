"""Results stored before an engine's death reach the players connected, once (host/results.py).

Seen in the fault runs (docs/operations.md §8): an engine was killed after storing a
settlement chunk and before publishing it; the standby that took the table found nothing left
to settle and published nothing — 50 players connected never got ``bet_settled`` for 400
bets (the database had them settled). Now a runner that takes a table over publishes again
the results of every round not marked published, and the gateways drop what they delivered
already.

The same window opens when a chunk's commit reply is lost in a PostgreSQL failover: the
runner tried the next chunk, and the one stored was never published. Now a runner whose
call failed publishes again what it cannot vouch for.

Real PostgreSQL and Redis: the engines and the gateway each have a store and a Redis bus of
their own, as processes would. The old engine dies — a controlled hook on its bus — at the
first settlement chunk it publishes after the round's settling step went out: that chunk
(and the one its settlement task stored ahead) is stored, never published. The new engine
takes the lease's fencing token and starts. Afterwards every player's results are checked
against the database: each acknowledged bet settled, its result received once, as stored.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from bets import place_bet
from pg_util import fresh_database
from redis.asyncio import Redis
from redis_util import RedisServer

from livetable import protocol as p
from livetable.auth import mint
from livetable.betting.slips import BetRequest
from livetable.bus import TableBatch, TableNote
from livetable.bus.redis import RedisBus
from livetable.bus.redis_conn import connection_pool
from livetable.clock import now_ms
from livetable.config import Settings
from livetable.engine import Timing
from livetable.host.runner import TableRunner
from livetable.metrics import Metrics
from livetable.server.gateway import Gateway
from livetable.store.base import Settled, StoreUnavailable
from livetable.store.postgres import PostgresStore

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
from test_gateway import FakeWebSocket, settle  # the gateway's own test doubles

pytestmark = [pytest.mark.redis]

TABLE = "t1"
SECRET = b"o" * 32
PLAYERS = [f"p{n}" for n in range(6)]
TIMING = Timing(betting_ms=2_000, deal_interval_ms=5, reveal_interval_ms=5,
                between_rounds_ms=300, close_grace_ms=0)


class DiesMidSettlement:
    """The old engine's bus: the real one, until the round's settling step has gone out;
    at the first settlement chunk published after it, the engine is killed — the chunk is
    stored, and never leaves."""

    def __init__(self, bus: RedisBus) -> None:
        self.bus = bus
        self.settling_out = False
        self.dead = asyncio.Event()

    async def publish(self, batch: TableBatch) -> None:
        if self.dead.is_set() or (self.settling_out and batch.private and not batch.frames):
            self.dead.set()
            await asyncio.Event().wait()  # killed here
        await self.bus.publish(batch)
        self.settling_out |= any(b'"round_settled"' in f for _, f in batch.frames)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.bus, name)


class LosesAReply(PostgresStore):
    """A store whose first settlement chunk's reply is lost (a failover): stored, then the
    call fails as an outage."""

    lost = False

    async def settle_pending(self, table: str, now: int) -> tuple[list[Settled], bool]:
        answer = await super().settle_pending(table, now)
        if answer[0] and not self.lost:
            self.lost = True
            raise StoreUnavailable("the connection was lost before the commit's reply")
        return answer


class Rig:
    """A gateway (its own store and Redis bus) with every player connected to table t1."""

    def __init__(self, url: str, redis_url: str) -> None:
        self.url, self.redis_url = url, redis_url
        self.store = PostgresStore(url, max_connections=4, replication="none")
        self.clients: list[Redis] = []
        settings = Settings(data_dir=Path("/nonexistent"), send_queue=256, secret=SECRET,
                            event_log_size=100, heartbeat=0)

        async def execute(table: str, command: Any) -> p.Ack | p.Error:
            return p.Error(code="table_unavailable", message="no dealer here")

        self.gateway = Gateway(settings, self.store, execute, Metrics(), SECRET)
        subscriber = Redis(connection_pool=connection_pool(redis_url, max_connections=4,
                                                           timeout=5, retry=False))
        self.bus = RedisBus(self.redis(), [TABLE], self.store, subscriber=subscriber)
        self.clients.append(subscriber)
        self.bus.subscribe(self.gateway.deliver)
        self.notes: list[TableNote] = []
        self.bus.subscribe_notes(self.notes.append)
        self.sockets: dict[str, FakeWebSocket] = {}
        self.sessions: list[asyncio.Task[None]] = []
        self.acked: dict[str, list[str]] = {}
        self.round_id = ""

    def redis(self) -> Redis:
        client = Redis.from_url(self.redis_url)
        self.clients.append(client)
        return client

    def engine_bus(self, store: PostgresStore) -> RedisBus:
        return RedisBus(self.redis(), [TABLE], store)

    async def start(self) -> None:
        for pid in PLAYERS:
            await self.store.ensure_player(pid, pid.upper(), 10_000, 0)
        await self.bus.start()

    async def bet(self) -> None:
        """Connect every player once the table is known, and bet twice each."""
        await settle(lambda: TABLE in self.gateway.feeds, timeout=10)
        self.sockets = {pid: FakeWebSocket({"type": "hello", "v": 1, "table": TABLE,
                                            "token": mint(SECRET, "player", pid, pid, 3600)})
                        for pid in PLAYERS}
        self.sessions = [asyncio.create_task(self.gateway.serve(ws, "player"))  # type: ignore[arg-type]
                         for ws in self.sockets.values()]
        await settle(lambda: all(any(m["type"] == "round_opened" for m in ws.sent)
                                 for ws in self.sockets.values()), timeout=10)
        opened = next(m for m in self.sockets["p0"].sent if m["type"] == "round_opened")
        self.round_id = opened["round_id"]
        answers = await asyncio.gather(*(place_bet(self.store, BetRequest(
            player_id=pid, table=TABLE, bet_id=f"{pid}-{spot}", round_id=self.round_id,
            spot=spot, amount=100), now_ms()) for pid in PLAYERS for spot in ("P1", "P2")))
        for answer in answers:
            assert isinstance(answer, p.BetAccepted), answer
            self.acked.setdefault(answer.bet_id.partition("-")[0], []).append(answer.bet_id)

    def results(self, pid: str) -> list[str]:
        return [m["bet_id"] for m in self.sockets[pid].sent if m["type"] == "bet_settled"]

    async def everything_delivered(self, publisher: RedisBus) -> None:
        """Every player has a result of each bet; and, the round marked published, a note
        the engine publishes reaches the gateway after all it published before."""
        await settle(lambda: all(sorted(set(self.results(pid))) == sorted(self.acked[pid])
                                 for pid in PLAYERS), timeout=20)
        async with self.store.pool.connection() as con:
            async with asyncio.timeout(20):
                while not await con.fetchval("SELECT published FROM rounds WHERE "
                                             "round_id = $1", self.round_id):
                    await asyncio.sleep(0.02)
        await publisher.publish_note(TableNote(table=TABLE, frame=b"{}"))
        await settle(lambda: bool(self.notes), timeout=10)

    async def close(self) -> None:
        for ws in self.sockets.values():
            await ws.close(1000)
        async with asyncio.timeout(5):
            await asyncio.gather(*self.sessions)
        await self.bus.close()

    async def check(self) -> None:
        """Each acknowledged bet settled in the database; each player got each of theirs
        once, as stored; no client closed but by the test."""
        stored = {message.bet_id: (player, message)
                  for player, message in await self.store.round_settlements(self.round_id)}
        assert sorted(stored) == sorted(b for bets in self.acked.values() for b in bets)
        for pid, ws in self.sockets.items():
            assert ws.close_codes == [1000], (pid, ws.close_codes)  # no 4011 either
            got = Counter(self.results(pid))
            assert got == Counter(self.acked[pid]), (pid, got)  # each once
            for message in (m for m in ws.sent if m["type"] == "bet_settled"):
                player, settled = stored[message["bet_id"]]
                assert player == pid and message == json.loads(p.encode(settled)), message
        assert (await self.store.audit()).ok
        await self.store.close()
        for client in self.clients:
            await client.aclose()


async def test_results_stored_before_an_engine_died_reach_each_player_once(
        redis_server: RedisServer) -> None:
    rig = Rig(fresh_database(), redis_server.url)
    # one player's two bets a chunk: the round settles in six, the first with its step
    old_store, new_store = (PostgresStore(rig.url, settle_chunk=2, max_connections=4,
                                          replication="none") for _ in range(2))
    old_bus = DiesMidSettlement(rig.engine_bus(old_store))
    new_bus = rig.engine_bus(new_store)
    await rig.start()
    await old_store.claim(TABLE)  # the lease's fencing token
    old = TableRunner(TABLE, old_store, old_bus, timing=TIMING)  # a Bus, dying
    new: TableRunner | None = None
    try:
        await old.start()
        await rig.bet()
        async with asyncio.timeout(20):
            await old_bus.dead.wait()  # a chunk stored, not published
        await old.stop()  # kill -9
        await new_store.claim(TABLE)  # the standby takes the lease
        new = TableRunner(TABLE, new_store, new_bus, timing=TIMING)
        await new.start()
        await rig.everything_delivered(new_bus)
    finally:
        for runner in (old, new):
            if runner is not None:
                await runner.stop()
        await rig.close()
    await rig.check()
    for store in (old_store, new_store):
        await store.close()


async def test_a_chunk_whose_commit_reply_was_lost_reaches_each_player_once(
        redis_server: RedisServer) -> None:
    rig = Rig(fresh_database(), redis_server.url)
    store = LosesAReply(rig.url, settle_chunk=2, max_connections=4)
    bus = rig.engine_bus(store)
    await rig.start()
    runner = TableRunner(TABLE, store, bus, timing=TIMING)
    try:
        await runner.start()
        await rig.bet()
        await rig.everything_delivered(bus)
        assert store.lost  # the reply of a chunk stored was lost
    finally:
        await runner.stop()
        await rig.close()
    await rig.check()
    await store.close()
