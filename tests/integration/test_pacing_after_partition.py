"""After a Redis partition the show keeps its pace, and an engine whose lease is in doubt
opens nothing (host/runner.py, engine/pacing.py).

Seen in the fault runs (docs/operations.md §8): after a 15 s Redis partition the held round's
six reveals and its settlement went out in the same millisecond — the runner, held up
publishing a reveal, then ticked once with every deadline past, and the engine caught up the
whole show in one step — and the old engine opened a round that the engine which had taken
the table cancelled 2 s later.

Real PostgreSQL and Redis; the runner publishes through a TCP proxy that holds bytes
(tests/e2e/tcpproxy.py). The runner's clock is the test's: it moves only when the test
moves it, and the test waits for the runner to be back waiting for its next deadline (a
hook on its wake-up event) before it looks — no sleeps.
"""

from __future__ import annotations

import asyncio
import itertools
import sys
from pathlib import Path
from typing import Literal

import msgspec
import pytest
from pg_util import fresh_database
from redis.asyncio import Redis
from redis_util import RedisServer

from livetable.bus import TableBatch
from livetable.bus.redis import RedisBus
from livetable.bus.redis_conn import connection_pool
from livetable.engine import Timing
from livetable.host.runner import TableRunner
from livetable.store.postgres import PostgresStore

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from tcpproxy import TcpProxy  # tests/e2e is not a package

pytestmark = [pytest.mark.redis]

TABLE = "t1"
T0 = 1_000_000_000_000
REVEAL_MS = 1_000
TIMING = Timing(betting_ms=1_000, deal_interval_ms=10, reveal_interval_ms=REVEAL_MS,
                between_rounds_ms=3_000, close_grace_ms=0)


class _Type(msgspec.Struct):
    type: str


_TYPE = msgspec.json.Decoder(_Type)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now


class Watched(asyncio.Event):
    """The runner's wake-up event, saying when the runner waits on it again."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting = asyncio.Event()

    async def wait(self) -> Literal[True]:
        self.waiting.set()
        return await super().wait()


class Recorder:
    """The runner's bus: the real one, each step's events recorded when it went out, with
    the runner's clock then."""

    def __init__(self, bus: RedisBus, clock: Clock) -> None:
        self.bus = bus
        self.clock = clock
        self.calls = 0
        self.shown: list[tuple[int, list[str]]] = []

    async def publish(self, batch: TableBatch) -> None:
        self.calls += 1
        await self.bus.publish(batch)
        if batch.frames:
            self.shown.append((self.clock(), [_TYPE.decode(f).type for _, f in batch.frames]))

    def __getattr__(self, name: str) -> object:
        return getattr(self.bus, name)


class Rig:
    def __init__(self, runner: TableRunner, clock: Clock, recorder: Recorder) -> None:
        self.runner, self.clock, self.recorder = runner, clock, recorder
        self.wake = Watched()
        runner._wake = self.wake  # the hook: see Watched

    async def move_to(self, now: int) -> None:
        """Set the clock to ``now`` and let the runner do what is due, until it waits."""
        self.clock.now = now
        self.wake.waiting.clear()
        self.wake.set()
        async with asyncio.timeout(20):
            await self.wake.waiting.wait()

    def deadline(self) -> int:
        engine = self.runner.engine
        assert engine is not None
        due = engine.next_deadline()
        assert due is not None
        return due


async def _rig(url: str, redis_url: str, clock: Clock) -> tuple[Rig, PostgresStore, Redis]:
    store = PostgresStore(url, max_connections=4, replication="none")
    client = Redis(connection_pool=connection_pool(redis_url, max_connections=4, timeout=5))
    recorder = Recorder(RedisBus(client, [TABLE], store), clock)
    runner = TableRunner(TABLE, store, recorder, timing=TIMING, clock=clock)  # type: ignore[arg-type]  # a recording Bus
    rig = Rig(runner, clock, recorder)
    await runner.start()
    async with asyncio.timeout(20):
        await rig.wake.waiting.wait()
    return rig, store, client


async def test_the_reveals_keep_their_pace_after_a_partition(
        redis_server: RedisServer) -> None:
    clock = Clock()
    with TcpProxy(redis_server.port) as proxy:
        rig, store, client = await _rig(fresh_database(), f"redis://127.0.0.1:{proxy.port}/0",
                                        clock)
        runner = rig.runner
        assert runner.engine is not None
        try:
            for _ in range(100):  # open, deal, close: up to the first reveal
                if runner.engine.phase == "revealing":
                    break
                await rig.move_to(max(clock.now, rig.deadline()))
            assert runner.engine.phase == "revealing"
            proxy.stall()  # the partition, as the first hand is revealed
            calls = rig.recorder.calls
            clock.now = rig.deadline()
            rig.wake.set()
            async with asyncio.timeout(20):
                while rig.recorder.calls == calls:  # the reveal is stored, its publication held
                    await asyncio.sleep(0.01)
            clock.now += 15_000  # 15 s of partition
            rig.wake.waiting.clear()
            proxy.restore()  # the held publication goes out on a new connection
            async with asyncio.timeout(20):
                await rig.wake.waiting.wait()  # and the runner did what it would then
            for _ in range(20):
                if any("round_settled" in types for _, types in rig.recorder.shown):
                    break
                await rig.move_to(clock.now + REVEAL_MS // 4)
        finally:
            proxy.restore()
            await runner.stop()
            await client.aclose()
            await store.close()

    reveals = [(at, types.count("hand_revealed")) for at, types in rig.recorder.shown
               if "hand_revealed" in types]
    assert [n for _, n in reveals] == [1] * 6, reveals  # one hand a step
    gaps = [b - a for (a, _), (b, _) in itertools.pairwise(reveals)]
    assert min(gaps) >= REVEAL_MS, gaps  # each shown its interval after the one before


async def test_a_runner_whose_lease_is_in_doubt_opens_no_round(
        redis_server: RedisServer) -> None:
    clock = Clock()
    rig, store, client = await _rig(fresh_database(), redis_server.url, clock)
    runner = rig.runner
    assert runner.engine is not None
    before = runner.engine.state.round_id
    runner.holds = lambda: False  # its lease surely lasts no more (host/scaleout.py)
    try:
        await rig.move_to(rig.deadline() + 1)  # the next round was due to open
        await rig.move_to(clock.now + TIMING.between_rounds_ms)
        assert runner.engine.state.round_id == before
        assert not any("round_opened" in types for _, types in rig.recorder.shown)
    finally:
        await runner.stop()
        await client.aclose()
        await store.close()
