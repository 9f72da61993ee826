"""No process prints a password it was given.

``livetable engine`` and ``livetable gateway`` printed ``Redis redis://:PASSWORD@host…`` at
every start, even with the URL from the environment: whoever reads the logs (a log shipper,
``journalctl``, ``docker logs``) had Redis' password. Here a real ``redis-server`` requires
a password, an engine and a gateway start on it at debug level with the URL in
``LIVETABLE_REDIS_URL`` (and their PostgreSQL URL, with a password too, in
``LIVETABLE_POSTGRES_URL``), a guest plays a round's worth of traffic, and every line either
process wrote is searched for the password. The gateway is started without the shoe key:
gateways never need it (attack 2).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from deployment import SECRET, SHOE_KEY
from liveserver import LiveServer, WireClient
from pg_util import fresh_database
from redis_util import RedisServer, start_redis

from livetable.config import masked_url

PASSWORD = "Pw-0123456789-abcdefghij-SECRET-zz"
#: The test's PostgreSQL trusts loopback: the password is sent, never needed, and must never
#: be printed either.
PG_PASSWORD = "Pg-9876543210-jihgfedcba-SECRET-yy"


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    conf = tmp_path / "redis.conf"
    conf.write_text(f"requirepass {PASSWORD}\n")
    server = start_redis(tmp_path / "redis", config=conf, auth=("default", PASSWORD))
    try:
        yield server
    finally:
        server.kill()


def test_masked_url_hides_every_password() -> None:
    assert masked_url("redis://:pw@h:6379/0") == "redis://:***@h:6379/0"
    assert masked_url("redis://livetable:pw@redis:6379/0") == "redis://livetable:***@redis:6379/0"
    assert masked_url("https://tok@h/x") == "https://***@h/x"
    assert masked_url("redis://h:6379/0?password=pw&db=1") == "redis://h:6379/0?password=***&db=1"
    assert masked_url("redis://h:6379/0") == "redis://h:6379/0"


async def test_no_process_prints_the_redis_password(tmp_path: Path,
                                                    redis_server: RedisServer) -> None:
    url = f"redis://:{PASSWORD}@127.0.0.1:{redis_server.port}/0"
    postgres = fresh_database().replace("postgresql://livetable@",
                                        f"postgresql://livetable:{PG_PASSWORD}@")
    env = {"LIVETABLE_SECRET": SECRET, "LIVETABLE_REDIS_URL": url,
           "LIVETABLE_POSTGRES_URL": postgres,
           "LIVETABLE_POSTGRES_REPLICATION": "none"}
    engine = LiveServer(tmp_path / "engine", command="engine", args=["--log-level", "debug"],
                        env={**env, "LIVETABLE_SHOE_KEY": SHOE_KEY})
    gateway = LiveServer(tmp_path / "gateway", command="gateway",
                         args=["--log-level", "debug"], env=env)
    try:
        engine.start()
        gateway.start()
        token, _ = gateway.guest()
        client = await WireClient.connect(gateway.ws, "guest")
        await client.hello(token)
        await client.expect("round_opened", timeout=15)
        await client.close()
        await asyncio.sleep(0.5)
    finally:
        engine.stop()
        gateway.stop()
    for process in (engine, gateway):
        log = process.log()
        assert "Redis redis://:***@127.0.0.1" in log, log[-2000:]  # the line is still there
        assert "PostgreSQL postgresql://livetable:***@127.0.0.1" in log, log[-2000:]
        assert PASSWORD not in log and PG_PASSWORD not in log, process.command
    assert not (tmp_path / "gateway-keys").exists()  # the gateway made no shoe key
