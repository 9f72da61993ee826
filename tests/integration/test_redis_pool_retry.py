"""The Redis pools retry a command on a dropped connection.

``Redis(connection_pool=…, retry=…)`` ignores its ``retry``: redis-py takes the retry of
the pool's connections, which had none. After every Redis restart each idle pooled
connection failed its next command (slips answered ``unavailable``, the API 503, readiness
flapping). Here a pool of every kind the processes make holds several idle connections,
Redis restarts on the same port, and the next command on each of them must succeed.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from pg_util import fresh_database
from redis.asyncio import Redis
from redis_util import RedisServer

from livetable.bus.redis_conn import connection_pool
from livetable.config import Settings
from livetable.services import Services

pytestmark = [pytest.mark.redis]

#: Idle connections per pool: more than one, fewer than any pool's maximum.
IDLE = 6


async def hold_connections(client: Any) -> list[Any]:
    """Run IDLE commands that each hold a connection a moment, all at once: the pool ends
    with IDLE connections, idle once they return. The answers (None: nothing popped)."""
    return list(await asyncio.gather(*(client.blpop([f"nothing:{i}"], timeout=0.2)
                                       for i in range(IDLE))))


def pooled(client: Any) -> int:
    """How many connections the client's pool holds (idle or not)."""
    pool = client.connection_pool
    return len(pool._connections) if hasattr(pool, "_connections") else (
        len(pool._available_connections) + len(pool._in_use_connections))


async def test_every_pooled_connection_survives_a_redis_restart(
        tmp_path: Path, redis_server: RedisServer) -> None:
    settings = Settings(data_dir=tmp_path, secret=b"pool-retry-secret-0123456789abcdef",
                        redis_url=redis_server.url, postgres_url=fresh_database(),
                        postgres_replication="none")
    services = Services(settings, roles=("gateway", "engine"))  # not started: its clients
    own = Redis(connection_pool=connection_pool(redis_server.url, max_connections=16,
                                                timeout=5))
    clients = {"the bus and commands": services.redis, "leases": services.lease_redis,
               "a pool of its own": own}
    # the bus's subscription is the one that must not retry: redis-py would make it again
    # by itself, and the bus would not know to catch up from the log (its own test:
    # tests/integration/test_scaleout_watchdog.py)
    assert "retry" not in services.subscriber_redis.connection_pool.connection_kwargs
    try:
        for client in clients.values():
            assert await hold_connections(client) == [None] * IDLE
            assert pooled(client) == IDLE
        redis_server.restart()  # every pooled connection is dead now
        for name, client in clients.items():
            # each of the IDLE commands takes one of the dead connections: each must retry
            answers = await asyncio.gather(*(client.blpop([f"nothing:{i}"], timeout=0.2)
                                             for i in range(IDLE)), return_exceptions=True)
            assert answers == [None] * IDLE, f"{name}: {answers}"
            assert pooled(client) == IDLE, name
    finally:
        await own.aclose()
        await services.store.close()
        for client in (services.redis, services.lease_redis, services.subscriber_redis):
            await client.aclose()
