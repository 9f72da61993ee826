"""``livetable migrate-store``: a Redis deployment's money moved into PostgreSQL.

The Redis ledger's store is gone, so its layout comes from a fixture:
tests/fixtures/redis_ledger.json, every key the old RedisStore left after four settled
rounds and a cancelled one at table t1 (players with deposits and a withdrawal, an
operator's player ``acme~p-1``, a guest, a player never funded, a wallet credit still owed;
tests/fixtures/make_redis_ledger.py.txt made it, and says how). Each test loads it into a
redis-server of the module's own and copies it into a database of its own on a PostgreSQL
of the module's own, through the command itself (``cli.main``).
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import msgspec
import pytest
from pg_util import PgCluster
from redis import Redis
from redis_util import RedisServer

from livetable import protocol as p
from livetable.betting.slips import SlipRequest
from livetable.cli import main
from livetable.engine import TableEngine
from livetable.store.postgres import PostgresStore

pytestmark = pytest.mark.redis

FIXTURE = json.loads((Path(__file__).parents[1] / "fixtures" / "redis_ledger.json").read_text())
KEYS: dict[str, Any] = FIXTURE["keys"]
BALANCES = {k: int(v) for k, v in KEYS["lt:{ledger}:balances"]["value"].items()}
PLAYERS = sorted(a for a, kind in KEYS["lt:{ledger}:accounts"]["value"].items()
                 if kind == "player")
IDENTITY = KEYS["lt:{ledger}:identity"]["value"]
T = TypeVar("T")
_databases = itertools.count()


def _bytes(value: str | dict[str, str]) -> bytes:
    return base64.b64decode(value["b64"]) if isinstance(value, dict) else value.encode()


def load_fixture(client: Redis) -> None:
    """Every key of the fixture, as the old store wrote it (streams with their ids)."""
    client.flushall()
    for key, item in KEYS.items():
        kind, value = item["type"], item["value"]
        if kind == "string":
            client.set(key, _bytes(value))
        elif kind == "hash":
            client.hset(key, mapping={f: _bytes(v) for f, v in value.items()})
        elif kind == "set":
            client.sadd(key, *[_bytes(m) for m in value])
        elif kind == "zset":
            client.zadd(key, {_bytes(m): score for m, score in value})
        elif kind == "list":
            client.rpush(key, *[_bytes(m) for m in value])
        else:
            assert kind == "stream", kind
            for entry_id, fields in value:
                client.xadd(key, {f: _bytes(v) for f, v in fields.items()}, id=entry_id)


@pytest.fixture
def redis(redis_server: RedisServer) -> Iterator[Redis]:
    client = Redis.from_url(redis_server.url)
    load_fixture(client)
    yield client
    client.close()


@pytest.fixture
def pg_url(pg_cluster: PgCluster) -> str:
    """A fresh database of the test's own."""
    name = f"migrate{next(_databases)}"
    pg_cluster.primary.sql(f"CREATE DATABASE {name}")
    return f"postgresql://livetable@127.0.0.1:{pg_cluster.primary.port}/{name}"


def on_pg(url: str, work: Callable[[PostgresStore], Awaitable[T]]) -> T:
    async def run() -> T:
        store = PostgresStore(url, max_connections=2, replication="none")
        try:
            return await work(store)
        finally:
            await store.close()

    return asyncio.run(run())


def migrate(redis_server: RedisServer, pg_url: str) -> int:
    return main(["migrate-store", "--redis", redis_server.url, "--postgres", pg_url])


async def ledger_of(store: PostgresStore) -> dict[str, Any]:
    """What a refused run must leave as it was: every account, transfer, round, table,
    wallet call and the meta rows."""
    async with store.pool.connection() as con:
        return {table: sorted(tuple(r) for r in await con.fetch(f"SELECT * FROM {table}"))
                for table in ("accounts", "transfers", "rounds", "tables", "events",
                              "wallet_calls", "meta", "shoes", "bets", "slips")}


