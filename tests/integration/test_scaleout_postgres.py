"""Scale-out on a PostgreSQL primary and its synchronous standby: real ``livetable engine``
and ``livetable gateway`` processes whose URL names both hosts (target_session_attrs), and
Redis as the bus, the commands and the leases.

The engine that drives the table is killed -9 while revealing and the standby engine takes
over — the scenario and checks of test_scaleout_failover.py (each bet settled or refunded
once, the event log without a hole, balances, the Bet Record, the audit), here on a cluster
of the test's own with a synchronous standby, the fencing token issued by PostgreSQL when
the standby engine takes the lease.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from deployment import Deployment
from pg_util import start_pg
from redis_util import start_redis
from test_scaleout_failover import standby_takes_over

pytestmark = [pytest.mark.redis]


@contextlib.asynccontextmanager
async def running(root: Path, **settings: Any) -> AsyncIterator[Deployment]:
    redis = start_redis(root / "redis")
    cluster = start_pg(standby=True)
    deployment = Deployment(root, redis, postgres_url=cluster.url, **settings)
    try:
        await deployment.start()
        yield deployment
    finally:
        await deployment.close()
        redis.kill()
        cluster.stop()


async def test_standby_engine_takes_over_on_postgres(tmp_path: Path) -> None:
    """Killed while revealing: the standby claims a newer token, goes on from the stored
    state and settles the round once. (The kill in the betting, on this store too, is
    bench/pg_failover.py's and test_pg_store.py's fencing test's, at a store level: one
    process-level case keeps the suite's time down.)"""
    async with running(tmp_path, engines=2, gateways=2, betting_seconds=2,
                       reveal_interval=0.6) as deployment:
        await standby_takes_over(deployment, "revealing")
