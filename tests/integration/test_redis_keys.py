"""Every key and channel livetable uses in Redis starts with its prefix.

The bus, the leases, the dealer command queue and the chat room run on a Redis of our own
with the prefix ``zz`` (the money in a PostgreSQL database of the test's own); a table plays
a round with a bet in it, opened by a dealer command through the queue. Then every key in
Redis (``SCAN``) and every pub/sub channel must start with ``zz:`` — so that two deployments
can share one Redis, and an ACL of ``~zz:*`` ``&zz:*`` is all a deployment needs
(deploy/redis-users.acl.template).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
from redis.asyncio import Redis

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bets import place_bet
from pg_util import fresh_database
from redis_util import start_redis

from livetable import protocol as p
from livetable.betting.slips import BetRequest
from livetable.bus.keys import RedisKeys
from livetable.bus.redis import RedisBus
from livetable.engine import Timing
from livetable.host.runner import TableRunner
from livetable.host.scaleout import LeasedTables, RedisControl
from livetable.server.chatroom import RedisChatRoom
from livetable.store.postgres import PostgresStore

pytestmark = [pytest.mark.redis]

PREFIX = "zz"
FAST = Timing(betting_ms=1_000, deal_interval_ms=10, reveal_interval_ms=10,
              between_rounds_ms=60_000)


async def _until(condition: object, timeout: float = 10.0) -> None:
    async def poll() -> None:
        while not await condition():  # type: ignore[operator]  # an async predicate
            await asyncio.sleep(0.05)
    await asyncio.wait_for(poll(), timeout)


async def test_every_key_and_channel_starts_with_the_prefix(tmp_path: Path) -> None:
    with start_redis(tmp_path) as server:
        client = Redis.from_url(server.url)
        store = PostgresStore(fresh_database(), max_connections=4, replication="none")
        await store.open()
        bus = RedisBus(client, ["t1"], store, prefix=PREFIX)
        seen: list[int] = []
        bus.subscribe(lambda batch: seen.append(batch.seq))
        await bus.start()
        leases = LeasedTables(client, store, ["t1"],
                              lambda t: TableRunner(t, store, bus, timing=FAST), poll=0.1,
                              keys=RedisKeys(PREFIX))
        control = RedisControl(client, prefix=PREFIX)
        try:
            await leases.start()
            runner = leases.runners["t1"]
            assert runner.engine is not None
            answer = await control.execute("t1", p.OpenBetting())  # through the queue
            assert isinstance(answer, p.Ack), answer
            round_id = runner.engine.state.round_id
            assert round_id is not None
            await store.ensure_player("p1", "Ann", 1_000, 0)
            accepted = await place_bet(store, BetRequest(
                player_id="p1", table="t1", bet_id="b1", round_id=round_id, spot="P1",
                amount=100), runner.clock())
            assert isinstance(accepted, p.BetAccepted)
            await _until(lambda: _phase(runner, "settled"))
            # the table chat's keys: a line, a mute, a rate window, who deals
            room = RedisChatRoom(client, RedisKeys(PREFIX))
            await room.add(p.ChatMessage(id="", table="t1", sender="Ann", role="player",
                                         text="hi", at=1, player_id="p1"))
            await room.mute("t1", "p1", 5, 1)
            assert await room.take_turn("p1", 1)
            await room.set_presenter("t1", p.Presenter(name="Mai"))
            channels = [c.decode() for c in await client.pubsub_channels()]  # type: ignore[union-attr]
            assert seen and channels
            keys = [k.decode() async for k in client.scan_iter(count=1000)]
        finally:
            await leases.stop()
            await bus.close()
            await client.aclose()
            await store.close()
    stray = sorted(k for k in keys + channels if not k.startswith(f"{PREFIX}:"))
    assert stray == [], f"not under the prefix {PREFIX}: {stray}"
    assert any(":lease:" in k for k in keys)
    assert {f"{PREFIX}:table:{{t1}}:chat", f"{PREFIX}:chat-turn:p1"} <= set(keys)


async def _phase(runner: TableRunner, phase: str) -> bool:
    return runner.engine is not None and runner.engine.phase == phase
