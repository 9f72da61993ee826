"""Errors that tell an outage from a bug.

A store raises :class:`StoreUnavailable` when it cannot reach its database — the driver's
own connection errors and timeouts, wrapped at one point per store — and a domain error
(:class:`UnknownPlayer`, …) when the request itself is refused. Everything else it lets
through is a bug: the gateway and the runner never retry it as an outage.
"""

from __future__ import annotations

import asyncio
import socket
import sqlite3
from pathlib import Path

import pytest
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import BusyLoadingError, ResponseError

from livetable import protocol as p
from livetable.betting.slips import Rejection, SlipRequest
from livetable.bus import TableBatch
from livetable.bus.keys import RedisKeys
from livetable.bus.redis import RedisBus
from livetable.bus.redis_conn import is_redis_outage
from livetable.operator.log_sqlite import SQLiteWalletLog
from livetable.server.chatroom import RedisChatRoom
from livetable.store.base import StoreUnavailable, UnknownPlayer
from livetable.store.sqlite import SQLiteStore, is_sqlite_outage

T0 = 1_700_000_000_000


def closed_port() -> int:
    """A local port nobody listens on (connecting is refused at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def unreachable() -> Redis:
    # no retries: each call fails at its first refused connection
    return Redis(host="127.0.0.1", port=closed_port(), socket_connect_timeout=0.5,
                 retry=Retry(NoBackoff(), 0))


async def test_a_redis_connection_error_surfaces_as_store_unavailable(
        unreachable: Redis) -> None:
    """The bus and the chat room: Redis out of reach is an outage (the runner retries the
    publish; the gateway answers ``unavailable``)."""
    bus = RedisBus(unreachable, ["t1"], None)  # type: ignore[arg-type]  # publishing only
    with pytest.raises(StoreUnavailable) as caught:
        await bus.publish(TableBatch(table="t1", epoch=1, seq=1, frames=[], snapshot=b"{}"))
    assert caught.value.__cause__ is not None  # the driver's error, kept as the cause
    room = RedisChatRoom(unreachable, RedisKeys())
    with pytest.raises(StoreUnavailable):
        await room.take_turn("alice", T0)
    await unreachable.aclose()


def test_which_redis_errors_are_outages() -> None:
    assert is_redis_outage(BusyLoadingError("LOADING Redis is loading the dataset"))
    assert is_redis_outage(ResponseError("BUSY Redis is busy running a script"))
    assert is_redis_outage(ConnectionResetError())
    assert not is_redis_outage(ResponseError("ERR user_script:12: attempt to index nil"))
    assert not is_redis_outage(KeyError("a bug"))


async def test_a_locked_sqlite_database_surfaces_as_store_unavailable(
        tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "db.sqlite3")
    await store.ensure_player("alice", "Alice", 100, T0)
    store.db.execute("PRAGMA busy_timeout=50")
    other = sqlite3.connect(tmp_path / "db.sqlite3", isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")  # another process holds the write lock
    try:
        with pytest.raises(StoreUnavailable, match="locked"):
            await store.deposit("d1", "alice", 10, T0)
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert await store.deposit("d1", "alice", 10, T0) == 110  # and back once it is free
    with pytest.raises(UnknownPlayer):  # a refusal is not an outage
        await store.deposit("d2", "nobody", 10, T0)
    await store.close()


async def test_a_malformed_slip_is_refused_as_such_while_the_store_is_out(
        tmp_path: Path) -> None:
    """A slip's shape is checked in the store's batch, not before the queue; a store that
    cannot open the batch's transaction still refuses a malformed slip by its shape, as it
    did when it checked the shape before queueing it: only a slip it could take is
    answered ``unavailable``."""
    store = SQLiteStore(tmp_path / "db.sqlite3")
    await store.ensure_player("alice", "Alice", 100, T0)
    store.db.execute("PRAGMA busy_timeout=50")
    other = sqlite3.connect(tmp_path / "db.sqlite3", isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")  # another process holds the write lock

    def slip(spot: str) -> SlipRequest:
        return SlipRequest(player_id="alice", table="t1", slip_id=None, round_id="r1",
                           bets=(p.SlipBet(bet_id="b1", spot=spot, amount=10),))

    try:  # the two share a batch, whose transaction cannot begin
        bad, good = await asyncio.gather(store.place_slip(slip("P9"), T0),
                                         store.place_slip(slip("P1"), T0),
                                         return_exceptions=True)
        assert bad == Rejection("bad_spot", "b1", ("P9",))
        assert isinstance(good, StoreUnavailable) and "locked" in str(good)
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert await store.place_slip(slip("P9"), T0) == Rejection("bad_spot", "b1", ("P9",))
    await store.close()


async def test_a_locked_wallet_log_surfaces_as_store_unavailable(tmp_path: Path) -> None:
    log = SQLiteWalletLog(tmp_path / "db.sqlite3")
    log.db.execute("PRAGMA busy_timeout=50")
    other = sqlite3.connect(tmp_path / "db.sqlite3", isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(StoreUnavailable):
            await log.expire_debits(T0, T0)
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert await log.expire_debits(T0, T0) == []
    await log.close()


def test_which_sqlite_errors_are_outages(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "x.sqlite3")
    with pytest.raises(sqlite3.OperationalError) as bad_sql:
        db.execute("SELECT * FROM no_such_table")
    assert not is_sqlite_outage(bad_sql.value)  # a bug, however operational it sounds
    db.close()
    assert not is_sqlite_outage(KeyError("a bug"))
