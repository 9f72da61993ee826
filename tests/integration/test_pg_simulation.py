"""The seeded fault simulator (tests/sim) against the PostgreSQL store, scale-out's money.

The same schedules, faults and checks as tests/unit/test_simulation.py, on a database of
the test's own (tests/pg_util.py). A crash is a process restart: the store (its pool, its
pending work) is closed and a new one opened on the same database, so what the next engine
sees is only what PostgreSQL kept. Settlement runs in chunks of three
bets, and the process dies between two chunks now and then.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pg_util import fresh_database
from sim import SimConfig, Simulation

from livetable.betting.slips import REJECTIONS, SESSION_REJECTIONS, WALLET_REJECTIONS
from livetable.store import Store
from livetable.store.postgres import PostgresStore

SIM_CHUNK = 3
ROUNDS = 300
SLIP_ONLY = {"bad_slip_id", "bad_slip", "duplicate_slip_id"}


@pytest.mark.parametrize("seed", [20251129])
async def test_rounds_with_crashes_on_postgres(seed: int) -> None:
    url = fresh_database()
    reopened = 0

    def open_store() -> PostgresStore:
        return PostgresStore(url, settle_chunk=SIM_CHUNK, max_connections=4,
                             replication="none")

    async def reopen(old: Store) -> Store:
        nonlocal reopened
        reopened += 1
        await old.close()
        return open_store()

    # fewer rounds than on SQLite, with crashes more often: a PostgreSQL round trip per
    # call makes a round about 0.15 s here (tests/unit/test_simulation.py runs 1,000)
    config = SimConfig(seed=seed, rounds=ROUNDS, crash_rate=0.02, lose_step_rate=0.02,
                       to_manual=0.02, audit_every=100)
    sim = Simulation(open_store(), config, reopen=reopen)
    stats = await sim.run()
    print(f"\nsimulation on PostgreSQL, seed {seed}: {stats.summary()}")
    assert stats.rounds >= ROUNDS
    assert stats.settled > 0 and stats.cancelled > 0 and stats.manual_rounds > 0
    assert stats.crashes > 0 and stats.lost_steps > 0 and stats.recovered_settled > 0
    assert stats.settle_crashes > 0 and stats.chunks > 0
    assert stats.crashes + stats.settle_crashes == reopened
    assert set(stats.rejections) == (set(REJECTIONS) - {"rate_limited"} - SLIP_ONLY
                                     # the seamless wallet's own, the gateway's
                                     - WALLET_REJECTIONS - SESSION_REJECTIONS)
    await sim.store.close()
