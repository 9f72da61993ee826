"""Scale-out with PostgreSQL as the system of record: real ``livetable engine`` and
``livetable gateway`` processes with ``--postgres`` (a primary and a synchronous standby of
the test's own, both hosts in the URL) and Redis as the bus, the commands and the leases.

The engine that drives the table is killed -9 while revealing and the standby engine takes
over — the same scenario and checks as test_scaleout_failover.py on the Redis store (each
bet settled or refunded once, the event log without a hole, balances, the Bet Record, the
audit), here with the fencing token issued by PostgreSQL when the standby takes the lease.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from deployment import Deployment
from liveserver import TABLE
from pg_util import PgCluster, start_pg
from redis_util import RedisServer, start_redis
from test_scaleout_failover import standby_takes_over

from livetable.store.base import AuditReport
from livetable.store.postgres import PostgresStore

pytestmark = [pytest.mark.redis]


class PgDeployment(Deployment):
    """A :class:`Deployment` whose ledger is PostgreSQL: read it there."""

    def __init__(self, root: Path, redis: RedisServer, cluster: PgCluster,
                 **settings: Any) -> None:
        super().__init__(root, redis, env={"LIVETABLE_POSTGRES_URL": cluster.url}, **settings)
        self.cluster = cluster

    async def audit(self) -> AuditReport:
        store = PostgresStore(self.cluster.url, max_connections=1)
        try:
            return await store.audit()
        finally:
            await store.close()

    async def event_log(self) -> list[tuple[int, int]]:
        store = PostgresStore(self.cluster.url, max_connections=1)
        try:
            async with store._connection() as con:
                rows = await con.fetch("SELECT epoch, seq FROM events WHERE table_id = $1 "
                                       "ORDER BY epoch, seq", TABLE)
        finally:
            await store.close()
        return [(r[0], r[1]) for r in rows]


@contextlib.asynccontextmanager
async def running(root: Path, **settings: Any) -> AsyncIterator[PgDeployment]:
    redis = start_redis(root / "redis")
    cluster = start_pg(standby=True)
    deployment = PgDeployment(root, redis, cluster, **settings)
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
