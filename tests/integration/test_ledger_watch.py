"""Issue 10, attack 5: store faults that passed silently.

A Redis that restarted empty wiped every balance while ``/readyz`` stayed 200; a ledger that
no longer adds up went unnoticed. Now the store carries an identity, engines audit the
ledger every ``LIVETABLE_AUDIT_INTERVAL`` seconds, and either finding turns ``/readyz``
red, shows in ``/metrics`` and holds the tables (a round in play is paused) until an audit
passes again.
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from liveserver import LiveServer, WireClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from redis_util import RedisServer, start_redis


async def _until(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not in {timeout} s: {what}")
        await asyncio.sleep(0.1)


def _ledger_ok(server: LiveServer) -> float:
    for line in server.get("/metrics").text.splitlines():
        if line.startswith("livetable_ledger_ok "):
            return float(line.split()[1])
    raise AssertionError("no livetable_ledger_ok in /metrics")


@pytest.fixture
def audited(tmp_path: Path) -> Iterator[LiveServer]:
    server = LiveServer(tmp_path / "audited", env={"LIVETABLE_AUDIT_INTERVAL": "0.3",
                                                  "LIVETABLE_PLAYER_BALANCE": "5000"})
    server.start(betting_seconds=4)
    try:
        yield server
    finally:
        server.stop()


async def test_a_failed_audit_pauses_the_round_and_turns_readyz_red(
        audited: LiveServer) -> None:
    token = audited.player_token("watcher")
    client = await WireClient.connect(audited.ws, "watcher")
    try:
        await client.hello(token)
        opened = await client.expect("round_opened", timeout=15)
        assert (await client.bet("w1", opened["round_id"], "P1", 100))["type"] == "bet_accepted"
        assert audited.get("/readyz").status_code == 200
        assert _ledger_ok(audited) == 1
        # someone with write access to the database mints 1,000 out of nothing
        db = sqlite3.connect(audited.data_dir / "livetable.sqlite3")
        db.execute("UPDATE accounts SET balance = balance + 1000 WHERE id = 'watcher'")
        db.commit()
        paused = await client.expect("table_paused", timeout=5)
        assert "audit" in paused["reason"]
        ready = audited.get("/readyz")
        assert ready.status_code == 503
        assert "audit failed" in ready.json()["checks"]["ledger"]
        assert _ledger_ok(audited) == 0
        refused = await client.bet("w2", opened["round_id"], "P2", 100)
        assert refused["type"] == "bet_rejected" and refused["code"] == "paused"
        # put it right: the next audit passes and the process is ready again
        db.execute("UPDATE accounts SET balance = balance - 1000 WHERE id = 'watcher'")
        db.commit()
        db.close()
        await _until(lambda: audited.get("/readyz").status_code == 200, 5, "ready again")
        assert _ledger_ok(audited) == 1
    finally:
        await client.close()


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    server = start_redis(tmp_path / "redis")
    try:
        yield server
    finally:
        server.kill()


async def test_a_redis_that_comes_back_empty_is_not_ready(
        tmp_path: Path, redis_server: RedisServer) -> None:
    server = LiveServer(tmp_path / "scaled", env={"LIVETABLE_SECRET": "s" * 32,
                                                 "LIVETABLE_SHOE_KEY": "k" * 32,
                                                 "LIVETABLE_AUDIT_INTERVAL": "0.3"},
                        args=["--redis", redis_server.url])
    server.start()
    try:
        client = await WireClient.connect(server.ws, "viewer")
        await client.hello()
        await client.expect("round_opened", timeout=15)
        await client.close()
        assert server.get("/readyz").status_code == 200
        # every balance gone, as after a restart without persistence
        redis.Redis.from_url(redis_server.url).flushall()
        await _until(lambda: server.get("/readyz").status_code == 503, 5, "not ready")
        checks = server.get("/readyz").json()["checks"]
        assert "identity changed" in checks["store"]
        assert _ledger_ok(server) == 0
        # and it does not come back by itself: the store is not the one it started on
        await asyncio.sleep(1)
        assert server.get("/readyz").status_code == 503
    finally:
        server.stop()


async def test_a_redis_restarted_empty_is_refused_before_anything_is_written(
        tmp_path: Path, redis_server: RedisServer) -> None:
    """Issue 25, attack 6: after Redis restarted empty, the engine wrote new shoes, a round
    and its events, and POST /api/guest created accounts, before the periodic audit (60 s)
    held anything. Now every new connection checks the store's identity first: the first
    write after the restart is refused (an outage, logged as an error) and Redis stays
    empty."""
    server = LiveServer(tmp_path / "scaled", env={"LIVETABLE_SECRET": "s" * 32,
                                                 "LIVETABLE_SHOE_KEY": "k" * 32,
                                                 "LIVETABLE_AUDIT_INTERVAL": "60"},
                        args=["--redis", redis_server.url])
    server.start()
    try:
        client = await WireClient.connect(server.ws, "viewer")
        await client.hello()
        await client.expect("round_opened", timeout=15)
        await client.close()
        server.guest()  # accounts can be made
        redis_server.restart()  # no persistence: it comes back empty
        empty = redis.Redis.from_url(redis_server.url)
        assert empty.dbsize() == 0
        refused = server.get("/readyz")
        with httpx.Client(trust_env=False, timeout=10) as http:
            guest = http.post(server.http + "/api/guest")
        assert (guest.status_code, guest.json()["error"]["code"]) == (503, "unavailable")
        await asyncio.sleep(3)  # a round's worth of the engine's ticks, lease renewals
        assert empty.keys("*") == []  # nothing was written: no shoe, round, event, lease
        assert refused.status_code == 503
        assert "the store's identity changed" in server.log()
        assert "ERROR livetable.store.redis" in server.log()
    finally:
        server.stop()
