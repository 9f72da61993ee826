"""The seeded fault simulator (tests/sim) against the Redis store.

The same schedules, faults and checks as tests/unit/test_simulation.py, on a
``redis-server`` of this module's own. A crash is a process restart: the store (its client,
its connection pool, its pending work) is closed and a new one opened on the same server,
so what the next engine sees is only what Redis kept. Settlement runs in chunks of three
bets, and the process dies between two chunks now and then.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from redis_util import RedisServer
from sim import SimConfig, Simulation

from livetable.engine.bets import REJECTIONS, SESSION_REJECTIONS, WALLET_REJECTIONS
from livetable.store import Store
from livetable.store.redis import RedisStore

pytestmark = [pytest.mark.redis]

SIM_CHUNK = 3
SLIP_ONLY = {"bad_slip_id", "bad_slip", "duplicate_slip_id"}


@pytest.mark.parametrize("seed", [20251129])
async def test_rounds_with_crashes_on_redis(redis_server: RedisServer, seed: int) -> None:
    prefix = f"sim{seed}"
    reopened = 0

    def open_store() -> RedisStore:
        return RedisStore.from_url(redis_server.url, prefix=prefix, settle_chunk=SIM_CHUNK)

    async def reopen(old: Store) -> Store:
        nonlocal reopened
        reopened += 1
        await old.close()
        return open_store()

    config = SimConfig(seed=seed, rounds=1_000, crash_rate=0.005, lose_step_rate=0.005,
                       to_manual=0.02, audit_every=250)
    sim = Simulation(open_store(), config, reopen=reopen)
    stats = await sim.run()
    print(f"\nsimulation on Redis, seed {seed}: {stats.summary()}")
    assert stats.rounds >= 1_000
    assert stats.settled > 0 and stats.cancelled > 0 and stats.manual_rounds > 0
    assert stats.crashes > 0 and stats.lost_steps > 0 and stats.recovered_settled > 0
    assert stats.settle_crashes > 0 and stats.chunks > 0
    assert stats.crashes + stats.settle_crashes == reopened
    assert set(stats.rejections) == (set(REJECTIONS) - {"rate_limited"} - SLIP_ONLY
                                     # the seamless wallet's own, the gateway's
                                     - WALLET_REJECTIONS - SESSION_REJECTIONS)
    await sim.store.close()
