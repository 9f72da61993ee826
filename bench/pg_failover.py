"""Failover to the synchronous standby: does it lose an acknowledged bet, or settle twice?

    .venv/bin/python bench/pg_failover.py [--runs 3] [--players 200] [--cases ...]

One table's runner drives a round on the PostgreSQL store; players send slips through the
store (each retried, the same slip, until answered — as a client resends after
``unavailable``) and every acknowledgement is recorded. The primary is killed -9 (the
postmaster and every backend) and the standby promoted, the store following it through
its multi-host URL, either in the middle of the betting or in the middle of the round's
settlement. Then, on the promoted server: every acknowledged slip must be booked, every
bet settled once (no second payout, no bet_settled twice), the round settled, the audit
clean. Prints one JSON line a run.

Two more cases. ``async-standby``: the operator left ``synchronous_standby_names`` empty (an
asynchronous standby) and the standby falls behind (it stops receiving once the round is
open, as a lagging one does); the primary is killed -9 in the betting and the standby
promoted. Every bet acknowledged then is lost, unless livetable refuses to acknowledge bets
without a synchronous standby (docs/operations.md §8.3): ``refused`` counts the slips not
acknowledged, ``lost`` must stay 0. ``LIVETABLE_POSTGRES_REPLICATION`` is passed through
as it is set (``none``: the operator's opt-in for a single node, under which the loss is
expected and shown). ``engine-kill``: PostgreSQL stays up; the engine is killed right after
its ``round_settled`` went out, at the first settlement chunk it stored and had not yet
published, and a standby engine (its own store, a newer fencing token) takes the table
over: every settled bet must still reach its player once (``unannounced`` 0), as a gateway
delivers them (dropping a result published again).

The integration test (tests/integration/test_pg_failover.py) runs each case once; this
script runs them ``--runs`` times each, for docs/benchmarks.md.

The store runs with ``replication="none"``: before the kill the standby is synchronous
(every acknowledged commit is on it), after it the promoted server is alone, and these
cases measure the failover, not the wait for a new standby (under ``sync`` bets are
refused until one streams again). ``async-standby`` is the misconfiguration itself: under
``sync`` (the default) the store refuses to start on it and takes no bet
(``refused_at_start``), so a failover has nothing acknowledged to lose; under ``none`` the
loss is measured.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from livetable import protocol as p
from livetable.betting.slips import Rejection, SlipRequest
from livetable.bus import MemoryBus, TableBatch
from livetable.clock import now_ms
from livetable.engine import Timing
from livetable.host.runner import TableRunner
from livetable.server.gateway.delivery import Served, round_of
from livetable.store.base import StoreUnavailable
from livetable.store.postgres import PostgresStore
from livetable.store.postgres.replication import Unpromised

TABLE = "t1"
CASES = ("betting", "settlement", "async-standby", "engine-kill")
EVENTS = msgspec.json.Decoder(p.AnyTableEvent)


class Server(Protocol):
    def kill(self) -> None: ...

    def promote(self) -> None: ...

    def sql(self, query: str) -> str: ...


class Cluster(Protocol):
    """tests/pg_util.py's PgCluster, as far as a run needs it."""

    @property
    def url(self) -> str: ...

    @property
    def primary(self) -> Server: ...

    @property
    def standby(self) -> Server | None: ...


@dataclass
class Report:
    case: str
    acknowledged: int = 0
    acknowledged_after_failover: int = 0
    settled_before_kill: int = 0
    booked: int = 0
    lost: list[str] = field(default_factory=list)
    settled_twice: int = 0
    announced_twice: int = 0
    round_state: str = ""
    audit_problems: list[str] = field(default_factory=list)
    failover_s: float = 0.0
    #: Why the runner held the table, if it did (a store error it took for a bug).
    halted: str = ""
    #: Slips answered with a refusal, or never answered before betting closed.
    refused: int = 0
    #: Bets settled in the store whose result never reached their player.
    unannounced: int = 0
    #: What the store asked of the primary (``none`` for the failover cases; for
    #: ``async-standby`` ``LIVETABLE_POSTGRES_REPLICATION``, by default ``sync``).
    replication: str = ""
    #: Why the store refused to start (``async-standby`` under ``sync``: nothing to lose).
    refused_at_start: str = ""

    @property
    def ok(self) -> bool:
        safe = not (self.lost or self.settled_twice or self.announced_twice
                    or self.audit_problems or self.unannounced)
        # the async standby's round may end either way: what matters is no bet lost
        return safe and (self.case == "async-standby" or self.round_state == "settled")


def _replication(case: str) -> Literal["sync", "none"]:
    """What the store asks of the primary in ``case``: the failover cases measure the
    failover itself (after it the promoted server is alone, and under ``sync`` bets would
    wait for a new standby), ``async-standby`` runs as an operator would configure it."""
    if case == "async-standby":
        return "none" if os.environ.get("LIVETABLE_POSTGRES_REPLICATION") == "none" else "sync"
    return "none"


