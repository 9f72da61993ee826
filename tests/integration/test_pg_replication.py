"""An asynchronous standby is not accepted silently: livetable asks what PostgreSQL promises.

With ``synchronous_standby_names`` empty a standby streams asynchronously; livetable used to
start without a word, ``/readyz`` stayed 200, and a failover lost 389 and 434 acknowledged
bets (2 of 2 runs) with a clean audit on the promoted server. Now (store/postgres/
replication.py): a primary configured never to wait for a standby is refused at start; a
batch of slips checks the promise in its own transaction and is refused ``unavailable``
without a synchronous standby (a standby lost, the setting emptied at run time); readiness
names "synchronous replication"; one PostgreSQL is an explicit, logged opt-in
(``--postgres-replication none``). Real servers (tests/pg_util.py): a primary and a
standby made with ``pg_basebackup -R``, synchronous or not.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))

from pg_util import PgCluster, _children, start_pg
from test_store_contract import LIMITS, T0

from livetable import protocol as p
from livetable.betting.slips import SlipRequest
from livetable.config import Settings
from livetable.engine import OpenRound
from livetable.server.health import COMMIT_PROBE_TIMEOUT, READY_PROBE_TIMEOUT, readiness
from livetable.services import Services
from livetable.store.base import StoreUnavailable
from livetable.store.postgres import PostgresStore
from livetable.store.postgres.replication import Unpromised

SECRET = b"replication-secret-0123456789abcdef"
ROUND = "t1.1.1"
#: A test waits at most this for an answer (the old code waited for ever on a lost standby).
PATIENCE = 30.0


@pytest.fixture
def async_cluster() -> Iterator[PgCluster]:
    cluster = start_pg(standby=True, synchronous=False)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def sync_cluster() -> Iterator[PgCluster]:
    cluster = start_pg(standby=True)
    try:
        yield cluster
    finally:
        cluster.stop()


def slip(n: int) -> SlipRequest:
    return SlipRequest(player_id="alice", table="t1", slip_id=f"s{n}", round_id=ROUND,
                       bets=(p.SlipBet(bet_id=f"b{n}", spot="P1", amount=50),))


async def open_table(url: str) -> None:
    """A player and an open round, made by a store that asks nothing (setup only)."""
    setup = PostgresStore(url, max_connections=1, replication="none")
    try:
        await setup.ensure_player("alice", "Alice", 100_000, T0)
        await setup.commit_step("t1", b"{}", [], [OpenRound(
            table="t1", round_id=ROUND, shoe_id="t1.1", round_no=1,
            closes_at=int(time.time() * 1000) + 600_000, limits=LIMITS)], T0)
    finally:
        await setup.close()


def booked(cluster: PgCluster) -> set[str]:
    """The bet ids the primary holds (what survives, if it does)."""
    rows = cluster.primary.sql("SELECT bet_id FROM bets ORDER BY bet_id")
    return set(rows.split()) if rows else set()


async def take(store: PostgresStore, n: int) -> p.SlipAccepted | object:
    return await asyncio.wait_for(store.place_slip(slip(n), int(time.time() * 1000)),
                                  PATIENCE)


async def test_an_asynchronous_standby_is_refused_at_start_and_takes_no_bet(
        async_cluster: PgCluster, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    assert async_cluster.primary.sql("SELECT sync_state FROM pg_stat_replication") == "async"
    await open_table(async_cluster.url)
    store = PostgresStore(async_cluster.url, max_connections=2)  # sync: the default
    try:
        with pytest.raises(Unpromised, match="synchronous_standby_names is empty"):
            await store.open()
        with pytest.raises(StoreUnavailable, match="synchronous replication"):
            await take(store, 1)
    finally:
        await store.close()
    assert booked(async_cluster) == set()  # nothing acknowledged, nothing to lose

    # the process: `livetable serve --postgres URL` does not start on it
    settings = Settings(data_dir=tmp_path, secret=SECRET, postgres_url=async_cluster.url,
                        audit_interval=0)
    services = Services(settings, roles=("gateway",))  # the store is what is asked
    with pytest.raises(Unpromised, match="--postgres-replication none"):
        await services.start()
    await services.stop()

    # one PostgreSQL (or an asynchronous standby) is an explicit opt-in, and logged
    caplog.set_level(logging.WARNING, "livetable.store")
    alone = Services(Settings(data_dir=tmp_path, secret=SECRET, audit_interval=0,
                              postgres_url=async_cluster.url, postgres_replication="none"),
                     roles=("gateway",))
    await alone.start()
    try:
        assert "a failover can lose acknowledged bets" in caplog.text
        ready, checks = await readiness(alone)
        assert ready and "replication" not in checks, checks
        assert isinstance(await alone.store.place_slip(slip(2), int(time.time() * 1000)),
                          p.SlipAccepted)
    finally:
        await alone.stop()
    assert booked(async_cluster) == {"b2"}


async def test_bets_are_refused_and_readiness_says_so_when_the_synchronous_standby_goes(
        sync_cluster: PgCluster, tmp_path: Path) -> None:
    await open_table(sync_cluster.url)
    settings = Settings(data_dir=tmp_path, secret=SECRET, postgres_url=sync_cluster.url,
                        audit_interval=0)
    services = Services(settings, roles=("gateway",))  # the store is what is asked
    await services.start()
    acknowledged: set[str] = set()
    try:
        answer = await take(services.store, 1)  # type: ignore[arg-type]  # PostgresStore
        assert isinstance(answer, p.SlipAccepted), answer
        acknowledged.add("b1")
        ready, checks = await readiness(services)
        assert ready and checks["replication"] is True, checks
        assert checks["store_commit_ms"] >= 0
        assert services.metrics.gauge("livetable_postgres_replication_ok") == 1.0

        # the operator empties synchronous_standby_names: the standby streams on, async
        sync_cluster.primary.sql("ALTER SYSTEM SET synchronous_standby_names = ''")
        sync_cluster.primary.sql("SELECT pg_reload_conf()")
        while sync_cluster.primary.sql("SELECT sync_state FROM pg_stat_replication") != "async":
            await asyncio.sleep(0.05)
        with pytest.raises(StoreUnavailable, match="synchronous_standby_names is empty"):
            await take(services.store, 2)  # type: ignore[arg-type]
        ready, checks = await readiness(services)
        assert not ready and "synchronous replication" in checks["replication"], checks
        assert services.metrics.gauge("livetable_postgres_replication_ok") == 0.0

        # named again; then the standby is lost: a commit would wait for ever, so none is
        # attempted — the slip is refused at once, and resent once the standby is back
        sync_cluster.primary.sql("ALTER SYSTEM SET synchronous_standby_names = '*'")
        sync_cluster.primary.sql("SELECT pg_reload_conf()")
        assert sync_cluster.standby is not None
        sync_cluster.standby.stop()
        while sync_cluster.primary.sql("SELECT count(*) FROM pg_stat_replication") != "0":
            await asyncio.sleep(0.05)
        with pytest.raises(StoreUnavailable, match="no standby is streaming"):
            await take(services.store, 3)  # type: ignore[arg-type]
        ready, checks = await readiness(services)
        assert not ready and "synchronous replication" in checks["replication"], checks
    finally:
        await services.stop()
    assert booked(sync_cluster) == acknowledged  # every acknowledged bet, no other


def signal_standby(cluster: PgCluster, sig: signal.Signals) -> None:
    """``sig`` to the standby's postmaster and every process it started (SIGSTOP: a
    standby that stalls — its connection open, nothing flushed)."""
    assert cluster.standby is not None
    pid = cluster.standby.postmaster_pid()
    assert pid is not None
    for victim in [pid, *_children(pid)]:
        os.kill(victim, sig)


async def test_readiness_probes_a_write_and_reports_its_commit_time(
        sync_cluster: PgCluster, tmp_path: Path) -> None:
    """A read answered through commits hung behind a stalled standby (45 s seen, every
    process 200): now a write is the probe, bounded, and its commit time is reported."""
    await open_table(sync_cluster.url)
    settings = Settings(data_dir=tmp_path, secret=SECRET, postgres_url=sync_cluster.url,
                        audit_interval=0)
    services = Services(settings, roles=("gateway",))
    await services.start()
    try:
        ready, checks = await readiness(services)
        assert ready and checks["store_commit_ms"] >= 0, checks
        assert services.metrics.gauge("livetable_store_commit_seconds") is not None
        signal_standby(sync_cluster, signal.SIGSTOP)
        try:
            ready, checks = await readiness(services)
            assert not ready, checks
            assert "commit: no answer within" in checks["store"], checks
            # the probe's own bound, or /readyz's when even that was not kept (loaded)
            assert (services.metrics.gauge("livetable_store_commit_seconds")
                    in (COMMIT_PROBE_TIMEOUT, READY_PROBE_TIMEOUT))
        finally:
            signal_standby(sync_cluster, signal.SIGCONT)
        while not (await readiness(services))[0]:  # the standby catches up: ready again
            await asyncio.sleep(0.1)
    finally:
        await services.stop()