def test_every_balance_is_copied_and_checked_and_a_second_run_changes_nothing(
        redis: Redis, redis_server: RedisServer, pg_url: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    assert migrate(redis_server, pg_url) == 0
    out = capsys.readouterr().out
    assert f"copied the Redis ledger {IDENTITY}" in out
    assert "checked: every balance in PostgreSQL equals Redis's" in out
    assert "players: 5 (guests 1, of operators 1)" in out
    assert "bets: 44 (the Bet Record, with their slips)" in out

    async def read(store: PostgresStore) -> tuple[Any, ...]:
        players = {pid: await store.player(pid) for pid in PLAYERS}
        return (players, await store.audit(), await store.identity(),
                await store.round_view("t1.1.4"), await ledger_of(store))

    players, audit, identity, cancelled, first = on_pg(pg_url, read)
    assert {pid: view.balance for pid, view in players.items()} == {
        pid: BALANCES[pid] for pid in PLAYERS}
    assert players["acme~p-1"].name == "Ploy" and players["g_guest1"].balance == 47_000
    assert audit.ok, audit.problems
    assert (audit.house, audit.deposits) == (BALANCES["house"], -BALANCES["external"])
    assert identity == IDENTITY  # credit tx_ids go on under the same installation
    assert cancelled is not None and (cancelled.state, cancelled.reason) == (
        "cancelled", "camera down")
    owed = [row for row in first["wallet_calls"] if "queued" in row]
    assert len(owed) == 1  # the credit still owed: the outbox on PostgreSQL delivers it

    assert migrate(redis_server, pg_url) == 0
    again = capsys.readouterr().out
    assert "was copied here before: nothing written" in again
    assert "checked: every balance in PostgreSQL equals Redis's" in again
    assert on_pg(pg_url, ledger_of) == first


def test_the_tables_go_on_from_the_copied_state_and_deposits_stay_applied_once(
        redis: Redis, redis_server: RedisServer, pg_url: str) -> None:
    assert migrate(redis_server, pg_url) == 0
    now = 1_800_000_000_000

    async def play_on(store: PostgresStore) -> tuple[str, int, int]:
        state = await store.load_table("t1")
        assert state == _bytes(KEYS["lt:table:{t1}:state"]["value"]["state"])
        engine = TableEngine.from_bytes(state)
        step = engine.open_betting(now)
        frames = [(ev.epoch, ev.seq, p.encode(ev)) for ev in step.events]
        await store.commit_step("t1", engine.to_bytes(), frames, step.effects, now)
        round_id = engine.state.round_id
        assert round_id is not None
        answer = await store.place_slip(SlipRequest(
            player_id="alice", table="t1", slip_id="after-move", round_id=round_id,
            bets=(p.SlipBet(bet_id="x1", spot="P2", amount=500),)), now + 1)
        assert isinstance(answer, p.SlipAccepted), answer
        resent = await store.deposit("dep-alice-1", "alice", 100_000, now + 2)
        assert answer.balance == BALANCES["alice"] - answer.deducted
        return round_id, answer.balance, resent

    round_id, after_bet, after_resent_deposit = on_pg(pg_url, play_on)
    copied = {key.split(":")[3] for key in KEYS if ":round:" in key}
    assert round_id not in copied  # the next round id: a credit's tx_id is never made twice
    assert after_resent_deposit == after_bet  # deposit:dep-alice-1 came along: applied once


def _refused(redis_server: RedisServer, pg_url: str, capsys: pytest.CaptureFixture[str],
             before: dict[str, Any]) -> str:
    assert migrate(redis_server, pg_url) == 1
    captured = capsys.readouterr()
    assert "refused, nothing written" in captured.err and captured.out == ""
    assert on_pg(pg_url, ledger_of) == before
    return captured.err


def test_an_open_round_is_refused_naming_it(
        redis: Redis, redis_server: RedisServer, pg_url: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    redis.hset("lt:table:{t1}:round:t1.1.5:info", "state", "closed")
    before = on_pg(pg_url, ledger_of)
    err = _refused(redis_server, pg_url, capsys, before)
    assert "table t1: round t1.1.5 is closed, not settled" in err
    assert "Run the engine on Redis until the round settles" in err


def test_different_money_in_postgres_is_refused(
        redis: Redis, redis_server: RedisServer, pg_url: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    async def fund(store: PostgresStore) -> dict[str, Any]:
        await store.identity(create=True)
        await store.ensure_player("alice", "Alice", 0, 1)
        await store.deposit("pg-own", "alice", 7, 2)
        return await ledger_of(store)

    err = _refused(redis_server, pg_url, capsys, on_pg(pg_url, fund))
    assert f"PostgreSQL already holds 7 for alice (player; Redis holds {BALANCES['alice']})" \
        in err
    assert "is the ledger of installation" in err


def test_a_redis_without_its_identity_is_refused(
        redis: Redis, redis_server: RedisServer, pg_url: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    redis.delete("lt:{ledger}:identity")
    err = _refused(redis_server, pg_url, capsys, on_pg(pg_url, ledger_of))
    assert "the Redis holds no store identity" in err


def test_a_wallet_debit_in_doubt_is_refused(
        redis: Redis, redis_server: RedisServer, pg_url: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    calls = "lt:wallet:{t1}:calls"
    raw = redis.hget(calls, "d-5b0d1c2e")
    assert isinstance(raw, bytes)
    debit = msgspec.msgpack.decode(raw)
    del debit["closed_by"]  # never closed: its answer lost, the sweeper not yet run
    debit["state"] = "unknown"
    redis.hset(calls, "d-5b0d1c2e", msgspec.msgpack.encode(debit))
    err = _refused(redis_server, pg_url, capsys, on_pg(pg_url, ledger_of))
    assert "wallet debit d-5b0d1c2e of acme~p-1 (round t1.1.1) is unknown" in err


def test_an_engine_still_running_on_redis_is_refused(
        redis: Redis, redis_server: RedisServer, pg_url: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    redis.set("lt:lease:{t1}:owner", "engine-a", px=60_000)
    err = _refused(redis_server, pg_url, capsys, on_pg(pg_url, ledger_of))
    assert "table t1's lease is held by engine-a: an engine still runs on this Redis" in err


def test_a_run_after_the_engines_moved_money_on_postgres_writes_nothing_and_says_so(
        redis: Redis, redis_server: RedisServer, pg_url: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    assert migrate(redis_server, pg_url) == 0

    async def deposit(store: PostgresStore) -> dict[str, Any]:
        await store.deposit("after-move", "bob", 900, 5)
        return await ledger_of(store)

    moved = on_pg(pg_url, deposit)
    capsys.readouterr()
    assert migrate(redis_server, pg_url) == 3
    out = capsys.readouterr().out
    assert "was copied here before: nothing written" in out
    assert "CHECK FAILED: PostgreSQL and Redis differ since the copy" in out
    assert f"bob: PostgreSQL holds {BALANCES['bob'] + 900}, Redis {BALANCES['bob']}" in out
    assert on_pg(pg_url, ledger_of) == moved


def _bets_of(player: str) -> list[tuple[int, list[Any]]]:
    """The fixture's bets of ``player``, as the old scripts packed them, by seq."""
    seqs = [int(m) for m, _ in KEYS[f"lt:{{ledger}}:player:{player}:bets"]["value"]]
    packed = KEYS["lt:{ledger}:bets"]["value"]
    return [(seq, msgspec.msgpack.decode(_bytes(packed[str(seq)]))) for seq in sorted(seqs)]


def test_the_bet_record_and_the_slips_go_on_across_the_move(
        redis: Redis, redis_server: RedisServer, pg_url: str) -> None:
    assert migrate(redis_server, pg_url) == 0
    bets = _bets_of("acme~p-1")
    slip_id, packed = next(iter(KEYS["lt:{ledger}:player:acme~p-1:slips"]["value"].items()))
    in_slip = {int(seq) for seq in msgspec.msgpack.decode(_bytes(packed))}
    first = [b for seq, b in bets if seq in in_slip]

    async def read(store: PostgresStore) -> tuple[Any, ...]:
        record, cursor = await store.bet_record("acme~p-1", 200, None)
        again = await store.place_slip(SlipRequest(
            player_id="acme~p-1", table="t1", slip_id=slip_id, round_id=first[0][3],
            bets=tuple(p.SlipBet(bet_id=b[1], spot=b[4], amount=b[5]) for b in first)), 1)
        return record, cursor, again

    record, cursor, again = on_pg(pg_url, read)
    assert cursor is None
    assert [(e.bet_id, e.state, e.returned, e.balance_after) for e in record] == [
        (b[1], b[9], b[12], b[14]) for _, b in reversed(bets)]
    assert all(e.cards is not None for e in record if e.state == "settled")
    # a slip of before the move, sent again: its first answer, not a second stake
    assert isinstance(again, p.SlipAccepted), again
    assert (again.balance, [b.bet_id for b in again.bets]) == (first[0][8],
                                                               [b[1] for b in first])


def test_a_postgres_a_process_started_on_takes_the_redis_identity(
        redis: Redis, redis_server: RedisServer, pg_url: str) -> None:
    async def started(store: PostgresStore) -> str | None:
        return await store.identity(create=True)  # as Services.start does: no money yet

    assert on_pg(pg_url, started) != IDENTITY
    assert migrate(redis_server, pg_url) == 0
    assert on_pg(pg_url, lambda store: store.identity()) == IDENTITY


def test_a_redis_ledger_that_does_not_sum_to_zero_is_refused(
        redis: Redis, redis_server: RedisServer, pg_url: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    redis.hincrby("lt:{ledger}:balances", "alice", 1)
    err = _refused(redis_server, pg_url, capsys, on_pg(pg_url, ledger_of))
    assert "the Redis ledger's accounts sum to 1, not 0: run the audit" in err
