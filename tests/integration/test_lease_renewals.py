"""A table's lease outlives a busy event loop, not a stuck one (host/scaleout.py).

Seen in the scale-out bench (docs/benchmarks.md, "The lease can move in a long burst"): a
`livetable serve` process saturated by a 100,000-bet intake renewed its table's lease late
— the renewal waited in line on the loop that served the websockets — a standby took the
lapsed lease and cancelled the round in betting. Here the engine's event loop is blocked
for three times the lease's time to live, as a burst of Python work blocks it, while a
standby polls for the lease from another thread: the lease must stay the engine's. A
loop blocked past the stall limit is stuck, not busy: then the standby gets it.

And a lease holder cut off from Redis stops driving before its lease lapses. Seen in the
fault runs (docs/operations.md §8): an engine cut off from Redis by a partition — bytes
held, nothing closed — kept driving its table past its 2 s lease: its renewal waited on the
socket for its timeout (60 s). Now every renewal has a deadline inside the lease. There the
engine reaches Redis through a TCP proxy that stalls (tests/e2e/tcpproxy.py), a standby
directly: the moment the standby takes the lapsed lease, the engine must already have
stopped driving the table.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from redis_util import start_redis

from livetable.bus.redis_conn import connection_pool
from livetable.host.scaleout import LeasedTables

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from tcpproxy import TcpProxy  # tests/e2e is not a package

pytestmark = [pytest.mark.redis]

#: The leases' time to live here. 600 ms let a loaded full run (four workers on two cores,
#: browsers beside) keep the renewal thread off the CPU past a lease: the standby took the
#: busy engine's lease (seen once). The product's is 2 s.
TTL_MS = 1200
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
    """The fencing tokens PostgreSQL would issue: one more on every claim."""

    def __init__(self) -> None:
        self.fence_tokens: dict[str, int] = {}
        self.claims = 0

    async def claim(self, table: str) -> int:
        self.claims += 1
        self.fence_tokens[table] = self.claims
        return self.claims


def _standby(url: str, stop: threading.Event, took: list[float]) -> None:
    """Another engine, on a thread and loop of its own: it polls for the lease."""
    async def main() -> None:
        client = Redis.from_url(url)
        standby = LeasedTables(client, _Store(), ["t1"], lambda t: _Runner(),  # type: ignore[arg-type,return-value]
                               ttl_ms=TTL_MS, poll=POLL, owner="standby")
        await standby.start()  # takes the lease when it lapses, and keeps it
        try:
            while not stop.is_set():
                if standby.held and not took:
                    took.append(time.monotonic())
                await asyncio.sleep(POLL / 2)
        finally:
            await asyncio.wait_for(standby.stop(), 10)
            await client.aclose()

    asyncio.run(main())


async def _blocked_loop(tmp_path: Path, seconds: float, stall_limit: float) -> tuple[
        list[str], list[float]]:
    """The engine holds t1; its loop is then blocked ``seconds`` while the standby polls.
    The tables the engine drives after, and when (if ever) the standby took the lease."""
    server = start_redis(tmp_path)
    client = Redis.from_url(server.url)
    engine = LeasedTables(client, _Store(), ["t1"], lambda t: _Runner(),  # type: ignore[arg-type,return-value]
                          ttl_ms=TTL_MS, poll=POLL, owner="engine", stall_limit=stall_limit)
    stop, took = threading.Event(), list[float]()
    standby = threading.Thread(target=_standby, args=(server.url, stop, took))
    try:
        await engine.start()
        assert engine.held == ["t1"]
        standby.start()
        await asyncio.sleep(0.3)
        time.sleep(seconds)  # the engine's event loop does nothing else meanwhile
        await asyncio.sleep(0.5)  # its loop sees what happened
        for _ in range(50):  # and a table it lost is dropped (its runner stopped)
            if (engine.held == ["t1"] and not took) or not engine.held:
                break
            await asyncio.sleep(0.1)
        stop.set()
        standby.join()
        return engine.held, took
    finally:
        stop.set()
        await asyncio.wait_for(engine.stop(), 10)
        await client.aclose()
        server.stop()


async def test_a_busy_engine_loop_keeps_its_lease(tmp_path: Path) -> None:
    held, took = await _blocked_loop(tmp_path, seconds=3 * TTL_MS / 1000, stall_limit=20.0)
    assert took == [], "the standby took the lease of an engine whose loop was only busy"
    assert held == ["t1"]


async def test_a_stuck_engine_loop_loses_its_lease(tmp_path: Path) -> None:
    # blocked past the stall limit and a lease: the renewals stop, the lease lapses
    held, took = await _blocked_loop(tmp_path, seconds=1.0 + 2 * TTL_MS / 1000, stall_limit=1.0)
    assert took, "the lease of a stuck engine loop never lapsed"
    assert held == []  # the engine saw it lost the table, and stopped driving it


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
