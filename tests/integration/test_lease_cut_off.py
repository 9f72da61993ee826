"""A lease holder cut off from Redis stops driving before its lease lapses (host/scaleout.py).

Seen in the fault runs (docs/operations.md §8): an engine cut off from Redis by a partition
— bytes held, nothing closed — kept driving its table past its 2 s lease. Its renewal waited
on the socket for its timeout (60 s) and never came back to the check of how long the lease
surely lasts; only PostgreSQL's fencing stopped it once a standby had taken the table. Now
every renewal has a deadline inside the lease: when it passes, the engine drops the table
(its runner stops, and steps no more even before that: :meth:`LeasedTables.surely_holds`).

Here the engine reaches Redis through a TCP proxy that stalls (tests/e2e/tcpproxy.py); a
standby reaches Redis directly. The moment the standby takes the lapsed lease, the engine
must already have stopped driving the table.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis
from redis_util import start_redis

from livetable.bus.redis_conn import connection_pool
from livetable.host.scaleout import LeasedTables

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from tcpproxy import TcpProxy  # tests/e2e is not a package

pytestmark = [pytest.mark.redis]

TTL_MS = 600
POLL = 0.1


class _Runner:
    """What LeasedTables asks of a runner; it says whether it would step now."""

    def __init__(self) -> None:
        self.alive = True
        self.holds: Any = lambda: True

    def driving(self) -> bool:
        return bool(self.alive and self.holds())

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        self.alive = False

    async def execute(self, command: Any) -> Any:
        raise AssertionError("no command is sent here")


class _Store:
    def __init__(self) -> None:
        self.fence_tokens: dict[str, int] = {}

    async def claim(self, table: str) -> int:
        self.fence_tokens[table] = self.fence_tokens.get(table, 0) + 1
        return self.fence_tokens[table]


async def test_an_engine_cut_off_from_redis_stops_before_a_standby_takes_over(
        tmp_path: Path) -> None:
    server = start_redis(tmp_path)
    engine_runner = _Runner()
    at_takeover: list[bool] = []  # whether the engine still drove when the standby took
    taken = asyncio.Event()

    def standby_runner(table: str) -> _Runner:
        at_takeover.append(engine_runner.driving())
        taken.set()
        return _Runner()

    with TcpProxy(server.port) as proxy:
        # the engine's lease connections as services.py makes them (no socket timeout of
        # their own), through the proxy
        cut = Redis(connection_pool=connection_pool(f"redis://127.0.0.1:{proxy.port}/0",
                                                    max_connections=8, timeout=5))
        direct = Redis.from_url(server.url)
        engine = LeasedTables(cut, _Store(), ["t1"], lambda t: engine_runner,  # type: ignore[arg-type,return-value]  # a runner's stand-in
                              ttl_ms=TTL_MS, poll=POLL, owner="engine")
        standby = LeasedTables(direct, _Store(), ["t1"], standby_runner,  # type: ignore[arg-type]  # a runner's stand-in
                               ttl_ms=TTL_MS, poll=POLL, owner="standby")
        try:
            await engine.start()
            assert engine.held == ["t1"] and engine_runner.driving()
            await standby.start()
            assert standby.held == []
            proxy.stall()  # the partition: nothing passes, nothing is closed
            async with asyncio.timeout(20):
                await taken.wait()
            assert at_takeover == [False], "the engine drove the table past its lease"
            assert not engine_runner.alive
        finally:
            proxy.restore()
            await asyncio.wait_for(engine.stop(), 20)
            await asyncio.wait_for(standby.stop(), 20)
            await cut.aclose()
            await direct.aclose()
            server.stop()
