"""Balances moved on one gateway, heard on the others: the Redis bus's ``balances``
channel (livetable/bus/redis.py). The gateway that took a bet tells its own connections;
the others hear the players named, and the sender does not hear itself."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from redis.asyncio import Redis
from redis_util import start_redis

from livetable.bus.redis import RedisBus

pytestmark = [pytest.mark.redis]


async def test_the_other_gateways_hear_whose_balance_moved_and_the_sender_does_not(
        tmp_path: Path) -> None:
    with start_redis(tmp_path) as server:
        client = Redis.from_url(server.url)
        heard: dict[str, list[list[str]]] = {"a": [], "b": [], "c": []}
        buses = {name: RedisBus(client, [], None) for name in heard}  # type: ignore[arg-type]
        try:
            for name, bus in buses.items():
                bus.subscribe(lambda batch: None)  # a gateway's bus: it subscribes
                bus.on_balances_elsewhere(heard[name].append)
                await bus.start()
                assert bus.healthy
            await buses["a"].balances_moved(["p1", "p2"])
            await buses["b"].balances_moved(["p3"])
            async with asyncio.timeout(5):
                while len(heard["c"]) < 2 or not heard["a"] or not heard["b"]:
                    await asyncio.sleep(0.01)
            await buses["c"].balances_moved(["p4"])  # after it, nothing more is on the way
            async with asyncio.timeout(5):
                while len(heard["a"]) < 2 or len(heard["b"]) < 2:
                    await asyncio.sleep(0.01)
            assert heard == {"a": [["p3"], ["p4"]], "b": [["p1", "p2"], ["p4"]],
                             "c": [["p1", "p2"], ["p3"]]}
        finally:
            for bus in buses.values():
                await bus.close()
            await client.aclose()
