"""``/readyz`` answers within a second, even cut off from its stores.

A gateway cut off from Redis (then its store) by a partition answered ``/readyz`` after
2.3-10.5 s or not at all: its probe of the store waited on a pooled connection for its
socket timeout, and a load balancer's check gave up first. Now every probe is bounded and
they run together: the answer is 503 within a second, naming what is unreachable. Since the
Redis ledger's retirement the store is PostgreSQL, and Redis the bus: cut off from
PostgreSQL, ``/readyz`` names the store; cut off from Redis, the bus's watchdog turns it 503
— and neither makes it wait.

The partition is a TCP proxy between the gateway and the server that stops passing bytes,
closing nothing (tests/e2e/tcpproxy.py): connections made before it and during it hang.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from pg_util import fresh_database, shared_pg
from redis_util import RedisServer

from livetable.bus import TableBatch
from livetable.config import Settings
from livetable.server.app import create_app
from livetable.services import Services

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from tcpproxy import TcpProxy  # tests/e2e is not a package

pytestmark = [pytest.mark.redis]

SECRET = b"partition-secret-0123456789abcdef"


@contextlib.asynccontextmanager
async def ready_gateway(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """A gateway's services started on ``settings`` and a client of its app, ready (200)
    before the test cuts anything."""
    services = Services(settings, roles=("gateway",))
    app = create_app(settings, services)
    await services.start()
    try:
        # the tables' first step, as their engine would publish it (there is none here: the
        # store and the bus are what is asked); a gateway on the bus is ready once it has
        # heard of every table it serves
        for table in settings.table_names:
            await services.bus.publish(TableBatch(table=table, epoch=1, seq=0, frames=[],
                                                  snapshot=b""))
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://gateway") as http:
            deadline = time.monotonic() + 5
            while (ready := await http.get("/readyz")).status_code != 200:
                assert time.monotonic() < deadline, ready.json()
                await asyncio.sleep(0.02)
            yield http
    finally:
        await services.stop()


async def test_readyz_answers_503_within_a_second_naming_the_store(
        tmp_path: Path, redis_server: RedisServer) -> None:
    port = shared_pg().primary.port
    with TcpProxy(port) as proxy:
        url = fresh_database().replace(f":{port}/", f":{proxy.port}/")
        settings = Settings(data_dir=tmp_path, secret=SECRET, redis_url=redis_server.url,
                            postgres_url=url, postgres_replication="none")
        async with ready_gateway(settings) as http:
            try:
                proxy.stall()  # the partition: nothing passes, nothing is closed
                for _ in range(3):  # and again: no probe left hanging makes the next wait
                    started = time.monotonic()
                    ready = await http.get("/readyz")
                    took = time.monotonic() - started
                    assert ready.status_code == 503
                    store = ready.json()["checks"]["store"]
                    assert store.startswith("Postgres unreachable"), store
                    assert took < 1.0, f"/readyz took {took:.2f} s"
                started = time.monotonic()
                metrics = await http.get("/metrics")  # it runs the same probes
                assert metrics.status_code == 200 and time.monotonic() - started < 1.0
            finally:
                proxy.restore()


async def test_readyz_answers_within_a_second_cut_off_from_redis(
        tmp_path: Path, redis_server: RedisServer) -> None:
    with TcpProxy(redis_server.port) as proxy:
        settings = Settings(data_dir=tmp_path, secret=SECRET,
                            redis_url=f"redis://127.0.0.1:{proxy.port}/0",
                            postgres_url=fresh_database(), postgres_replication="none")
        async with ready_gateway(settings) as http:
            try:
                proxy.stall()
                # The watchdog's 3 s of silence, and more. The bus must be reported down, and
                # the store, which is not cut off, up beside it: a loaded run's store probe may
                # miss its 0.5 s once (a 503 naming the store), so the answers are read until
                # one names the bus alone, each within a second.
                deadline = time.monotonic() + 10
                seen = []
                while True:
                    started = time.monotonic()
                    ready = await http.get("/readyz")
                    took = time.monotonic() - started
                    assert took < 1.0, f"/readyz took {took:.2f} s"
                    checks = ready.json()["checks"]
                    seen.append((ready.status_code, checks))
                    if checks["bus"] is False and checks["store"] is True:
                        break
                    assert time.monotonic() < deadline, f"cut off from Redis: {seen}"
                assert ready.status_code == 503, seen
            finally:
                proxy.restore()


async def test_an_engine_cut_off_from_redis_is_not_ready(
        tmp_path: Path, redis_server: RedisServer) -> None:
    """An engine's /readyz answered 200 through Redis kills and partitions, holding no lease
    and able to take none: it names Redis now, as a gateway's names its bus."""
    with TcpProxy(redis_server.port) as proxy:
        settings = Settings(data_dir=tmp_path, secret=SECRET,
                            redis_url=f"redis://127.0.0.1:{proxy.port}/0",
                            postgres_url=fresh_database(), postgres_replication="none")
        services = Services(settings, roles=("engine",))
        app = create_app(settings, services)
        await services.start()
        try:
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                         base_url="http://engine") as http:
                ready = await http.get("/readyz")
                assert ready.status_code == 200, ready.json()
                assert ready.json()["checks"].get("redis", True) is True
                proxy.stall()
                ready = await http.get("/readyz")
                assert ready.status_code == 503, ready.json()
                checks = ready.json()["checks"]
                assert str(checks["redis"]).startswith("Redis unreachable"), checks
                assert checks["store"] is True, checks
        finally:
            proxy.restore()
            await services.stop()
