"""The service, embedded (SQLite) and scale-out (PostgreSQL and Redis): nothing stored holds
the upcoming cards,
and an ended shoe is published and verifies (docs/design.md §7).

Each test runs the real :class:`Services` in-process with fast timings, lets the table deal,
then — holding the table runner's lock, so that the store and the engine agree — reads
*everything* the store keeps: the SQLite file with its write-ahead log, or every row of
every PostgreSQL table and every value of every Redis key. No run of six upcoming cards of
the shoe in play (the undealt cards and the face-down cards of the round in flight), as the
engine serialises them, may appear there, nor the shoe's salt. The same search over the
engine's plain state finds them, so the search itself is shown to work.
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pg_util import fresh_database
from redis_util import RedisServer, start_redis

from livetable import protocol as p
from livetable.config import Settings
from livetable.engine import TableEngine
from livetable.host.runner import TableRunner
from livetable.rules.fairness import ShoeRecord, check_shoe
from livetable.server.app import create_app
from livetable.services import Services
from livetable.store.postgres import PostgresStore
from livetable.store.sealing import SealError, StateSeal

WINDOW = 6


def fast_settings(data_dir: Path, redis_url: str | None = None,
                  postgres_url: str | None = None) -> Settings:
    return Settings(data_dir=data_dir, secret=b"integration-test-secret-0123456789abcdef",
                    redis_url=redis_url, postgres_url=postgres_url, betting_seconds=1,
                    postgres_replication="none",
                    deal_interval=0.01, reveal_interval=0.01, between_rounds=0.05, close_grace=0)


def secrets_of(engine: TableEngine) -> tuple[list[bytes], bytes]:
    """Every serialised run of WINDOW upcoming cards, and the salt (as stored bytes)."""
    s = engine.state
    shoe = s.shoe
    assert shoe is not None and shoe.salt is not None and shoe.round_starts
    in_flight = s.phase in ("betting", "dealing", "revealing", "paused")
    start = shoe.round_starts[-1] if in_flight else shoe.drawn
    upcoming = shoe.order[start:]
    runs: list[bytes] = []
    for i in range(len(upcoming) - WINDOW + 1):
        cards = upcoming[i:i + WINDOW]
        runs.append(msgspec.json.encode(cards)[1:-1])  # "7C","6D",… as in the engine's JSON
        runs.append(",".join(cards).encode())  # 7C,6D,… as the commitment hashes them
    return runs, shoe.salt.encode()


def leaks(blob: bytes, engine: TableEngine) -> list[str]:
    runs, salt = secrets_of(engine)
    found = [run.decode() for run in runs if run in blob]
    if salt in blob:
        found.append(f"the salt {salt.decode()}")
    return found


async def dealing(svc: Services, rounds: int = 2, timeout: float = 30) -> TableRunner:
    """The table's runner once it has dealt ``rounds`` rounds and is in the next one."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        runner = svc.runners.get("t1")
        if runner is not None and runner.engine is not None and \
                runner.engine.state.round_no > rounds:
            return runner
        await asyncio.sleep(0.05)
    raise TimeoutError("the table did not deal")


