"""The first security round's attack 5 (docs/security.md): store faults that passed silently.

A Redis that restarted empty wiped every balance while ``/readyz`` stayed 200 (Redis held
the money then); a ledger that no longer adds up went unnoticed. Now the store carries an
identity, engines audit the ledger every ``LIVETABLE_AUDIT_INTERVAL`` seconds, and either
finding turns ``/readyz`` red, shows in ``/metrics`` and holds the tables (a round in play
is paused) until an audit passes again. Scale-out keeps the money in PostgreSQL: a Redis
that restarts empty loses no balance, and the process carries on.
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from liveserver import LiveServer, WireClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from pg_util import fresh_database, shared_pg
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


def scaled(root: Path, redis_server: RedisServer, audit_interval: str) -> LiveServer:
    """``serve`` in scale-out: the money in a database of its own, Redis the bus."""
    return LiveServer(root, env={"LIVETABLE_SECRET": "s" * 32, "LIVETABLE_SHOE_KEY": "k" * 32,
                                 "LIVETABLE_AUDIT_INTERVAL": audit_interval},
                      args=["--postgres-replication", "none", "--redis", redis_server.url,
                            "--postgres", fresh_database()])


async def test_a_store_that_changes_under_the_process_is_not_ready(
        tmp_path: Path, redis_server: RedisServer) -> None:
    server = scaled(tmp_path / "scaled", redis_server, "0.3")
    server.start()
    try:
        client = await WireClient.connect(server.ws, "viewer")
        await client.hello()
        await client.expect("round_opened", timeout=15)
        await client.close()
        assert server.get("/readyz").status_code == 200
        # the URL now reaches another ledger (a database swapped, restored from elsewhere)
        database = server.args[-1].rsplit("/", 1)[1]
        shared_pg().primary.sql("UPDATE meta SET value = 'another' WHERE key = 'store_id'",
                                database=database)
        await _until(lambda: server.get("/readyz").status_code == 503, 5, "not ready")
        checks = server.get("/readyz").json()["checks"]
        assert "identity changed" in checks["store"]
        assert _ledger_ok(server) == 0
        # and it does not come back by itself: the store is not the one it started on
        await asyncio.sleep(1)
        assert server.get("/readyz").status_code == 503
    finally:
        server.stop()


async def test_a_redis_restarted_empty_loses_no_money(
        tmp_path: Path, redis_server: RedisServer) -> None:
    """The money path's attack 6 (docs/security.md), since the Redis ledger was retired: Redis
    restarts without
    persistence (every key gone: the lease, the bus's subscriptions, the command queues).
    The balances are PostgreSQL's: the player's is what it was, the process turns ready
    again (the bus subscribes again, the engine takes the lease again) and deals on."""
    server = scaled(tmp_path / "scaled", redis_server, "60")
    server.start()
    try:
        token, player = server.guest()
        client = await WireClient.connect(server.ws, "viewer")
        await client.hello()
        await client.expect("round_opened", timeout=15)
        redis_server.restart()  # no persistence: it comes back empty
        assert redis.Redis.from_url(redis_server.url).dbsize() == 0
        await _until(lambda: server.get("/readyz").status_code == 200, 15, "ready again")
        assert server.get("/readyz").json()["checks"]["store"] is True
        again = await WireClient.connect(server.ws, "player")
        welcome = await again.hello(token)
        assert welcome["player"]["balance"] == player["balance"]
        await again.expect("round_opened", timeout=20)  # a round after the restart
        await again.close()
        await client.close()
        assert "identity changed" not in server.log()
    finally:
        server.stop()
