"""In-process ledger benchmark: bet intake and settlement through the store alone.

    .venv/bin/python bench/store_bench.py [--bets 100000] [--players 5000]
                                          [--postgres auto|URL] [--writer thread,process]

Bet intake: ``place_bet`` calls (slips of one), ``--concurrency`` of them in flight at once
(as when many players bet in the same second; 1 = strictly one after another); the store
batches those in flight into one transaction. Settlement: the
``commit_step`` with the SettleRound effect of a round that holds every one of those bets
(its first chunk), then ``settle_pending`` until no bet is left, chunk by chunk as the
runner does. CPU: this process's (the SQLite writer thread included) and the store's own:
the SQLite writer process's (``--writer process``) or PostgreSQL's (its postmaster and every
backend and helper, with ``--postgres auto``: a primary and a synchronous standby of its
own, tests/pg_util.py — the standby's CPU counted too), so "bets per CPU second" is per core
at the store. Prints JSON. (The Redis store measured here before its retirement:
docs/benchmarks.md.)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
# a place_bet as the gateway takes it (its slip of one, its answer worded): tests/bets.py
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from bets import place_bet

from bench.common import cpu_seconds, settle_effect, tree_cpu_seconds, wide_limits
from livetable import protocol as p
from livetable.betting.slips import BetRequest
from livetable.engine.effects import OpenRound, SetBetting
from livetable.rules import BET_SPOTS
from livetable.store.base import Store
from livetable.store.sqlite import SQLiteStore


async def run(store: Store, bets: int, players: int, concurrency: int = 100,
              seed: int = 1, server_pids: tuple[int, ...] = ()) -> dict[str, object]:
    rng = random.Random(seed)
    now = 1_000
    for i in range(players):
        await store.ensure_player(f"p{i}", f"P{i}", 10**9, now)
    limits = wide_limits()
    await store.commit_step("t1", b"{}", [], [OpenRound(table="t1", round_id="r1", shoe_id="s1",
                                                        round_no=1, closes_at=10**15,
                                                        limits=limits)], now)
    requests = [BetRequest(player_id=f"p{i % players}", table="t1", bet_id=f"b{i}",
                           round_id="r1", spot=rng.choice(list(BET_SPOTS)).value,
                           amount=rng.randint(1, 500)) for i in range(bets)]
    process = getattr(store, "process", None)

    async def store_cpu() -> float:
        """The CPU seconds of the store's own process: the writer process, PostgreSQL's
        processes (``server_pids``)."""
        if server_pids:
            return sum(tree_cpu_seconds(pid) for pid in server_pids)
        if process is not None and process.pid is not None:
            return cpu_seconds(process.pid)
        return 0.0

    started, cpu0, rcpu0 = time.perf_counter(), time.process_time(), await store_cpu()
    for first in range(0, len(requests), concurrency):  # `concurrency` players at once
        answers = await asyncio.gather(*(place_bet(store, r, now)
                                         for r in requests[first:first + concurrency]))
        assert all(isinstance(a, p.BetAccepted) for a in answers), answers[:3]
    intake = time.perf_counter() - started
    intake_cpu, intake_rcpu = time.process_time() - cpu0, await store_cpu() - rcpu0
    await store.commit_step("t1", b"{}", [], [SetBetting(table="t1", round_id="r1",
                                                         status="closed", closes_at=None)], now)
    effect = settle_effect("t1", "r1")
    started, cpu0, rcpu0 = time.perf_counter(), time.process_time(), await store_cpu()
    settled = await store.commit_step("t1", b"{}", [], [effect], now)
    chunks = [time.perf_counter() - started]
    more = True
    while more:
        t = time.perf_counter()
        chunk, more = await store.settle_pending("t1", now)
        settled += chunk
        chunks.append(time.perf_counter() - t)
    settle = time.perf_counter() - started
    settle_cpu, settle_rcpu = time.process_time() - cpu0, await store_cpu() - rcpu0
    assert len(settled) == bets, (len(settled), bets)
    audit = await store.audit()
    assert audit.ok, audit.problems
    result: dict[str, object] = {
        "bets": bets, "players": players, "concurrency": concurrency,
        "intake_seconds": round(intake, 3), "bets_per_second": round(bets / intake),
        "intake_cpu_s": {"client": round(intake_cpu, 3), "store": round(intake_rcpu, 3)},
        "bets_per_cpu_second_at_the_store": round(bets / (intake_rcpu or intake_cpu)),
        "settle_seconds": round(settle, 3), "settle_chunks": len(chunks),
        "longest_chunk_call_ms": round(max(chunks) * 1000, 1),
        "settle_cpu_s": {"client": round(settle_cpu, 3), "store": round(settle_rcpu, 3)},
        "store_cpu_ms_per_settle_call": round(settle_rcpu / len(chunks) * 1000, 2),
        "store_cpu_us_per_bet_taken": round(intake_rcpu / bets * 1e6, 1)}
    return result


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bets", type=int, default=100_000)
    parser.add_argument("--players", type=int, default=5_000)
    parser.add_argument("--concurrency", type=int, default=100,
                        help="bets in flight at once (1 = one after another)")
    parser.add_argument("--postgres",
                        help="also measure the PostgreSQL store: 'auto' (a primary and a "
                             "synchronous standby of its own) or a URL (a schema of its own)")
    parser.add_argument("--writer", default="thread",
                        help="the SQLite writers to measure, of thread,process")
    args = parser.parse_args()
    result = {}
    for writer in args.writer.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            store = SQLiteStore(Path(tmp) / "bench.sqlite3", writer=writer)
            result[f"sqlite-{writer}"] = await run(store, args.bets, args.players,
                                                   args.concurrency)
            await store.close()
    if args.postgres:
        result["postgres"] = await run_postgres(args.postgres, args)
    print(json.dumps(result, indent=2))


async def run_postgres(url: str, args: argparse.Namespace) -> dict[str, object]:
    from livetable.store.postgres import PostgresStore

    cluster = None
    pids: tuple[int, ...] = ()
    if url == "auto":
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        from pg_util import start_pg  # the tests' helper

        cluster = start_pg(standby=True)
        url = cluster.url
        pids = tuple(pid for server in (cluster.primary, cluster.standby) if server is not None
                     for pid in [server.postmaster_pid()] if pid is not None)
    store = PostgresStore(url, schema=f"bench_{os.getpid()}", max_connections=8)
    try:
        return await run(store, args.bets, args.players, args.concurrency, server_pids=pids)
    finally:
        await store.close()
        if cluster is not None:
            cluster.stop()


if __name__ == "__main__":
    asyncio.run(main())