class Watch:
    """What the bus carried: the round opened, the results announced privately — as a
    gateway delivers them: a player's results of a round published again are dropped
    (server/gateway/delivery.py's :class:`Served`)."""

    def __init__(self) -> None:
        self.opened: p.RoundOpened | None = None
        self.announced: collections.Counter[str] = collections.Counter()
        self.served = Served()

    def deliver(self, batch: TableBatch) -> None:
        for _, frame in batch.frames:
            event = EVENTS.decode(frame)
            if isinstance(event, p.RoundOpened) and self.opened is None:
                self.opened = event
        fresh: set[tuple[str, str]] = set()
        for player, frame in batch.private:
            served = self.served.of(round_of(frame))
            if player in served and (round_of(frame), player) not in fresh:
                continue  # delivered before: the gateway drops it
            served.add(player)
            fresh.add((round_of(frame), player))
            self.announced[msgspec.json.decode(frame)["bet_id"]] += 1


class DiesAfterSettling:
    """An engine's bus that dies (``kill -9``) at the first settlement chunk published after
    the round's ``round_settled`` went out: the chunk is stored, never published."""

    def __init__(self, bus: MemoryBus) -> None:
        self.bus = bus
        self.settled_out = False
        self.dead = asyncio.Event()

    async def publish(self, batch: TableBatch) -> None:
        if self.dead.is_set() or (self.settled_out and batch.private and not batch.frames):
            self.dead.set()
            await asyncio.Event().wait()
        await self.bus.publish(batch)
        self.settled_out |= any(b'"round_settled"' in f for _, f in batch.frames)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.bus, name)


async def _until(check: Callable[[], bool], most: float) -> None:
    async with asyncio.timeout(most):
        while not check():
            await asyncio.sleep(0.01)


async def _bettor(store: PostgresStore, report: Report, acked: list[str], round_: p.RoundOpened,
                  player: str, slips: int, spacing: float, failed_over: asyncio.Event) -> None:
    for k in range(slips):
        slip = SlipRequest(player_id=player, table=TABLE, slip_id=f"{player}-{k}",
                           round_id=round_.round_id,
                           bets=(p.SlipBet(bet_id=f"{player}-{k}", spot="P1", amount=10),))
        answer: p.SlipAccepted | Rejection | None = None
        while answer is None and now_ms() < round_.closes_at + 2_000:
            try:
                answer = await store.place_slip(slip, now_ms())
            except StoreUnavailable:
                await asyncio.sleep(0.05)  # the same slip again: idempotent by slip_id
        if not isinstance(answer, p.SlipAccepted):
            report.refused += slips - k
            return  # betting closed, or never acknowledged
        acked.append(slip.slip_id or "")
        report.acknowledged_after_failover += failed_over.is_set()
        await asyncio.sleep(spacing)


async def run(cluster: Cluster, case: str, *, players: int = 200, slips: int = 10,
              settle_chunk: int = 40, betting_ms: int = 3_000) -> Report:
    """One round with a failover ``case``: "betting", "settlement", "async-standby" or
    "engine-kill" (see the module's docstring)."""
    report = Report(case=case, replication=_replication(case))
    if case == "async-standby":
        await asyncio.to_thread(_asynchronous, cluster)
    store = PostgresStore(cluster.url, settle_chunk=settle_chunk, max_connections=8,
                          replication=_replication(case))
    try:
        await store.open()
    except Unpromised as exc:  # livetable refuses the misconfiguration: no bet is taken
        report.refused_at_start = str(exc)
        await store.close()
        return report
    standby_store: PostgresStore | None = None
    watch = Watch()
    bus = MemoryBus()
    bus.subscribe(watch.deliver)
    dying = DiesAfterSettling(bus)
    for n in range(players):
        await store.ensure_player(f"p{n}", f"P{n}", 100_000, now_ms())
    timing = Timing(betting_ms=betting_ms, deal_interval_ms=10, reveal_interval_ms=10,
                    between_rounds_ms=1_000, close_grace_ms=200)
    if case == "engine-kill":
        await store.claim(TABLE)  # the lease's fencing token
    runner = TableRunner(TABLE, store, dying if case == "engine-kill" else bus,
                         timing=timing)
    await runner.start()
    failed_over = asyncio.Event()
    acked: list[str] = []
    try:
        await _until(lambda: watch.opened is not None, 10)
        opened = watch.opened
        assert opened is not None
        if case == "async-standby":
            await asyncio.to_thread(_lag, cluster)
        bettors = [asyncio.ensure_future(_bettor(
            store, report, acked, opened, f"p{n}", slips, betting_ms / 1000 / slips / 2,
            failed_over)) for n in range(players)]
        if case == "engine-kill":
            await asyncio.gather(*bettors)
            await asyncio.wait_for(dying.dead.wait(), 60)  # a chunk stored, unpublished
            report.settled_before_kill = len(watch.announced)
            started = time.monotonic()
            runner, standby_store = await _take_over(runner, cluster.url, settle_chunk, bus,
                                                     timing)
        else:
            started = await _kill_primary(cluster, case, watch, report, betting_ms)
        report.failover_s = round(time.monotonic() - started, 2)
        failed_over.set()
        await asyncio.gather(*bettors)
        report.round_state = await _ended(store, opened.round_id)
        await _published(store, opened.round_id)  # its results all reached the bus
        report.halted = runner.halted or ""
    finally:
        await runner.stop()
    await _check(store, report, acked, opened.round_id, watch)
    for each in (store, standby_store):
        if each is not None:
            await each.close()
    return report