async def end_the_shoe(svc: Services) -> None:
    """A dealer switches the table to manual between rounds: its auto shoe has ended."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        answer = await svc.execute("t1", p.SetMode(auto=False))
        if isinstance(answer, p.Ack):
            return
        assert answer.code == "illegal_command", answer  # mid-round: try again
        await asyncio.sleep(0.01)
    raise TimeoutError("no moment between rounds")


async def published_and_verified(svc: Services, settings: Settings) -> None:
    app = create_app(settings, svc)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://test") as http:
        snapshot = (await http.get("/api/tables/t1")).json()
        seen = snapshot["shoe_commitment"]
        assert isinstance(seen, str) and len(seen) == 64
        before = await http.get(f"/api/shoes/{snapshot['shoe_id']}")
        assert before.status_code == 404 and before.json()["error"]["code"] == "unknown_shoe"
        assert "order" not in before.text and "salt" not in before.text
        await end_the_shoe(svc)
        answer = await http.get(f"/api/shoes/{snapshot['shoe_id']}")
        assert answer.status_code == 200, answer.text
        record = msgspec.json.decode(answer.content, type=ShoeRecord)
        assert record.shoe_id == snapshot["shoe_id"]
        assert len(record.rounds) >= 2 and record.rounds[0].state == "settled"
        assert check_shoe(record, seen_commitment=seen) == []
        # Each settled round's cards, as GET /api/rounds serves them, are the record's.
        for rnd in record.rounds:
            if rnd.state == "settled":
                view = (await http.get(f"/api/rounds/{rnd.round_id}")).json()
                assert view["cards"] == rnd.cards
        snap = (await http.get("/api/tables/t1")).json()
        assert snap["mode"] == "manual" and snap["shoe_commitment"] is None
    frames = await svc.store.events_after("t1", snapshot["epoch"], snapshot["seq"], 10_000)
    assert frames is not None
    revealed = [f for f in map(msgspec.json.decode, frames) if f["type"] == "shoe_revealed"]
    assert [(f["shoe_id"], f["salt"], f["cut_at"], f["order"]) for f in revealed] == [
        (record.shoe_id, record.salt, record.cut_at, record.order)]


@pytest.fixture
async def embedded(tmp_path: Path) -> AsyncIterator[tuple[Services, Settings]]:
    settings = fast_settings(tmp_path / "data")
    svc = Services(settings)
    await svc.start()
    try:
        yield svc, settings
    finally:
        await svc.stop()


async def test_the_sqlite_files_never_hold_the_upcoming_cards(
        embedded: tuple[Services, Settings]) -> None:
    svc, settings = embedded
    runner = await dealing(svc)
    for _ in range(3):  # at a few moments of the round
        async with runner._lock:  # no step is being stored: the files match the engine
            assert runner.engine is not None
            files = sorted(settings.data_dir.glob("livetable.sqlite3*"))
            blob = b"".join(f.read_bytes() for f in files)
            assert leaks(runner.engine.to_bytes(), runner.engine)  # the search finds them…
            assert leaks(blob, runner.engine) == []  # …but not in the database
        await asyncio.sleep(0.3)
    await published_and_verified(svc, settings)


def assert_the_secret_cannot_open(stored: bytes, settings: Settings) -> None:
    """The money path's attack 2 (docs/security.md): the data directory (database + ``secret``) or
    ``livetable token``
    gave the sealing key. A fresh server seals with a shoe key of its own."""
    assert settings.secret is not None
    with pytest.raises(SealError, match="another key"):
        StateSeal(settings.secret).open("t1", stored)
    key = settings.shoe_key_path
    assert not key.resolve().is_relative_to(settings.data_dir.resolve())
    assert key.stat().st_mode & 0o777 == 0o600
    assert TableEngine.from_bytes(StateSeal(key.read_bytes()).open("t1", stored)).state.table \
        == "t1"


async def test_a_fresh_server_seals_with_a_key_the_token_secret_cannot_open(
        embedded: tuple[Services, Settings]) -> None:
    svc, settings = embedded
    runner = await dealing(svc, rounds=1)
    async with runner._lock:
        db = sqlite3.connect(settings.db_path)
        stored = bytes(db.execute("SELECT state FROM tables").fetchone()[0])
        db.close()
    assert_the_secret_cannot_open(stored, settings)


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    server = start_redis(tmp_path / "redis")
    try:
        yield server
    finally:
        server.kill()


async def every_redis_value(url: str) -> bytes:
    from redis.asyncio import Redis

    client = Redis.from_url(url)
    parts: list[Any] = []
    try:
        async for key in client.scan_iter(count=1000):
            kind = (await client.type(key)).decode()  # type: ignore[union-attr]
            parts.append(key)
            if kind == "string":
                parts.append(await client.get(key))
            elif kind == "hash":
                parts += [x for kv in (await client.hgetall(key)).items() for x in kv]
            elif kind == "list":
                parts += await client.lrange(key, 0, -1)
            elif kind == "set":
                parts += list(await client.smembers(key))
            elif kind == "zset":
                parts += await client.zrange(key, 0, -1)
            elif kind == "stream":
                for _, fields in await client.xrange(key):  # type: ignore[union-attr]
                    parts += [x for kv in fields.items() for x in kv]  # type: ignore[union-attr]
            else:
                raise AssertionError(f"{key!r}: a {kind} the test does not read")
    finally:
        await client.aclose()
    return b"\0".join(x if isinstance(x, bytes) else str(x).encode() for x in parts)


async def every_postgres_row(store: PostgresStore) -> bytes:
    """Every row of every table of the store, as text (bytea as hex), and the raw bytes of
    the tables' states and the events' frames."""
    parts: list[bytes] = []
    async with store.pool.connection() as con:
        names = [r[0] for r in await con.fetch(
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'")]
        assert {"tables", "events", "shoes", "bets"} <= set(names), names
        for name in names:
            parts += [row[0].encode() for row in await con.fetch(
                f'SELECT t::text FROM "{name}" t')]
        parts += [bytes(r[0]) for r in await con.fetch("SELECT state FROM tables")]
        parts += [bytes(r[0]) for r in await con.fetch("SELECT frame FROM events")]
    return b"\0".join(parts)


async def test_no_stored_value_holds_the_upcoming_cards_in_scale_out(
        tmp_path: Path, redis_server: RedisServer) -> None:
    settings = fast_settings(tmp_path / "data", redis_url=redis_server.url,
                             postgres_url=fresh_database())
    svc = Services(settings)
    await svc.start()
    try:
        assert isinstance(svc.store, PostgresStore)
        runner = await dealing(svc)
        for _ in range(3):
            async with runner._lock:
                assert runner.engine is not None
                assert leaks(runner.engine.to_bytes(), runner.engine)
                stored = await every_postgres_row(svc.store)
                assert b"t1" in stored
                assert leaks(stored, runner.engine) == []
                blob = await every_redis_value(redis_server.url)
                assert b"lt:lease:{t1}:owner" in blob
                assert leaks(blob, runner.engine) == []
            await asyncio.sleep(0.3)
        await published_and_verified(svc, settings)
        state = await svc.store.load_table("t1")  # opened by the store: the engine's bytes
        assert state is not None
        async with svc.store.pool.connection() as con:
            sealed = bytes(await con.fetchval("SELECT state FROM tables WHERE table_id = 't1'"))
        assert sealed != state
        assert_the_secret_cannot_open(sealed, settings)
    finally:
        await svc.stop()
