"""Failover to the synchronous standby: does it lose an acknowledged bet, or settle twice?

    .venv/bin/python bench/pg_failover.py [--runs 3] [--players 200]

One table's runner drives a round on the PostgreSQL store; players send slips through the
store (each retried, the same slip, until answered — as a client resends after
``unavailable``) and every acknowledgement is recorded. The primary is killed -9 (the
postmaster and every backend) and the standby promoted, the store following it through
its multi-host URL, either in the middle of the betting or in the middle of the round's
settlement. Then, on the promoted server: every acknowledged slip must be booked, every
bet settled once (no second payout, no bet_settled twice), the round settled, the audit
clean. Prints one JSON line a run.

The integration test (tests/integration/test_pg_failover.py) runs each case once; this
script runs them ``--runs`` times each, for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from livetable import protocol as p
from livetable.bus import MemoryBus, TableBatch
from livetable.clock import now_ms
from livetable.engine import Timing
from livetable.engine.bets import Rejection, SlipRequest
from livetable.server.runner import TableRunner
from livetable.store.base import StoreUnavailable
from livetable.store.postgres import PostgresStore

TABLE = "t1"
EVENTS = msgspec.json.Decoder(p.AnyTableEvent)


class Server(Protocol):
    def kill(self) -> None: ...

    def promote(self) -> None: ...


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

    @property
    def ok(self) -> bool:
        return not (self.lost or self.settled_twice or self.announced_twice
                    or self.audit_problems) and self.round_state == "settled"


class Watch:
    """What the bus carried: the round opened, the results announced privately."""

    def __init__(self) -> None:
        self.opened: p.RoundOpened | None = None
        self.announced: collections.Counter[str] = collections.Counter()

    def deliver(self, batch: TableBatch) -> None:
        for _, frame in batch.frames:
            event = EVENTS.decode(frame)
            if isinstance(event, p.RoundOpened) and self.opened is None:
                self.opened = event
        for _, frame in batch.private:
            self.announced[msgspec.json.decode(frame)["bet_id"]] += 1


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
        while True:
            try:
                answer = await store.place_slip(slip, now_ms())
                break
            except StoreUnavailable:
                await asyncio.sleep(0.05)  # the same slip again: idempotent by slip_id
        if isinstance(answer, Rejection):
            return  # betting closed
        acked.append(slip.slip_id or "")
        report.acknowledged_after_failover += failed_over.is_set()
        await asyncio.sleep(spacing)


async def run(cluster: Cluster, case: str, *, players: int = 200, slips: int = 10,
              settle_chunk: int = 40, betting_ms: int = 3_000) -> Report:
    """One round with a failover ``case``: "betting" or "settlement"."""
    report = Report(case=case)
    store = PostgresStore(cluster.url, settle_chunk=settle_chunk, max_connections=8)
    watch = Watch()
    bus = MemoryBus()
    bus.subscribe(watch.deliver)
    for n in range(players):
        await store.ensure_player(f"p{n}", f"P{n}", 100_000, now_ms())
    runner = TableRunner(TABLE, store, bus, timing=Timing(
        betting_ms=betting_ms, deal_interval_ms=10, reveal_interval_ms=10,
        between_rounds_ms=1_000, close_grace_ms=200))
    await runner.start()
    failed_over = asyncio.Event()
    acked: list[str] = []
    try:
        await _until(lambda: watch.opened is not None, 10)
        opened = watch.opened
        assert opened is not None
        bettors = [asyncio.ensure_future(_bettor(
            store, report, acked, opened, f"p{n}", slips, betting_ms / 1000 / slips / 2,
            failed_over)) for n in range(players)]
        if case == "betting":
            await asyncio.sleep(betting_ms / 1000 * 0.3)
        else:
            await _until(lambda: bool(watch.announced), 30)
            report.settled_before_kill = len(watch.announced)
        started = time.monotonic()
        await asyncio.to_thread(_fail_over, cluster)
        report.failover_s = round(time.monotonic() - started, 2)
        failed_over.set()
        await asyncio.gather(*bettors)
        report.round_state = await _ended(store, opened.round_id)
        report.halted = runner.halted or ""
    finally:
        await runner.stop()
    await _check(store, report, acked, opened.round_id, watch)
    await store.close()
    return report


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
    async with store._connection() as con:  # the promoted server, through the URL
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
    report.audit_problems = (await store.audit()).problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--players", type=int, default=200)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from pg_util import start_pg  # the tests' helper

    failed = 0
    for case in ("betting", "settlement"):
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