async def _kill_primary(cluster: Cluster, case: str, watch: Watch, report: Report,
                        betting_ms: int) -> float:
    """Kill the primary in the betting, or once the settlement has begun, and promote the
    standby; when (monotonic) the kill began."""
    if case == "settlement":
        await _until(lambda: bool(watch.announced), 30)
        report.settled_before_kill = len(watch.announced)
    else:
        await asyncio.sleep(betting_ms / 1000 * 0.3)
    started = time.monotonic()
    await asyncio.to_thread(_fail_over, cluster)
    return started


async def _take_over(old: TableRunner, url: str, settle_chunk: int, bus: MemoryBus,
                     timing: Timing) -> tuple[TableRunner, PostgresStore]:
    """The engine is killed (-9); a standby engine, its own store, takes the lease."""
    await old.stop()
    store = PostgresStore(url, settle_chunk=settle_chunk, max_connections=8, replication="none")
    await store.claim(TABLE)  # a newer fencing token
    runner = TableRunner(TABLE, store, bus, timing=timing)
    await runner.start()
    return runner, store


def _asynchronous(cluster: Cluster) -> None:
    """The operator's standby is asynchronous: ``synchronous_standby_names`` empty."""
    cluster.primary.sql("ALTER SYSTEM SET synchronous_standby_names = ''")
    cluster.primary.sql("SELECT pg_reload_conf()")


def _lag(cluster: Cluster) -> None:
    """The asynchronous standby falls behind: it stops receiving the primary's WAL."""
    standby = cluster.standby
    assert standby is not None, "the case needs the standby"
    standby.sql("ALTER SYSTEM SET primary_conninfo = ''")
    standby.sql("SELECT pg_reload_conf()")
    deadline = time.monotonic() + 30
    while standby.sql("SELECT count(*) FROM pg_stat_wal_receiver") != "0":
        if time.monotonic() > deadline:
            raise RuntimeError("the standby still receives")
        time.sleep(0.05)


async def _published(store: PostgresStore, round_id: str, most: float = 30) -> None:
    """Wait (at most ``most`` s) until the round is marked published (host/results.py)."""
    deadline = time.monotonic() + most
    while time.monotonic() < deadline:
        with contextlib.suppress(StoreUnavailable):
            async with store.pool.connection() as con:
                if await con.fetchval("SELECT published FROM rounds WHERE round_id = $1",
                                      round_id):
                    return
        await asyncio.sleep(0.05)


def _fail_over(cluster: Cluster) -> None:
    standby = cluster.standby
    assert standby is not None, "a failover needs the standby"
    cluster.primary.kill()
    standby.promote()


async def _ended(store: PostgresStore, round_id: str) -> str:
    """Wait (at most 60 s) until the round is settled or cancelled; its state then."""
    state = ""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with contextlib.suppress(StoreUnavailable):
            view = await store.round_view(round_id)
            state = view.state if view is not None else "unknown"
            if state in ("settled", "cancelled"):
                break
        await asyncio.sleep(0.05)
    return state


async def _check(store: PostgresStore, report: Report, acked: list[str], round_id: str,
                 watch: Watch) -> None:
    report.acknowledged = len(acked)
    async with store.pool.connection() as con:  # the promoted server, through the URL
        booked: dict[str, Any] = {r[0]: r[1] for r in await con.fetch(
            "SELECT bet_id, state FROM bets WHERE round_id = $1", round_id)}
        report.settled_twice = await con.fetchval(
            "SELECT count(*) FROM (SELECT credit FROM transfers WHERE ref = $1 AND "
            "kind = 'payout' GROUP BY credit HAVING count(*) > 1) twice", round_id)
    report.booked = len(booked)
    report.lost = [slip for slip in acked if slip not in booked]
    report.settled_twice += sum(state not in ("settled", "refunded")
                                for state in booked.values())
    report.announced_twice = sum(n > 1 for n in watch.announced.values())
    report.unannounced = sum(state in ("settled", "refunded") and bet not in watch.announced
                             for bet, state in booked.items())
    report.audit_problems = (await store.audit()).problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--players", type=int, default=200)
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=CASES)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from pg_util import start_pg  # the tests' helper

    failed = 0
    for case in args.cases:
        for _ in range(args.runs):
            cluster = start_pg(standby=True)
            try:
                report = asyncio.run(run(cluster, case, players=args.players))
            finally:
                cluster.stop()
            failed += not report.ok
            print(json.dumps({**asdict(report), "ok": report.ok}), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
