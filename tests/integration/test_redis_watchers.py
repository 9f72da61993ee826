"""Players online summed over gateways: the Redis bus's census.

Each gateway writes its count of a table's watchers into one field of the table's hash and
reads the others'; a gateway that stops takes its field out, one that is killed drops out
of the sum once its field is stale.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from redis.asyncio import Redis
from redis_util import start_redis

from livetable.bus import redis as bus_redis
from livetable.bus.keys import RedisKeys
from livetable.bus.redis import RedisBus

pytestmark = [pytest.mark.redis]


async def test_each_gateway_hears_the_others_counts_and_a_stopped_one_leaves(
        tmp_path: Path) -> None:
    with start_redis(tmp_path) as server:
        client = Redis.from_url(server.url)
        # the census needs no store: it reads and writes only the watcher hash
        a = RedisBus(client, ["t1"], None)  # type: ignore[arg-type]
        b = RedisBus(client, ["t1"], None)  # type: ignore[arg-type]
        c = RedisBus(client, ["t1"], None)  # type: ignore[arg-type]
        try:
            assert await a.watchers_elsewhere("t1", 3) == 0  # nobody else yet
            assert await b.watchers_elsewhere("t1", 5) == 3
            assert await c.watchers_elsewhere("t1", 0) == 8
            assert await a.watchers_elsewhere("t1", 2) == 5  # b's 5, c's 0
            assert await a.watchers_elsewhere("t2", 1) == 0  # per table
            await b.close()  # a gateway that stops says so
            assert await a.watchers_elsewhere("t1", 2) == 0
            assert await c.watchers_elsewhere("t1", 1) == 2
        finally:
            await a.close()
            await c.close()
            await client.aclose()


async def test_a_killed_gateways_count_goes_stale_and_is_deleted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with start_redis(tmp_path) as server:
        client = Redis.from_url(server.url)
        key = RedisKeys().watchers("t1")
        a = RedisBus(client, ["t1"], None)  # type: ignore[arg-type]
        try:
            now = int(time.time() * 1000)
            # a gateway killed a while ago, one alive, and a field nothing of ours writes
            await client.hset(key, mapping={"gone": f"40 {now - 1}", "alive": f"7 {now + 60_000}",
                                            "junk": "many"})
            assert await a.watchers_elsewhere("t1", 1) == 7
            assert set(await client.hkeys(key)) == {b"alive", a.gateway_id.encode()}
            monkeypatch.setattr(bus_redis, "WATCHERS_STALE_AFTER_MS", -1)  # a's own too
            assert await a.watchers_elsewhere("t1", 1) == 7  # its own never counts
        finally:
            await a.close()
            await client.aclose()


async def test_an_unreachable_redis_gives_no_count_and_no_error(tmp_path: Path) -> None:
    with start_redis(tmp_path) as server:
        client = Redis.from_url(server.url, socket_connect_timeout=0.5)
        a = RedisBus(client, ["t1"], None)  # type: ignore[arg-type]
        server.kill()
        try:
            assert await a.watchers_elsewhere("t1", 1) is None
        finally:
            await a.close()
            await client.aclose()
